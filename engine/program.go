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
	// StageStream runs a writer step and a reader step on one stream.
	StageStream StageKind = "stream"
)

// Stage is one stage of a Program.
type Stage struct {
	Kind StageKind `json:"kind"`
	// Steps is the number of parallel steps (StageSteps).
	Steps int `json:"steps,omitempty"`
	// Stream describes the writer/reader pair (StageStream).
	Stream *StreamSpec `json:"stream,omitempty"`
}

// StreamSpec is a stream stage: the writer writes Chunks chunks, one every
// Interval, while the reader drains the stream.
type StreamSpec struct {
	Chunks   int           `json:"chunks"`
	Interval time.Duration `json:"interval"`
	// Structured makes each chunk a small JSON object instead of a string.
	Structured bool `json:"structured,omitempty"`
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
}

// FanOut is one stage of n parallel steps.
func FanOut(n int) Program { return Program{Stages: []Stage{{Kind: StageSteps, Steps: n}}} }

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
			if s.Stream == nil || s.Stream.Chunks < 1 || s.Stream.Interval < 0 {
				return fmt.Errorf("stage %d: stream needs chunks >= 1 and interval >= 0", i)
			}
		default:
			return fmt.Errorf("stage %d: unknown kind %q", i, s.Kind)
		}
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
			n += 2
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
