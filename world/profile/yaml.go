package profile

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/durabench/durabench/world"
)

// ParseFile reads a profile from a YAML file; see Parse.
func ParseFile(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w: %w", path, ErrInvalid, err)
	}
	return Parse(path, data)
}

// Parse reads a profile from YAML:
//
//	name: my-backend                # default: the file's base name
//	description: what it models
//	ops:
//	  default: {latency: {dist: lognormal, median: 20ms, p99: 80ms}}
//	  step_created: {latency: {dist: fixed, value: 25ms}, transient: 2%}
//	  log_load: {latency: 20ms, per_event: 50us, capacity: 16}
//	  deliver: {latency: {dist: hdr, file: deliver.hdr, unit: us}, concurrency: 128}
//	groups:                         # ops sharing one capacity
//	  reads: {ops: [run_get, log_load], capacity: 8}
//	  writes: {ops: [appends], capacity: 16}   # appends = every append op
//	targets: {ttfs: [200ms, 300ms, 600ms]}    # p75/p90/p99
//
// Ops are world.Ops(): appends by event kind ("step_created"), then
// run_create, run_get, run_list, log_load, publish, deliver, hook_lookup,
// stream_write, stream_read, stream_close. A latency is either a mapping with
// dist fixed (value), normal (mean, stddev), lognormal (median, p99) or hdr
// (file or encoded, unit), or the compact string ParseDist reads. file names
// the source in errors and relative hdr files are resolved against its
// folder.
//
// Parsing is strict: unknown fields, wrong types, out-of-range values and
// unknown ops are errors naming the file, the line and the field, e.g.
// "p.yaml:7: ops.step_created.transient: 120% is not in 0–100%". Every
// mistake found is reported (joined); each wraps ErrInvalid.
func Parse(file string, data []byte) (*Profile, error) {
	return ParseWith(file, data, nil)
}

// ParseWith is Parse reading the profile's hdr files with read (nil: the
// file system).
func ParseWith(file string, data []byte, read ReadFile) (*Profile, error) {
	ps := &parser{file: file, dir: filepath.Dir(file), read: read}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Msg: "empty file"}
		}
		return nil, ps.syntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, ps.syntaxError(err)
		}
		return nil, &Error{File: file, Line: extra.Line, Msg: "a second YAML document; a profile file holds one"}
	}
	p := ps.profile(&doc)
	if len(ps.errs) > 0 {
		slices.SortStableFunc(ps.errs, func(a, b *Error) int { return a.Line - b.Line })
		if len(ps.errs) == 1 {
			return nil, ps.errs[0]
		}
		errs := make([]error, len(ps.errs))
		for i, e := range ps.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	return p, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (ps *parser) syntaxError(err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: ps.file, Line: line, Msg: "malformed YAML: " + m[2]}
	}
	return &Error{File: ps.file, Msg: "malformed YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
}

type parser struct {
	file, dir string
	read      ReadFile
	errs      []*Error
}

