package sweep

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/durabench/durabench/internal/cluster"
	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/registry"
)

// Where the engine runs (the workers setting).
const (
	// WorkersLocal runs the engine in the driver's process (the default).
	WorkersLocal = "local"
	// WorkersExternal runs it on `durabench worker` processes that share
	// the external NATS cluster; the driver only starts runs and collects
	// the workers' records.
	WorkersExternal = "external"
)

// ExternalSettings configure where a sweep's engine runs.
type ExternalSettings struct {
	// Workers is WorkersLocal ("" too) or WorkersExternal.
	Workers string
	// Expect is the number of workers each cell waits for (default 1).
	Expect int
	// Wait bounds that wait (default cluster.DefaultWait).
	Wait time.Duration
}

// Enabled reports whether the engine runs on external workers.
func (e ExternalSettings) Enabled() bool { return e.Workers == WorkersExternal }

func init() {
	fields = append(fields,
		field{"workers", false, "where the engine runs: local (in this process) or external (durabench worker processes on --nats-url)", func(p *Plan, v []string) error {
			switch v[0] {
			case WorkersLocal, WorkersExternal:
				p.External.Workers = v[0]
				return nil
			}
			return fmt.Errorf("%q is not local or external", v[0])
		}},
		field{"expect-workers", false, "workers each cell waits for (--workers external; default 1)", func(p *Plan, v []string) (err error) {
			p.External.Expect, err = intMin(v[0], 1)
			return err
		}},
		field{"worker-wait", false, "how long a cell waits for the expected workers (default 30s)", func(p *Plan, v []string) (err error) {
			p.External.Wait, err = duration(v[0], true)
			return err
		}},
	)
	fieldKinds["expect-workers"] = kInt
	fieldKinds["worker-wait"] = kDuration
}

// validateExternal checks the workers settings against the rest of the
// plan: the driver and the workers meet on an external NATS server, and
// the workers reach the cell's world there (nats) or on an external
// PostgreSQL server (postgres), so the plan must run one of those worlds
// alone, with --nats-url, and with --postgres-url on postgres.
func (p *Plan) validateExternal() error {
	if !p.External.Enabled() {
		if p.given("expect-workers") || p.given("worker-wait") {
			return invalid("expect-workers and worker-wait apply to --workers external only")
		}
		return nil
	}
	if len(p.Worlds) != 1 || p.Worlds[0] != registry.NATS && p.Worlds[0] != registry.Postgres {
		return &UsageError{Field: "workers external", Msg: fmt.Sprintf("the world must be nats or postgres alone (got %s)", joinComma(p.Worlds))}
	}
	if p.WorldSettings[registry.NATS]["url"] == "" {
		if p.Worlds[0] == registry.Postgres {
			return invalid("workers external needs --nats-url: the driver and the workers meet on a NATS server")
		}
		return invalid("workers external needs --nats-url: workers cannot reach the embedded server")
	}
	if p.Worlds[0] == registry.Postgres && p.WorldSettings[registry.Postgres]["url"] == "" {
		return invalid("workers external on postgres needs --postgres-url: workers cannot reach the throwaway server")
	}
	if p.External.Expect == 0 {
		p.External.Expect = 1
	}
	return nil
}

