package scenarios

import "github.com/durabench/durabench/engine"

// race is Promise.race over N steps, then one step: the run goes on as soon
// as the first branch completes (first_end), the step after the race shows
// how fast it goes on, and the other branches still run to completion and
// are recorded (TTLS is the last of them; the run ends after it).
func init() {
	Register(&Scenario{
		Name:        "race",
		Description: "a race of N parallel steps (the run goes on with the first to finish), then one step",
		Options: []OptionSpec{
			{Name: "branches", Type: Int, Default: "4", Min: 1, Size: true, Help: "parallel steps in the race"},
			{Name: "body", Type: Duration, Default: "0s", Help: "fixed duration of each step body"},
			{Name: "jitter", Type: Duration, Default: "0s", Help: "uniform random extra duration of each step body, up to this"},
		},
		Metrics: []string{"ttfs", "first_end", "ttls", "skew", "stso", "ttc"},
		Program: func(v Values) (engine.Program, error) {
			p := engine.Race(v.Int("branches"))
			p.Stages = append(p.Stages, engine.Stage{Kind: engine.StageSteps, Steps: 1})
			p.Body = engine.Body{Fixed: v.Duration("body"), Jitter: v.Duration("jitter")}
			return p, nil
		},
	})
}
