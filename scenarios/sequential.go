package scenarios

import "github.com/durabench/durabench/engine"

// sequential is N stages of one step: step-to-step overhead, inline versus
// queue hop, and how replay cost grows with the log. With steps=1020 (the
// reference's run) the versions' inline budget of 100 makes about every
// 100th gap a queue hop, so STSO splits into inline and queue-hop, and its
// slope over the step index shows the replay cost of a longer log.
func init() {
	Register(&Scenario{
		Name:        "sequential",
		Description: "N steps one after another (step-to-step overhead, replay cost)",
		Options: []OptionSpec{
			{Name: "steps", Type: Int, Default: "50", Min: 1, Size: true, Help: "steps in the chain"},
			{Name: "body", Type: Duration, Default: "0s", Help: "fixed duration of each step body"},
		},
		Metrics: []string{"ttfs", "ttls", "stso", "stso_inline", "stso_queue", "wo", "ttc"},
		Program: func(v Values) (engine.Program, error) {
			p := engine.Sequence(v.Int("steps"))
			p.Body.Fixed = v.Duration("body")
			return p, nil
		},
	})
}
