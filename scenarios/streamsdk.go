package scenarios

import "github.com/durabench/durabench/engine"

// streamMetrics are the per-chunk diagnostics of the SDK suite's stream
// benchmarks: chunk round trips by index bucket, each run's delay variation
// and writer slip, the steady read and write rates, and SL for continuity.
var streamMetrics = []string{"crtt_first", "crtt_early", "crtt_late", "cdv", "write_slip", "read_rate", "write_rate", "sl", "ttc"}

// stream-replay replays a captured (or synthetic) cadence: chunk i is
// written at its offset / speed after the writer starts, with its size,
// while the reader drains the stream. The cell records the cadence's
// SHA-256 (cadence_sha256) so two results name the same capture.
//
// stream-sizes is a size sweep: the writer rotates its chunks through
// sizes, so every size appears all along the stream and a chunk's size is
// independent of its position (CRTT by size is not CRTT by progress).
func init() {
	Register(&Scenario{
		Name:        "stream-replay",
		Description: "a writer replays a cadence of (offset, bytes) chunks at a speed while a reader drains it",
		Options: []OptionSpec{
			{Name: "cadence", Type: String, Default: "steady",
				Help: "a built-in cadence (steady, bursty, pauses) or a JSON file: a list of [offset_ms, bytes]"},
			{Name: "speed", Type: Int, Default: "1", Min: 1, Help: "replay speed: offsets are divided by it"},
		},
		Metrics: streamMetrics,
		Program: func(v Values) (engine.Program, error) {
			cad, err := LoadCadence(v.String("cadence"))
			if err != nil {
				return engine.Program{}, err
			}
			return engine.Program{Stages: []engine.Stage{{Kind: engine.StageStream,
				Stream: &engine.StreamSpec{Cadence: cad.Chunks, Speed: v.Int("speed")}}}}, nil
		},
	})
	Register(&Scenario{
		Name:        "stream-sizes",
		Description: "a writer rotates its chunks through sizes (size independent of position) while a reader drains them",
		Options: []OptionSpec{
			{Name: "sizes", Type: BytesList, Default: "64/1KB/16KB/64KB", Help: "chunk sizes, rotated: chunk i has sizes[i mod n]"},
			{Name: "chunks", Type: Int, Default: "60", Min: 1, Size: true, Help: "chunks the writer writes"},
			{Name: "interval", Type: Duration, Default: "10ms", Help: "pacing between chunk writes"},
		},
		Metrics: streamMetrics,
		Program: func(v Values) (engine.Program, error) {
			return engine.Program{Stages: []engine.Stage{{Kind: engine.StageStream,
				Stream: &engine.StreamSpec{Chunks: v.Int("chunks"), Interval: v.Duration("interval"), Sizes: v.BytesList("sizes")}}}}, nil
		},
	})
}

// stream-pipeline is the SDK suite's 1 MB stream through a transform: the
// writer writes chunks of size bytes (64 × 16 KB = 1 MB by default) to a
// stream, a transform step reads each, upper-cases it and writes it to a
// second stream, and the reader drains that one. Chunk round trips run end
// to end (written by the writer, read by the reader).
func init() {
	Register(&Scenario{
		Name:        "stream-pipeline",
		Description: "a writer, a transform step and a reader on two streams (1 MB through a transform)",
		Options: []OptionSpec{
			{Name: "chunks", Type: Int, Default: "64", Min: 1, Size: true, Help: "chunks the writer writes"},
			{Name: "size", Type: Bytes, Default: "16KB", Help: "bytes of each chunk (KB = 1024 bytes)"},
			{Name: "interval", Type: Duration, Default: "0s", Help: "pacing between chunk writes (0s: as fast as the stream takes them)"},
		},
		Metrics: streamMetrics,
		Program: func(v Values) (engine.Program, error) {
			return engine.Program{Stages: []engine.Stage{{Kind: engine.StageStream,
				Stream: &engine.StreamSpec{Chunks: v.Int("chunks"), Interval: v.Duration("interval"),
					Sizes: []int{v.Bytes("size")}, Transform: true}}}}, nil
		},
	})
}

// Stream is p's stream stage (nil when p has none): the metrics.Config's
// Stream.
func Stream(p engine.Program) *engine.StreamSpec {
	for _, s := range p.Stages {
		if s.Kind == engine.StageStream && s.Stream != nil {
			return s.Stream
		}
	}
	return nil
}
