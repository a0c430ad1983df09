package scenarios

import (
	"time"

	"github.com/durabench/durabench/engine"
)

// Stream scenarios run one stream stage: a writer step and a reader step in
// parallel on one stream.
//
// stream-latency measures how fast a chunk reaches a reader that is already
// waiting (SL); its defaults (20 chunks, one every 10 ms) keep a run short
// while giving 20 samples per run, and the 10 ms spacing keeps the reader
// caught up, so SL is propagation rather than backlog.
//
// stream-overhead is the reference's LLM-shaped load: 300 token deltas paced
// at 100/s (3 s of generation) while the reader drains the stream; SO is the
// time beyond that 3 s window. shape=structured sends each delta as a small
// JSON object ({"type":"text-delta","id":…,"text":…}) instead of a string,
// so the SO gap between the two shapes is the cost of the larger chunks.
func init() {
	Register(&Scenario{
		Name:        "stream-latency",
		Description: "parallel writer and reader steps on one stream (chunk propagation)",
		Options: []OptionSpec{
			{Name: "chunks", Type: Int, Default: "20", Min: 1, Size: true, Help: "chunks the writer writes"},
			{Name: "interval", Type: Duration, Default: "10ms", Help: "pacing between chunk writes"},
		},
		Metrics: []string{"sl", "ttc"},
		Program: func(v Values) (engine.Program, error) {
			return streamProgram(v.Int("chunks"), v.Duration("interval"), false), nil
		},
	})
	Register(&Scenario{
		Name:        "stream-overhead",
		Description: "a writer streams 300 deltas at 100/s (3 s) while a reader drains the stream",
		Options: []OptionSpec{
			{Name: "chunks", Type: Int, Default: "300", Min: 1, Size: true, Help: "deltas the writer writes"},
			{Name: "interval", Type: Duration, Default: "10ms", Help: "pacing between deltas (10ms = 100/s)"},
			{Name: "shape", Type: String, Default: "text", Choices: []string{"text", "structured"},
				Help: "text: raw string deltas; structured: small JSON objects"},
		},
		Metrics: []string{"so", "sl", "ttc"},
		Program: func(v Values) (engine.Program, error) {
			return streamProgram(v.Int("chunks"), v.Duration("interval"), v.String("shape") == "structured"), nil
		},
	})
}

func streamProgram(chunks int, interval time.Duration, structured bool) engine.Program {
	return engine.Program{Stages: []engine.Stage{{Kind: engine.StageStream,
		Stream: &engine.StreamSpec{Chunks: chunks, Interval: interval, Structured: structured}}}}
}

// ChunkInterval is the writer's pacing interval of p's stream stage (0 when
// p has none): the metrics.Config.ChunkInterval that SO needs.
func ChunkInterval(p engine.Program) time.Duration {
	for _, s := range p.Stages {
		if s.Kind == engine.StageStream && s.Stream != nil {
			return s.Stream.Interval
		}
	}
	return 0
}
