package driver

import (
	"context"

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
