package sweep

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/results"
	"go.yaml.in/yaml/v3"
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
	// Label tells apart targets of one adapter started with different
	// flags (a sweep file's product of an adapter's flags): the spec as
	// written. Empty when the adapter is given once.
	Label string
}

// ID is the target's key in the plan: its cells' keys and the sweep's
// live targets use it.
func (t TargetSpec) ID() string {
	if t.Label != "" {
		return t.Label
	}
	return t.Name
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
	names := map[string]int{}
	for _, s := range v {
		t, err := ParseTarget(s)
		if err != nil {
			return err
		}
		if seen[t.String()] || (t.URL != "" && names[t.Name] > 0) || (t.IsReference() && names[t.Name] > 0) {
			return fmt.Errorf("target %s is given twice", t.String())
		}
		seen[t.String()] = true
		names[t.Name]++
		p.Targets = append(p.Targets, t)
	}
	// An adapter given more than once, with different flags: each is
	// told apart by its spec.
	for i, t := range p.Targets {
		if names[t.Name] > 1 {
			p.Targets[i].Label = t.String()
		}
	}
	return nil
}

// expandTargets reads a sweep file's targets list whose entries may be
// mappings: the product of an adapter's flags,
//
//   - adapter: workflow
//     sdk: [4.8.9, 5.0.0-beta.55]
//     env: [none, WORKFLOW_RESILIENT_STEP_DISPATCH=1]
//     world: [local, postgres]
//
// is one target per combination ("workflow --sdk=4.8.9 --world=local", …),
// in the order given (the last key varies fastest). A value "none" (or
// empty) leaves its flag out; a value of several words repeats the flag.
func expandTargets(file string, v *yaml.Node) ([]string, error) {
	var out []string
	for _, n := range v.Content {
		switch n.Kind {
		case yaml.ScalarNode:
			out = append(out, n.Value)
			continue
		case yaml.MappingNode:
		default:
			return nil, fileError(file, n, "targets", "want a target (a string) or an adapter's product (adapter: NAME, then flag: [values])")
		}
		name := ""
		type axis struct {
			flag   string
			values []string
		}
		var axes []axis
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Value == "adapter" {
				name = val.Value
				continue
			}
			var vals []string
			switch val.Kind {
			case yaml.ScalarNode:
				vals = []string{val.Value}
			case yaml.SequenceNode:
				for _, x := range val.Content {
					if x.Kind != yaml.ScalarNode {
						return nil, fileError(file, x, "targets."+k.Value, "want a list of values")
					}
					vals = append(vals, x.Value)
				}
			default:
				return nil, fileError(file, val, "targets."+k.Value, "want a value or a list of values")
			}
			if len(vals) == 0 {
				return nil, fileError(file, val, "targets."+k.Value, "an empty list")
			}
			axes = append(axes, axis{k.Value, vals})
		}
		if name == "" || name == Reference || !adapterName.MatchString(name) {
			return nil, fileError(file, n, "targets", "an adapter's product needs adapter: NAME (an adapter name, not reference)")
		}
		combos := [][]string{{name}}
		for _, a := range axes {
			var next [][]string
			for _, c := range combos {
				for _, val := range a.values {
					args := slices.Clone(c)
					if val != "" && val != "none" {
						for _, w := range strings.Fields(val) {
							args = append(args, "--"+a.flag+"="+w)
						}
					}
					next = append(next, args)
				}
			}
			combos = next
		}
		for _, c := range combos {
			out = append(out, strings.Join(c, " "))
		}
	}
	return out, nil
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
	log    io.Writer // the adapter's log
	client *target.Client
	info   protocol.Info
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
			t.stop()
		}
	}
	for _, spec := range p.foreignTargets() {
		lt := &liveTarget{spec: spec, log: log}
		live[spec.ID()] = lt // closeAll stops its adapter from here on
		if err := lt.open(ctx); err != nil {
			closeAll()
			return nil, nil, err
		}
	}
	return live, closeAll, nil
}

// open starts the target's adapter (unless it is reached by URL) and asks
// it for its info and clock.
func (lt *liveTarget) open(ctx context.Context) error {
	spec := lt.spec
	base := spec.URL
	if base == "" {
		path, err := target.Find(spec.Name)
		if err != nil {
			return &UsageError{Flag: "--targets", Err: err}
		}
		pl, err := target.Launch(ctx, spec.Name, path, spec.Args, lt.log)
		if err != nil {
			return err
		}
		lt.plugin, base = pl, pl.URL
		if lt.log != nil {
			fmt.Fprintf(lt.log, "durabench: target %s started: pid %d, %s\n", spec, pl.PID(), pl.URL)
		}
	}
	c, err := target.NewClient(base)
	if err != nil {
		return &UsageError{Flag: "--targets", Err: err}
	}
	// A target that does not answer as one — not there, not the
	// protocol, no clock — is the user's to fix before anything runs
	// (exit 2, one line), like an unreachable NATS server.
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	info, err := c.Info(ictx)
	if err == nil {
		_, err = c.Clock(ictx)
	}
	cancel()
	if err != nil {
		return &UsageError{Flag: "--targets", Value: spec.String(), Err: fmt.Errorf("not a working target: %w", err)}
	}
	lt.client, lt.info = c, info
	return nil
}

