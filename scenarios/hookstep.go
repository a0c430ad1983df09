package scenarios

import "github.com/durabench/durabench/engine"

// hookStep registers a hook before one step. The run suspends on the hook,
// so the step after it can never run inline with the start: it is reached
// through a resume and a queue delivery (the dispatch path). The driver
// resumes the hook as soon as the engine reports it (driver.HookResumer), so
// TTFS is start → hook → resume → first step, and resume_to_step isolates
// the resume path that lazy_hook_resume shortens.
func init() {
	Register(&Scenario{
		Name:        "hook-step",
		Description: "a hook registered before one step, resumed by the driver at once (dispatch path)",
		Options: []OptionSpec{
			{Name: "body", Type: Duration, Default: "0s", Help: "fixed duration of the step body"},
		},
		Metrics: []string{"ttfs", "resume_to_step", "ttc"},
		Program: func(v Values) (engine.Program, error) {
			p := engine.Program{Stages: []engine.Stage{
				{Kind: engine.StageHook},
				{Kind: engine.StageSteps, Steps: 1},
			}}
			p.Body.Fixed = v.Duration("body")
			return p, nil
		},
	})
}
