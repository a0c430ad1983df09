package calibrate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world"
)

// ReadFile reads a table from a YAML file; see Parse.
func ReadFile(path string) (*Table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &sweep.UsageError{File: path, Err: err}
	}
	return Parse(path, data)
}

// Parse reads a table of observed figures:
//
//	profile: cloud                  # the fitted profile's name (default fitted)
//	description: what it models     # the fitted profile's description
//	reps: 20                        # measured runs per cell (default 20)
//	warmup: 2                       # warm-up runs per cell (default 2)
//	cells:
//	  - scenario: fanout            # default fanout
//	    branches: 64                # the branches option
//	    options: {body: 0s}         # other scenario options
//	    version: resilient          # a built-in engine version, or one of
//	                                # custom_versions: (as in a sweep file)
//	    switches: none              # a kill-switch set (default none)
//	    retry_style: fresh          # world retry semantics (default redeliver)
//	    visibility_timeout: 300s    # (default 30s)
//	    reps: 300                   # this cell's runs
//	    note: where the figures come from
//	    metrics:
//	      ttls: {p50: 1054ms, p99: 2s}
//	      op.run_get: {p90: 5.1s}
//	      stalls: {rate: 6%}
//	      dispatch.publish:
//	        p50: {value: 2.7s, unfitted: why it is shown, not fitted}
//
// Metrics are a scenario's results metrics (durabench list), op.<op> for a
// world operation (every call, as the engine waited for it; op.deliver is
// a message's publish to its handler), dispatch.create
// and dispatch.publish, stalls (rate) and stall_ttls (see Figure). Parsing
// is strict: the first mistake is the error, naming the file, the line and
// the field ("t.yaml:7: cells[1].metrics.ttls.p51: unknown statistic ...").
// Errors are *sweep.UsageErrors.
func Parse(file string, data []byte) (*Table, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &sweep.UsageError{File: file, Msg: "the file is empty"}
		}
		return nil, &sweep.UsageError{File: file, Msg: "malformed YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	t := &Table{File: file, Profile: "fitted", Reps: DefaultReps, Warmup: DefaultWarmup}
	p := &tableParser{file: file}
	p.table(t, deref(doc.Content[0]))
	if p.err != nil {
		return nil, p.err
	}
	return t, nil
}

type tableParser struct {
	file string
	err  error // the first mistake
}

func (p *tableParser) fail(n *yaml.Node, field, format string, args ...any) {
	if p.err == nil {
		p.err = &sweep.UsageError{File: p.file, Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
}

// each calls fn for each key of mapping n, refusing duplicate and, when
// known is not nil, unknown keys.
func (p *tableParser) each(n *yaml.Node, field string, known []string, fn func(key string, k, v *yaml.Node)) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.fail(n, field, "expected a mapping, got %s", kindOf(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content) && p.err == nil; i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		sub := k.Value
		if field != "" {
			sub = field + "." + k.Value
		}
		if line, dup := seen[k.Value]; dup {
			p.fail(k, sub, "given twice (first on line %d)", line)
			return
		}
		seen[k.Value] = k.Line
		if known != nil && !slices.Contains(known, k.Value) {
			p.fail(k, sub, "unknown field (known: %s)", strings.Join(known, ", "))
			return
		}
		fn(k.Value, k, v)
	}
}

func (p *tableParser) scalar(n *yaml.Node, field string) (string, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.fail(n, field, "expected a value, got %s", kindOf(n))
		return "", false
	}
	return n.Value, true
}

func (p *tableParser) count(n *yaml.Node, field string, least int) int {
	s, ok := p.scalar(n, field)
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < least {
		p.fail(n, field, "%q is not a whole number >= %d", s, least)
	}
	return v
}

func (p *tableParser) duration(n *yaml.Node, field string) time.Duration {
	s, ok := p.scalar(n, field)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		p.fail(n, field, "%q is not a positive duration (e.g. 1054ms, 9.5s)", s)
	}
	return d
}

