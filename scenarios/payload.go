package scenarios

import "github.com/durabench/durabench/engine"

// payload passes size bytes through every step: each step's input is
// written with its step_created and its output with its step_completed, so
// the world stores both and every replay loads them with the log (the SDK
// suite's 10 KB payloads). shape=fanout runs the steps in parallel,
// shape=sequence one after another.
func init() {
	Register(&Scenario{
		Name:        "payload",
		Description: "steps that take and return size bytes, in a fan-out or a sequence",
		Options: []OptionSpec{
			{Name: "size", Type: Bytes, Default: "10KB", Help: "bytes of each step's input and of its output (KB = 1024 bytes)"},
			{Name: "steps", Type: Int, Default: "10", Min: 1, Size: true, Help: "steps in the fan-out or the sequence"},
			{Name: "shape", Type: String, Default: "sequence", Choices: []string{"sequence", "fanout"},
				Help: "sequence: one step after another; fanout: all in parallel"},
		},
		Metrics: []string{"ttfs", "first_end", "ttls", "stso", "wo", "ttc"},
		Program: func(v Values) (engine.Program, error) {
			p := engine.Sequence(v.Int("steps"))
			if v.String("shape") == "fanout" {
				p = engine.FanOut(v.Int("steps"))
			}
			p.Payload = v.Bytes("size")
			return p, nil
		},
	})
}
