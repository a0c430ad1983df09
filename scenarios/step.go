package scenarios

import "github.com/durabench/durabench/engine"

// step is one no-op step and nothing else: no hook, so the orchestrator runs
// the step inline right after dispatch (the "turbo" path). Its TTFS is the
// floor of every other scenario's.
func init() {
	Register(&Scenario{
		Name:        "step",
		Description: "one no-op step, no hooks (the inline turbo path)",
		Options: []OptionSpec{
			{Name: "body", Type: Duration, Default: "0s", Help: "fixed duration of the step body"},
		},
		Metrics: []string{"ttfs", "ttc"},
		Program: func(v Values) (engine.Program, error) {
			p := engine.Sequence(1)
			p.Body.Fixed = v.Duration("body")
			return p, nil
		},
	})
}
