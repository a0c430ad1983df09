package engine

import (
	"encoding/json"
	"fmt"
	"time"
)

// StageKind is what a stage of a workflow program does.
type StageKind string

const (
	// StageSteps runs Steps steps in parallel (fan-out: one stage of N;
	// sequential: N stages of 1).
	StageSteps StageKind = "steps"
	// StageHook creates a hook and waits until it is resumed.
	StageHook StageKind = "hook"
	// StageStream runs a writer step and a reader step on one stream (with
	// StreamSpec.Transform, a transform step between them on two streams).
	StageStream StageKind = "stream"
)

// Stage is one stage of a Program.
type Stage struct {
	Kind StageKind `json:"kind"`
	// Steps is the number of parallel steps (StageSteps).
	Steps int `json:"steps,omitempty"`
	// Race makes a StageSteps stage complete when its first step completes
	// (Promise.race): the run goes on from there, while the other steps
	// still run to completion and are recorded; the run ends only once
	// they all did.
	Race bool `json:"race,omitempty"`
	// Stream describes the writer/reader pair (StageStream).
	Stream *StreamSpec `json:"stream,omitempty"`
}

// StreamSpec is a stream stage: the writer writes Chunks chunks, one every
// Interval (or at the offsets of a Cadence), while the reader drains the
// stream.
type StreamSpec struct {
	Chunks   int           `json:"chunks"`
	Interval time.Duration `json:"interval"`
	// Structured makes each chunk a small JSON object instead of a string.
	Structured bool `json:"structured,omitempty"`
	// Cadence, when set, replaces Chunks and Interval: chunk i is due at
	// Cadence[i].Offset / Speed after the writer starts and holds
	// Cadence[i].Bytes bytes (a captured token stream replayed).
	Cadence []CadenceChunk `json:"cadence,omitempty"`
	// Speed divides the cadence's offsets (2: twice as fast); 0 means 1.
	Speed int `json:"speed,omitempty"`
	// Transform puts a third step between writer and reader: it reads the
	// writer's stream, transforms each chunk (upper-cases its letters) and
	// writes it, with the writer's timestamp, to a second stream the
	// reader drains — a pipeline, whose round trips run end to end.
	Transform bool `json:"transform,omitempty"`
	// Sizes, when set, are the chunk sizes in bytes, rotated: chunk i holds
	// Sizes[i % len(Sizes)] bytes, so every size appears all along the
	// stream and size is independent of position.
	Sizes []int `json:"sizes,omitempty"`
}

// CadenceChunk is one chunk of a cadence: when it is due after the writer
// starts, and its size.
type CadenceChunk struct {
	Offset time.Duration `json:"offset"`
	Bytes  int           `json:"bytes"`
}

// Due is when chunk i is due after the writer starts.
func (s *StreamSpec) Due(i int) time.Duration {
	if len(s.Cadence) > 0 {
		sp := max(s.Speed, 1)
		return s.Cadence[i].Offset / time.Duration(sp)
	}
	return s.Interval * time.Duration(i)
}

// ChunkCount is how many chunks the writer writes.
func (s *StreamSpec) ChunkCount() int {
	if len(s.Cadence) > 0 {
		return len(s.Cadence)
	}
	return s.Chunks
}

// ChunkBytes is the size chunk i must have, or 0 for the default text or
// structured delta.
func (s *StreamSpec) ChunkBytes(i int) int {
	switch {
	case len(s.Cadence) > 0:
		return s.Cadence[i].Bytes
	case len(s.Sizes) > 0:
		return s.Sizes[i%len(s.Sizes)]
	}
	return 0
}

// Body is what every step body does: nothing by default (durabench measures
// framework overhead), or sleep Fixed plus a uniform random extra up to Jitter.
type Body struct {
	Fixed  time.Duration `json:"fixed,omitempty"`
	Jitter time.Duration `json:"jitter,omitempty"`
}

// Program is a declarative workflow: stages run one after another.
type Program struct {
	Stages []Stage `json:"stages"`
	Body   Body    `json:"body,omitempty"`
	// Payload is the size in bytes of every step's input (written with its
	// step_created) and of its output (written with its step_completed):
	// the world stores them, and every replay loads them with the log.
	Payload int `json:"payload,omitempty"`
}

// FanOut is one stage of n parallel steps.
func FanOut(n int) Program { return Program{Stages: []Stage{{Kind: StageSteps, Steps: n}}} }

// Race is one stage of n parallel steps that completes with the first.
func Race(n int) Program { return Program{Stages: []Stage{{Kind: StageSteps, Steps: n, Race: true}}} }

// Sequence is n stages of one step each.
func Sequence(n int) Program {
	st := make([]Stage, n)
	for i := range st {
		st[i] = Stage{Kind: StageSteps, Steps: 1}
	}
	return Program{Stages: st}
}

// Validate reports the first impossible value.
func (p Program) Validate() error {
	if len(p.Stages) == 0 {
		return fmt.Errorf("program has no stages")
	}
	for i, s := range p.Stages {
		switch s.Kind {
		case StageSteps:
			if s.Steps < 1 {
				return fmt.Errorf("stage %d: steps %d < 1", i, s.Steps)
			}
		case StageHook:
		case StageStream:
			if s.Stream == nil || s.Stream.ChunkCount() < 1 || s.Stream.Interval < 0 || s.Stream.Speed < 0 {
				return fmt.Errorf("stage %d: stream needs chunks >= 1, interval >= 0 and speed >= 0", i)
			}
			for j, c := range s.Stream.Cadence {
				if c.Offset < 0 || c.Bytes < 1 || (j > 0 && c.Offset < s.Stream.Cadence[j-1].Offset) {
					return fmt.Errorf("stage %d: cadence chunk %d: offsets must not decrease and bytes must be >= 1", i, j)
				}
			}
			for _, b := range s.Stream.Sizes {
				if b < 1 {
					return fmt.Errorf("stage %d: chunk size %d < 1", i, b)
				}
			}
		default:
			return fmt.Errorf("stage %d: unknown kind %q", i, s.Kind)
		}
	}
	if p.Payload < 0 {
		return fmt.Errorf("payload %d < 0", p.Payload)
	}
	if p.Body.Fixed < 0 || p.Body.Jitter < 0 {
		return fmt.Errorf("body durations must not be negative")
	}
	return nil
}

// StepCount is the number of step bodies the program runs (a stream stage
// runs two: writer and reader).
func (p Program) StepCount() int {
	n := 0
	for _, s := range p.Stages {
		switch s.Kind {
		case StageSteps:
			n += s.Steps
		case StageStream:
			n += stageSteps(s)
		}
	}
	return n
}

// StepSeq is the ordinal in the whole run (0-based, stage order) of step
// index of stage: StepSpan.Seq. A target that reports stages and indexes
// gets its sequence numbers from here.
func (p Program) StepSeq(stage, index int) int {
	seq := 0
	for i := 0; i < stage && i < len(p.Stages); i++ {
		seq += stageSteps(p.Stages[i])
	}
	return seq + index
}

func (p Program) encode() []byte {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // a Program always marshals
	}
	return b
}

func decodeProgram(b []byte) (Program, error) {
	var p Program
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("decode program: %w", err)
	}
	return p, nil
}

// payloadBytes is a step's input or output of n bytes: printable filler,
// not zeros, so no layer stores it for less than its size.
func payloadBytes(n int) []byte { return sizedChunk(-1, n) }