// runCellExternal runs one cell with its engine on external workers: the
// driver creates the cell's streams, waits for the workers, announces the
// cell to them and estimates their clocks, starts runs without consuming,
// and builds the cell from the records the workers publish back.
func (r *sweepRun) runCellExternal(ctx context.Context, c CellPlan) (results.Cell, *driver.Result, error) {
	p := r.plan
	w, err := r.newWorld(context.WithoutCancel(ctx), c)
	if err != nil {
		return results.Cell{}, nil, fmt.Errorf("world %s: %w", c.World.Name, err)
	}
	defer w.close()                        // after the workers let go of the streams (End below)
	prefix := r.cellPrefix(c)              // the streams or schema newWorld created, which the workers open
	nats := p.WorldSettings[registry.NATS] // where the driver and the workers meet
	d, err := cluster.Dial(ctx, cluster.CoordinatorConfig{URL: nats["url"], Auth: registry.NATSAuth(nats),
		Expect: p.External.Expect, Wait: p.External.Wait})
	if err != nil {
		return results.Cell{}, nil, err
	}
	defer d.Close()
	// A profile file, and the hdr files it or the fault overrides name,
	// live on the driver: the workers get the copies read in Validate.
	spec := cluster.CellSpec{Sweep: r.sweepPrefix(), Prefix: prefix, Label: c.Label(), Version: c.Version.Name, Features: c.Features,
		Options: c.WorldOptions, World: c.World.Name, Settings: recordedSettings(c.World, c.WorldSettings),
		Storage: nats["storage"], Replicas: nats.Int("replicas"),
		Profile: c.ProfileName, ProfileFiles: c.ProfileFiles, Faults: p.Faults, Seed: c.Seed, NoSpans: !p.Spans}
	cell, err := d.Open(ctx, spec, w.Runtime())
	if err != nil {
		if ctx.Err() != nil {
			return results.Cell{}, &driver.Result{Interrupted: true}, nil
		}
		return results.Cell{}, nil, err
	}
	dc := r.driverConfig(c, w, c.Hash)
	dc.External = cell
	m := startCPU(nil)
	res, derr := driver.Run(ctx, dc)
	cpu := m.stop()
	rep := cell.End(ctx, endTimeout)
	if derr != nil {
		return results.Cell{}, nil, derr
	}
	if res.Interrupted {
		return results.Cell{}, res, nil
	}
	rc := c.summarize(res, c.Identity)
	rc.CPU = cpu // durabench's own: the workers' processes are their machines'
	rc.Workers = rep.IDs()
	rc.Redeliveries = int(rep.Redeliveries())
	for _, wr := range rep.Workers {
		st := results.WorkerStat{Worker: wr.ID, Host: wr.Host, Concurrency: wr.Concurrency, OffsetUS: us(wr.Clock.Offset), RTTUS: us(wr.Clock.RTT),
			Deliveries: wr.Stats.Deliveries, Redeliveries: wr.Stats.Redeliveries, Steps: wr.Stats.Steps,
			Lost: wr.Lost, Left: wr.Left}
		if wr.HasDrift {
			d := us(wr.Drift)
			st.DriftUS = &d
		}
		rc.WorkerStats = append(rc.WorkerStats, st)
	}
	// The driver's world (it starts runs) and the workers' (they run
	// them), and the timeline records lost on the way between them.
	if inc := world.IncidentsOf(w.World).Add(rep.Incidents()); inc.Total() > 0 {
		rc.WorldIncidents = &inc
	}
	return rc, res, nil
}

// recordedSettings are the values of k's settings that results record
// (never a credential: a Secret setting is not recorded).
func recordedSettings(k *registry.Kind, v registry.Values) map[string]string {
	out := map[string]string{}
	for _, s := range k.Settings {
		if s.Record && !s.Secret && v[s.Name] != "" {
			out[s.Name] = v[s.Name]
		}
	}
	return out
}

// endTimeout bounds the end of a cell on the workers: their engines stop
// (running handlers finish) before the driver deletes the streams.
const endTimeout = 30 * time.Second

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// externalSummary is the progress line's note on a cell run by external
// workers: who took part, lost ones, and the redeliveries (engine retries
// and messages a lost worker held).
func externalSummary(rc *results.Cell) string {
	s := fmt.Sprintf(", workers %s", strings.Join(rc.Workers, ","))
	var lost []string
	for _, w := range rc.WorkerStats {
		if w.Lost {
			lost = append(lost, w.Worker)
		}
	}
	if len(lost) > 0 {
		s += fmt.Sprintf(" (lost %s)", strings.Join(lost, ","))
	}
	if rc.Redeliveries > 0 {
		s += fmt.Sprintf(", %d redeliveries", rc.Redeliveries)
	}
	return s
}