func (ps *parser) fail(n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	ps.errs = append(ps.errs, &Error{File: ps.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "something else"
}

// mapping calls fn for each key of n, refusing duplicate keys and, when known
// is not nil, keys not in it.
func (ps *parser) mapping(n *yaml.Node, field string, known []string, fn func(key string, k, v *yaml.Node)) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		ps.fail(n, field, "expected a mapping, got %s", kindName(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		key := k.Value
		sub := join(field, key)
		if k.Kind != yaml.ScalarNode {
			ps.fail(k, field, "a key must be a plain name, got %s", kindName(k))
			continue
		}
		if line, dup := seen[key]; dup {
			ps.fail(k, sub, "given twice (first on line %d)", line)
			continue
		}
		seen[key] = k.Line
		if known != nil && !slices.Contains(known, key) {
			ps.fail(k, sub, "unknown field%s", unknown(key, known))
			continue
		}
		fn(key, k, v)
	}
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// scalar returns n's value, or reports that n is not a single value.
func (ps *parser) scalar(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		ps.fail(n, field, "expected a value, got %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

func (ps *parser) profile(doc *yaml.Node) *Profile {
	p := &Profile{Source: ps.file, Ops: map[world.Op]Rule{}}
	base := filepath.Base(ps.file)
	p.Name = strings.TrimSuffix(base, filepath.Ext(base))
	root := doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			ps.fail(nil, "", "empty file")
			return p
		}
		root = root.Content[0]
	}
	capLines := map[world.Op]*yaml.Node{}
	var groupNodes []*yaml.Node
	ps.mapping(root, "", []string{"name", "description", "ops", "groups", "targets"}, func(key string, k, v *yaml.Node) {
		switch key {
		case "name":
			if s, ok := ps.scalar(v, key); ok {
				if s == "" || strings.ContainsAny(s, " \t,=") {
					ps.fail(v, key, "%q must be a non-empty name without spaces, commas or '='", s)
				}
				p.Name = s
			}
		case "description":
			if s, ok := ps.scalar(v, key); ok {
				p.Description = s
			}
		case "ops":
			ps.mapping(v, key, nil, func(op string, k, v *yaml.Node) {
				field := "ops." + op
				if op != "default" && !knownOps()[world.Op(op)] {
					ps.fail(k, field, "unknown op%s", unknown(op, append([]string{"default"}, opNames()...)))
					return
				}
				r := ps.rule(v, field, world.Op(op))
				if op == "default" {
					p.Default = r
					return
				}
				p.Ops[world.Op(op)] = r
				if r.Set&FieldCapacity != 0 {
					capLines[world.Op(op)] = v
				}
			})
		case "groups":
			ps.mapping(v, key, nil, func(name string, k, v *yaml.Node) {
				if g, ok := ps.group(k, v, "groups."+name); ok {
					p.Groups = append(p.Groups, g)
					groupNodes = append(groupNodes, v)
				}
			})
		case "targets":
			p.Targets = map[string]Targets{}
			ps.mapping(v, key, nil, func(metric string, k, v *yaml.Node) {
				if t, ok := ps.targets(k, v, "targets."+metric); ok {
					p.Targets[metric] = t
				}
			})
		}
	})
	// An op is in at most one group, and a grouped op takes its capacity
	// from the group: a capacity of its own would be silently ignored.
	in := map[world.Op]string{}
	for i, g := range p.Groups {
		for _, op := range g.Ops {
			if other, dup := in[op]; dup {
				ps.fail(groupNodes[i], "groups."+g.Name+".ops", "%s is already in group %s", op, other)
				continue
			}
			in[op] = g.Name
			if n, own := capLines[op]; own {
				ps.fail(n, "ops."+string(op)+".capacity", "%s is in group %s, which sets its capacity", op, g.Name)
			}
		}
	}
	return p
}

func (ps *parser) rule(n *yaml.Node, field string, op world.Op) Rule {
	var r Rule
	ps.mapping(n, field, []string{"latency", "transient", "capacity", "per_event", "concurrency"}, func(key string, k, v *yaml.Node) {
		sub := field + "." + key
		switch key {
		case "latency":
			if d, ok := ps.latency(v, sub); ok {
				r.Latency, r.Set = d, r.Set|FieldLatency
			}
		case "transient":
			if s, ok := ps.scalar(v, sub); ok {
				if t, err := parsePercent(s); err != nil {
					ps.fail(v, sub, "%v", err)
				} else {
					r.Transient, r.Set = t, r.Set|FieldTransient
				}
			}
		case "capacity":
			if s, ok := ps.scalar(v, sub); ok {
				if c, err := parseCapacity(s); err != nil {
					ps.fail(v, sub, "%v", err)
				} else {
					r.Capacity, r.Set = c, r.Set|FieldCapacity
				}
			}
		case "concurrency":
			if op != world.OpDeliver {
				ps.fail(k, sub, "only deliver has a concurrency (how many handlers run at once)")
				return
			}
			if s, ok := ps.scalar(v, sub); ok {
				if c, err := parseConcurrency(s); err != nil {
					ps.fail(v, sub, "%v", err)
				} else {
					r.Concurrency, r.Set = c, r.Set|FieldConcurrency
				}
			}
		case "per_event":
			if op != "default" && op != world.OpLoad {
				ps.fail(k, sub, "only log_load has a per-event cost")
				return
			}
			if s, ok := ps.scalar(v, sub); ok {
				if d, err := parseDuration(s); err != nil {
					ps.fail(v, sub, "%v", err)
				} else {
					r.PerEvent, r.Set = d, r.Set|FieldPerEvent
				}
			}
		}
	})
	return r
}

// distParams lists, per dist, the parameters it takes.
var distParams = map[string][]string{
	"fixed":     {"value"},
	"normal":    {"mean", "stddev"},
	"lognormal": {"median", "p99"},
	"hdr":       {"file", "encoded", "unit"},
}

func (ps *parser) latency(n *yaml.Node, field string) (Dist, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		d, err := parseDist(n.Value, ps.dir, ps.read)
		if err != nil {
			ps.fail(n, field, "%v", err)
			return nil, false
		}
		return d, true
	}
	all := []string{"dist", "value", "mean", "stddev", "median", "p99", "file", "encoded", "unit"}
	params := map[string]*yaml.Node{}
	ok := true
	errs := len(ps.errs)
	ps.mapping(n, field, all, func(key string, k, v *yaml.Node) {
		if _, isScalar := ps.scalar(v, field+"."+key); isScalar {
			params[key] = v
		} else {
			ok = false
		}
	})
	if !ok || len(ps.errs) > errs {
		return nil, false
	}
	dn, has := params["dist"]
	if !has {
		ps.fail(n, field+".dist", "missing (one of %s)", strings.Join(distNames, ", "))
		return nil, false
	}
	dist := dn.Value
	want, known := distParams[dist]
	if !known {
		ps.fail(dn, field+".dist", "unknown dist %q%s", dist, unknown(dist, distNames))
		return nil, false
	}
	for _, key := range all[1:] {
		if v, set := params[key]; set && !slices.Contains(want, key) {
			ps.fail(v, field+"."+key, "not a parameter of %s (it takes %s)", dist, strings.Join(want, ", "))
			ok = false
		}
	}
	if !ok {
		return nil, false
	}
	dur := func(key string) (string, bool) {
		v, set := params[key]
		if !set {
			ps.fail(n, field+"."+key, "missing (%s takes %s)", dist, strings.Join(want, ", "))
			return "", false
		}
		if _, err := parseDuration(v.Value); err != nil {
			ps.fail(v, field+"."+key, "%v", err)
			return "", false
		}
		return v.Value, true
	}
	var d Dist
	var err error
	switch dist {
	case "fixed":
		v, ok := dur("value")
		if !ok {
			return nil, false
		}
		d, err = ParseDist("fixed:"+v, "")
	case "normal":
		m, ok1 := dur("mean")
		s, ok2 := dur("stddev")
		if !ok1 || !ok2 {
			return nil, false
		}
		d, err = newNormal(m, s)
	case "lognormal":
		m, ok1 := dur("median")
		p, ok2 := dur("p99")
		if !ok1 || !ok2 {
			return nil, false
		}
		d, err = newLogNormal(m, p)
	case "hdr":
		unit := UnitMicrosecond
		if v, set := params["unit"]; set {
			u, known := unitNames[v.Value]
			if !known {
				ps.fail(v, field+".unit", "unknown unit %q (known: ns, us, ms, s)", v.Value)
				return nil, false
			}
			unit = u
		}
		file, hasFile := params["file"]
		enc, hasEnc := params["encoded"]
		switch {
		case hasFile == hasEnc:
			ps.fail(n, field, "hdr takes exactly one of file and encoded")
			return nil, false
		case hasFile:
			d, err = loadHDR(ps.read, resolve(ps.dir, file.Value), unit)
		default:
			data := strings.Join(strings.Fields(enc.Value), "")
			if _, berr := base64.StdEncoding.DecodeString(data); berr != nil {
				ps.fail(enc, field+".encoded", "not base64: %v", berr)
				return nil, false
			}
			d, err = ParseHDR(ps.file+":"+strconv.Itoa(enc.Line), []byte(data), unit)
		}
	}
	if err != nil {
		ps.fail(n, field, "%v", err)
		return nil, false
	}
	return d, true
}

func (ps *parser) group(k, n *yaml.Node, field string) (Group, bool) {
	g := Group{Name: k.Value}
	if g.Name == "default" || knownOps()[world.Op(g.Name)] {
		ps.fail(k, field, "a group cannot be named like an op")
		return g, false
	}
	errs := len(ps.errs)
	var hasOps, hasCap bool
	ps.mapping(n, field, []string{"ops", "capacity"}, func(key string, k, v *yaml.Node) {
		sub := field + "." + key
		switch key {
		case "ops":
			hasOps = true
			if v.Kind != yaml.SequenceNode {
				ps.fail(v, sub, "expected a list of ops, got %s", kindName(v))
				return
			}
			for _, item := range v.Content {
				item = deref(item)
				name, ok := ps.scalar(item, sub)
				if !ok {
					continue
				}
				if name == "appends" {
					for k := world.RunCreated; k <= world.StreamClosed; k++ {
						g.Ops = append(g.Ops, world.AppendOp(k))
					}
					continue
				}
				if !knownOps()[world.Op(name)] {
					ps.fail(item, sub, "unknown op %q%s", name, unknown(name, append([]string{"appends"}, opNames()...)))
					continue
				}
				if slices.Contains(g.Ops, world.Op(name)) {
					ps.fail(item, sub, "%s is listed twice", name)
					continue
				}
				g.Ops = append(g.Ops, world.Op(name))
			}
		case "capacity":
			hasCap = true
			if s, ok := ps.scalar(v, sub); ok {
				c, err := parseCapacity(s)
				if err != nil {
					ps.fail(v, sub, "%v", err)
				}
				g.Capacity = c
			}
		}
	})
	if n.Kind == yaml.MappingNode {
		if !hasOps {
			ps.fail(n, field+".ops", "missing")
		}
		if !hasCap {
			ps.fail(n, field+".capacity", "missing")
		}
	}
	return g, len(ps.errs) == errs
}

// Metrics lists the metric names targets may be given for (DESIGN.md §6).
var Metrics = []string{"ttfs", "ttls", "skew", "stso", "wo", "ttc", "sl", "so"}

func (ps *parser) targets(k, n *yaml.Node, field string) (Targets, bool) {
	var t Targets
	if !slices.Contains(Metrics, k.Value) {
		ps.fail(k, field, "unknown metric%s", unknown(k.Value, Metrics))
		return t, false
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) != 3 {
		ps.fail(n, field, "expected [p75, p90, p99], e.g. [200ms, 300ms, 600ms], got %s", kindName(n))
		return t, false
	}
	for i, item := range n.Content {
		item = deref(item)
		s, ok := ps.scalar(item, field)
		if !ok {
			return t, false
		}
		d, err := parseDuration(s)
		if err != nil {
			ps.fail(item, field, "%v", err)
			return t, false
		}
		t[i] = d
	}
	if t[0] > t[1] || t[1] > t[2] {
		ps.fail(n, field, "p75 <= p90 <= p99 expected, got %s/%s/%s", fmtDur(t[0]), fmtDur(t[1]), fmtDur(t[2]))
		return t, false
	}
	return t, true
}

func opNames() []string {
	var names []string
	for _, op := range world.Ops() {
		names = append(names, string(op))
	}
	return names
}

// unknown describes an unknown name: a suggestion when one is close,
// otherwise the list of known names.
func unknown(s string, known []string) string {
	if hint := suggest(s, known); hint != "" {
		return hint
	}
	return " (known: " + strings.Join(known, ", ") + ")"
}

// suggest returns ` (did you mean "x"?)` when a known name is a small edit
// away from s.
func suggest(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
