package driver

import (
	"context"
	"time"

	"github.com/durabench/durabench/engine"
)

// External runs a cell's engine somewhere else — `durabench worker`
// processes on a NATS cluster (package cluster). With Config.External set,
// the driver never consumes: it only starts runs, and External feeds the
// workers' timeline records, converted to the driver's runtime clock, to the
// driver's observer.
type External interface {
	// Attach starts feeding records into obs. It is called once, before the
	// first run starts; detach stops feeding when the cell is over.
	Attach(ctx context.Context, obs engine.Observer) (detach func(), err error)
}

// Target is an engine under test that the driver does not host, reached
// through the target protocol (package target's Session): the driver
// starts runs and resumes hooks through it, and it feeds the runs'
// engine-side timelines, converted to the driver's clock, to the driver's
// observer; fail records a run that failed with an error.
type Target interface {
	Attach(ctx context.Context, obs engine.Observer, fail func(run string, at time.Duration, err error)) (detach func(), err error)
	StartRun(ctx context.Context, id string, p engine.Program) error
	ResumeHook(ctx context.Context, token, resumeID string, payload []byte) error
}
