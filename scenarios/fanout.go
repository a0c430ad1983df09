package scenarios

import "github.com/durabench/durabench/engine"

// fanout is one stage of N parallel no-op steps: the dispatch path under a
// burst, where the reference found the 300 s stalls and the 256-branch cliff.
func init() {
	Register(&Scenario{
		Name:        "fanout",
		Description: "one stage of N parallel no-op steps (dispatch under a burst)",
		Options: []OptionSpec{
			{Name: "branches", Type: Int, Default: "20", Min: 1, Size: true, Help: "parallel steps in the stage"},
			{Name: "body", Type: Duration, Default: "0s", Help: "fixed duration of each step body"},
		},
		Metrics: []string{"ttfs", "first_end", "ttls", "skew", "skew_offset", "wo", "ttc"},
		Program: func(v Values) (engine.Program, error) {
			p := engine.FanOut(v.Int("branches"))
			p.Body.Fixed = v.Duration("body")
			return p, nil
		},
	})
}