// stop stops the adapter the sweep started (nothing for a URL).
func (lt *liveTarget) stop() {
	if lt.plugin != nil {
		_ = lt.plugin.Stop()
	}
}

// restart stops the target's adapter and starts it afresh (--rounds): a
// new process, with whatever it sets up anew (an SDK's worker, its
// world's directory). The new process must say it is the same engine.
func (lt *liveTarget) restart(ctx context.Context) error {
	if lt.plugin == nil {
		return fmt.Errorf("target %s is reached by URL: durabench cannot start it afresh", lt.spec)
	}
	was := lt.info
	lt.stop()
	lt.plugin = nil
	if err := lt.open(ctx); err != nil {
		return fmt.Errorf("target %s started afresh: %w", lt.spec, err)
	}
	if lt.info.Engine != was.Engine || lt.info.Version != was.Version || lt.info.Label != was.Label {
		return fmt.Errorf("target %s started afresh says it is %s %s (%s), not %s %s (%s)", lt.spec,
			lt.info.Engine, lt.info.Version, lt.info.Label, was.Engine, was.Version, was.Label)
	}
	return nil
}

// runCellTarget runs a cell on a foreign target: a session over the
// protocol starts the runs and follows their timelines; a mem world only
// gives the driver its clock. A scenario the target does not support (or an
// option over its limit) is a cell with no runs and the reason, never an
// error.
func (r *sweepRun) runCellTarget(ctx context.Context, c CellPlan) (results.Cell, *driver.Result, error) {
	lt := r.live[c.Target.ID()]
	if lt == nil {
		return results.Cell{}, nil, fmt.Errorf("target %s was not opened", c.Target.ID())
	}
	if err := lt.plugin.Exited(); err != nil {
		return results.Cell{}, nil, err
	}
	id := c.Identity
	id.Engine, id.EngineVersion, id.TargetWorld = lt.info.Engine, lt.info.Version, lt.info.World
	if lt.info.Label != "" && lt.info.Label != id.Target {
		// The target names its own cells: its resolved version, switches
		// and world (an adapter started with flags); the key keeps the
		// plan's spec.
		id.Target, id.TargetSpec = lt.info.Label, c.Target.ID()
	}
	if ok, why := lt.info.Supports(c.Scenario.Name, c.Options); !ok {
		id.Skipped = why
		if id.Metrics == nil {
			id.Metrics = map[string]results.Metric{}
		}
		return id, &driver.Result{}, nil
	}
	w, err := r.newWorld(context.WithoutCancel(ctx), c)
	if err != nil {
		return results.Cell{}, nil, fmt.Errorf("clock world: %w", err)
	}
	defer w.close()
	sess, err := target.NewSession(ctx, lt.client, c.Scenario.Name, c.Options, w.Runtime())
	if err != nil {
		return results.Cell{}, nil, fmt.Errorf("target %s: %w", c.Target.Name, err)
	}
	// The target's spans (protocol 1.2) are asked for when the cell
	// reports TTLS or TTC (its critical paths split them), unless the
	// sweep records no spans (--spans off).
	sess.Spans = (c.reports(metrics.TTLS) || c.reports(metrics.TTC)) && r.plan.Spans
	dc := r.driverConfig(c, w, r.id+"-"+c.Hash)
	dc.Target = sess
	m := startCPU(lt.plugin.CPU)
	res, err := driver.Run(ctx, dc)
	cpu := m.stop()
	if err != nil {
		// Every run failed because the adapter died: say so, with its
		// last log lines, not only what the first start ran into.
		if xerr := lt.plugin.Exited(); xerr != nil {
			err = fmt.Errorf("%w; %v", err, xerr)
		}
		return results.Cell{}, nil, fmt.Errorf("target %s: %w", c.Target.Name, err)
	}
	if res.Interrupted {
		return results.Cell{}, res, nil
	}
	rc := c.summarize(res, id)
	rc.CPU = cpu
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	cw := sess.ClockWatch()
	rc.ClockErrorUS, rc.ClockDriftUS = us(cw.Start.RTT/2), us(cw.Drift)
	ps := sess.Polls()
	rc.TargetPolls, rc.EarlyEmptyPolls = ps.Polls, ps.EarlyEmpty
	rc.DroppedSpans, rc.DroppedSpan = ps.DroppedSpans, ps.FirstDropped
	rc.AnomalousRuns = anomalousRuns(res, sess.Anomalies())
	rc.Anomalies = len(rc.AnomalousRuns)
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
	return rc, res, nil
}

// stopAfterCell is a cell's error that comes with the cell's results: the
// sweep keeps the cell, then stops with the error.
type stopAfterCell struct{ err error }

func (e *stopAfterCell) Error() string { return e.err.Error() }
func (e *stopAfterCell) Unwrap() error { return e.err }

// anomalousRuns are the measured runs of res the target reported
// anomalies for, in run order (warm-ups left out, as from every count).
func anomalousRuns(res *driver.Result, found map[string][]protocol.Anomaly) []results.AnomalousRun {
	var out []results.AnomalousRun
	for _, tl := range res.Timelines {
		a := found[tl.ID]
		if len(a) == 0 {
			continue
		}
		ar := results.AnomalousRun{Run: tl.ID}
		for _, x := range a {
			ar.Anomalies = append(ar.Anomalies, results.Anomaly{Kind: x.Kind, Detail: x.Detail})
		}
		out = append(out, ar)
	}
	return out
}
