package sweep

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/durabench/durabench/driver"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/target"
)

// Reference is the built-in engine as a target: it runs in-process on each
// world of the plan, once per version and kill-switch set.
const Reference = "reference"

// TargetSpec is an engine under test as the plan names it: Reference, an
// adapter (the executable durabench-target-<Name>, started with Args), or
// a target already serving the protocol at URL.
type TargetSpec struct {
	Name string
	Args []string
	URL  string
}

// String is the spec as the user writes it.
func (t TargetSpec) String() string {
	if t.URL != "" {
		return t.URL
	}
	return strings.Join(append([]string{t.Name}, t.Args...), " ")
}

// IsReference reports whether t is the built-in engine.
func (t TargetSpec) IsReference() bool { return t.Name == Reference && t.URL == "" }

var adapterName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// ParseTarget reads one --targets value: "reference", "NAME [flags…]" or
// a URL.
func ParseTarget(s string) (TargetSpec, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return TargetSpec{}, fmt.Errorf("%q is not a target URL (http://host:port)", s)
		}
		// The name a URL target's cells carry: its host and port.
		return TargetSpec{Name: u.Host, URL: strings.TrimRight(s, "/")}, nil
	}
	f := strings.Fields(s)
	if len(f) == 0 || !adapterName.MatchString(f[0]) {
		return TargetSpec{}, fmt.Errorf("%q is not a target: reference, an adapter name (lower case, digits, -) or http://host:port", s)
	}
	if f[0] == Reference && len(f) > 1 {
		return TargetSpec{}, fmt.Errorf("%q: the reference target takes no flags (the plan's versions, switches and worlds set it)", s)
	}
	return TargetSpec{Name: f[0], Args: f[1:]}, nil
}

func setTargets(p *Plan, v []string) error {
	p.Targets = nil
	seen := map[string]bool{}
	for _, s := range v {
		t, err := ParseTarget(s)
		if err != nil {
			return err
		}
		if seen[t.Name] {
			return fmt.Errorf("target %s is given twice", t.Name)
		}
		seen[t.Name] = true
		p.Targets = append(p.Targets, t)
	}
	return nil
}

// foreignTargets are the plan's targets other than the reference.
func (p *Plan) foreignTargets() []TargetSpec {
	var out []TargetSpec
	for _, t := range p.Targets {
		if !t.IsReference() {
			out = append(out, t)
		}
	}
	return out
}

// hasReference reports whether the plan runs the built-in engine.
func (p *Plan) hasReference() bool {
	for _, t := range p.Targets {
		if t.IsReference() {
			return true
		}
	}
	return false
}

// liveTarget is a target reached for the sweep: its client and what it
// said it is; plugin is set when the sweep started the adapter.
type liveTarget struct {
	spec   TargetSpec
	client *target.Client
	info   target.Info
	plugin *target.Plugin
}

// openTargets reaches every foreign target of the plan — starting the
// adapters, asking each for its info — before the first cell, so a target
// that is not there fails the sweep at once, not after an hour of other
// cells. The caller closes them (stopping the adapters it started).
func (p *Plan) openTargets(ctx context.Context, log io.Writer) (map[string]*liveTarget, func(), error) {
	live := map[string]*liveTarget{}
	closeAll := func() {
		for _, t := range live {
			if t.plugin != nil {
				_ = t.plugin.Stop()
			}
		}
	}
	for _, spec := range p.foreignTargets() {
		lt := &liveTarget{spec: spec}
		live[spec.Name] = lt // closeAll stops its adapter from here on
		base := spec.URL
		if base == "" {
			path, err := target.Find(spec.Name)
			if err != nil {
				closeAll()
				return nil, nil, &UsageError{Flag: "--targets", Err: err}
			}
			pl, err := target.Launch(ctx, spec.Name, path, spec.Args, log)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			lt.plugin, base = pl, pl.URL
		}
		c, err := target.NewClient(base)
		if err != nil {
			closeAll()
			return nil, nil, &UsageError{Flag: "--targets", Err: err}
		}
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		info, err := c.Info(ictx)
		cancel()
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("target %s: %w", spec.Name, err)
		}
		lt.client, lt.info = c, info
	}
	return live, closeAll, nil
}

// runCellTarget runs a cell on a foreign target: a session over the
// protocol starts the runs and follows their timelines; a mem world only
// gives the driver its clock. A scenario the target does not support (or an
// option over its limit) is a cell with no runs and the reason, never an
// error.
func (p *Plan) runCellTarget(ctx context.Context, c CellPlan, prog Progress) (results.Cell, *driver.Result, error) {
	lt := p.live[c.Target.Name]
	if lt == nil {
		return results.Cell{}, nil, fmt.Errorf("target %s was not opened", c.Target.Name)
	}
	if lt.plugin != nil {
		if err := lt.plugin.Exited(); err != nil {
			return results.Cell{}, nil, err
		}
	}
	id := c.identity()
	id.Engine, id.EngineVersion = lt.info.Engine, lt.info.Version
	if ok, why := lt.info.Supports(c.Scenario.Name, c.Options); !ok {
		id.Skipped = why
		if id.Metrics == nil {
			id.Metrics = map[string]results.Metric{}
		}
		return id, &driver.Result{}, nil
	}
	w, err := p.newWorld(context.WithoutCancel(ctx), c)
	if err != nil {
		return results.Cell{}, nil, fmt.Errorf("clock world: %w", err)
	}
	defer w.close()
	sess, err := target.NewSession(ctx, lt.client, c.Scenario.Name, c.Options, w.Runtime())
	if err != nil {
		return results.Cell{}, nil, fmt.Errorf("target %s: %w", c.Target.Name, err)
	}
	dc := driver.Config{
		World: w, Target: sess, Program: c.Program,
		RunPrefix: p.sweepID + "-" + c.Hash, Reps: p.Reps, Warmup: p.Warmup, Pacer: c.Pacer,
		CellTimeout: p.CellTimeout, Grace: p.Grace, Seed: c.Seed,
		OnRun: prog.Run,
	}
	res, err := driver.Run(ctx, dc)
	if err != nil {
		return results.Cell{}, nil, fmt.Errorf("target %s: %w", c.Target.Name, err)
	}
	if res.Interrupted {
		return results.Cell{}, res, nil
	}
	rc := c.declared(res.Summarize(id, p.metricsConfig(c), c.Pacer.Open()))
	rc.ClockErrorUS = float64(sess.Clock().RTT/2) / float64(time.Microsecond)
	if lt.plugin != nil {
		// An adapter that died during the cell failed the runs it held and
		// every run after: each says so, with the adapter's last log lines,
		// and the sweep stops after keeping the cell (its next cells would
		// only fail the same way). --resume starts a new adapter.
		if err := lt.plugin.Exited(); err != nil {
			for i := range rc.FailedRuns {
				rc.FailedRuns[i].Error += "; " + err.Error()
			}
			return rc, res, &stopAfterCell{err}
		}
	}
	return rc, res, nil
}

// stopAfterCell is a cell's error that comes with the cell's results: the
// sweep keeps the cell, then stops with the error.
type stopAfterCell struct{ err error }

func (e *stopAfterCell) Error() string { return e.err.Error() }
func (e *stopAfterCell) Unwrap() error { return e.err }