func (p *tableParser) table(t *Table, root *yaml.Node) {
	var cells, custom *yaml.Node
	p.each(root, "", []string{"profile", "description", "reps", "warmup", "custom_versions", "cells"}, func(key string, k, v *yaml.Node) {
		switch key {
		case "custom_versions":
			custom = v
		case "profile":
			if s, ok := p.scalar(v, key); ok {
				if s == "" || strings.ContainsAny(s, " \t,=/") {
					p.fail(v, key, "%q must be a name without spaces, commas, slashes or '='", s)
				}
				t.Profile = s
			}
		case "description":
			t.Description, _ = p.scalar(v, key)
		case "reps":
			t.Reps = p.count(v, key, 1)
		case "warmup":
			t.Warmup = p.count(v, key, 0)
		case "cells":
			cells = v
		}
	})
	if p.err != nil {
		return
	}
	if custom != nil {
		vs, err := sweep.DecodeCustomVersions(p.file, custom)
		if err != nil {
			p.err = err
			return
		}
		t.Custom = vs
	}
	if cells == nil || cells.Kind != yaml.SequenceNode || len(cells.Content) == 0 {
		n := root
		if cells != nil {
			n = cells
		}
		p.fail(n, "cells", "want a list of observed cells")
		return
	}
	for i, n := range cells.Content {
		c := p.cell(t, n, fmt.Sprintf("cells[%d]", i))
		if p.err != nil {
			return
		}
		t.Cells = append(t.Cells, c)
	}
}

var cellFields = []string{"scenario", "branches", "options", "version", "switches", "retry_style",
	"visibility_timeout", "reps", "warmup", "note", "metrics"}

func (p *tableParser) cell(t *Table, n *yaml.Node, field string) Observation {
	c := Observation{Line: n.Line, Scenario: "fanout", Options: map[string]string{}, Switches: "none", Warmup: unset}
	var opts []*yaml.Node // key, value pairs: checked once the scenario is known
	var metricsNode, versionNode *yaml.Node
	p.each(n, field, cellFields, func(key string, k, v *yaml.Node) {
		sub := field + "." + key
		switch key {
		case "scenario":
			c.Scenario, _ = p.scalar(v, sub)
		case "branches":
			opts = append(opts, k, v)
		case "options":
			p.each(v, sub, nil, func(_ string, k, v *yaml.Node) { opts = append(opts, k, v) })
		case "version":
			c.Version, _ = p.scalar(v, sub)
			versionNode = v
		case "switches":
			if s, ok := p.scalar(v, sub); ok {
				set, err := engine.ParseSwitchSet(s)
				if err != nil {
					p.fail(v, sub, "%v", err)
				}
				c.Switches = set.String()
			}
		case "retry_style":
			if s, ok := p.scalar(v, sub); ok {
				if s != string(world.Redeliver) && s != string(world.Fresh) {
					p.fail(v, sub, "%q is not redeliver or fresh", s)
				}
				c.RetryStyle = world.RetryStyle(s)
			}
		case "visibility_timeout":
			c.VisibilityTimeout = p.duration(v, sub)
		case "reps":
			c.Reps = p.count(v, sub, 1)
		case "warmup":
			c.Warmup = p.count(v, sub, 0)
		case "note":
			c.Note, _ = p.scalar(v, sub)
		case "metrics":
			metricsNode = v
		}
	})
	if p.err != nil {
		return c
	}
	s, err := scenarios.Get(c.Scenario)
	if err != nil {
		p.fail(n, field+".scenario", "%v", err)
		return c
	}
	for i := 0; i+1 < len(opts); i += 2 {
		k, v := opts[i], opts[i+1]
		sub := field + ".options." + k.Value
		if k.Value == "branches" {
			sub = field + ".branches"
		}
		o, ok := s.Option(k.Value)
		if !ok {
			p.fail(k, sub, "scenario %s has no option %q", s.Name, k.Value)
			return c
		}
		raw, ok := p.scalar(v, sub)
		if !ok {
			return c
		}
		val, err := o.Parse(raw)
		if err != nil {
			p.fail(v, sub, "%v", err)
			return c
		}
		c.Options[k.Value] = val
	}
	if versionNode == nil {
		p.fail(n, field+".version", "missing (known: %s)", versionNames(t))
		return c
	}
	if _, err := t.version(c.Version); err != nil {
		p.fail(versionNode, field+".version", "unknown version %q (known: %s)", c.Version, versionNames(t))
		return c
	}
	if metricsNode == nil {
		p.fail(n, field+".metrics", "missing: a cell needs at least one observed figure")
		return c
	}
	p.each(metricsNode, field+".metrics", nil, func(metric string, k, v *yaml.Node) {
		sub := field + ".metrics." + metric
		if msg := checkMetric(metric, s); msg != "" {
			p.fail(k, sub, "%s", msg)
			return
		}
		p.each(v, sub, nil, func(stat string, k, v *yaml.Node) {
			c.Figures = append(c.Figures, p.figure(metric, stat, k, v, sub+"."+stat))
		})
	})
	if p.err == nil && len(c.Figures) == 0 {
		p.fail(metricsNode, field+".metrics", "no figures")
	}
	return c
}

// checkMetric returns what is wrong with a metric name for scenario s, or "".
func checkMetric(m string, s *scenarios.Scenario) string {
	switch {
	case m == "stalls" || m == "stall_ttls" || m == DispatchCreate || m == DispatchPublish:
		return ""
	case strings.HasPrefix(m, "op."):
		op := world.Op(strings.TrimPrefix(m, "op."))
		if !slices.Contains(world.Ops(), op) {
			return fmt.Sprintf("unknown op %q (durabench list shows the world's operations)", op)
		}
		return ""
	}
	if _, ok := metrics.Lookup(m); !ok || !slices.Contains(s.Metrics, m) {
		return fmt.Sprintf("unknown metric (scenario %s has %s; also op.<op>, %s, %s, stalls, stall_ttls)",
			s.Name, strings.Join(s.Metrics, ", "), DispatchCreate, DispatchPublish)
	}
	return ""
}

// figure reads one statistic: a value, or {value, unfitted}.
func (p *tableParser) figure(metric, stat string, k, v *yaml.Node, field string) Figure {
	f := Figure{Line: k.Line, Metric: metric, Stat: stat}
	if metric == "stalls" {
		if stat != "rate" {
			p.fail(k, field, "stalls has one statistic: rate (a percentage)")
			return f
		}
	} else if !slices.Contains(Stats, stat) {
		p.fail(k, field, "unknown statistic (%s)", strings.Join(Stats, ", "))
		return f
	}
	v = deref(v)
	valNode := v
	if v.Kind == yaml.MappingNode {
		valNode = nil
		p.each(v, field, []string{"value", "unfitted"}, func(key string, kk, vv *yaml.Node) {
			switch key {
			case "value":
				valNode = vv
			case "unfitted":
				f.Unfitted, _ = p.scalar(vv, field+".unfitted")
			}
		})
		if p.err != nil {
			return f
		}
		if valNode == nil {
			p.fail(v, field+".value", "missing")
			return f
		}
	}
	s, ok := p.scalar(valNode, field)
	if !ok {
		return f
	}
	if f.IsRate() {
		num, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
		x, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if !pct || err != nil || x < 0 || x > 100 {
			p.fail(valNode, field, "%q is not a percentage in 0–100%% (e.g. 6%%)", s)
		}
		f.Value = x / 100
		return f
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		p.fail(valNode, field, "%q is not a positive duration (e.g. 1054ms, 9.5s)", s)
	}
	f.Value = float64(d)
	return f
}

// versionNames lists the versions a cell may name: the built-in ones, then
// the table's own.
func versionNames(t *Table) string {
	var n []string
	for _, v := range append(engine.Versions(), t.Custom...) {
		n = append(n, v.Name)
	}
	return strings.Join(n, ", ")
}

// deref follows YAML aliases (*name) to the node they name.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "nothing"
	}
	return "a value"
}
