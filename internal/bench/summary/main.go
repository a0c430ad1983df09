// Command summary turns `go test -bench` output into durabench's
// performance table: one row per benchmark that has a floor or a target,
//
//	benchmark | value | floor | ratio | target | ok
//
// where value and floor were measured in the same run (the ratio is what
// durabench adds to what it measures) and ok says whether the issue's
// target holds. With -count > 1 every column is the median over the
// repetitions and the ratio also shows its range, a measure of the noise.
//
// Usage:
//
//	go test -run '^$' -bench . ./engine/ | tee out/bench.txt
//	go run ./internal/bench/summary [-strict] out/bench.txt
//
// It reads standard input when no file is named. -strict exits 1 when a
// target is missed (off by default: shared machines are noisy).
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/perf/benchfmt"
)

// check is one condition of a target on a unit's median.
type check struct {
	unit  string
	op    string // "<", "<=", ">="
	limit float64
}

func (c check) holds(v float64) bool {
	switch c.op {
	case "<":
		return v < c.limit
	case "<=":
		return v <= c.limit
	case ">=":
		return v >= c.limit
	}
	return false
}

// rule says how to show the benchmarks whose name matches: the first
// matching rule wins.
type rule struct {
	name  *regexp.Regexp
	value string // unit of the value column
	floor string // unit of the floor column, "" for none
	// ratio is the unit of the ratio column; when it is set and floor is
	// not, the floor is derived as value / ratio.
	ratio  string
	target string // the target as written in the table, "" for none
	checks []check
	// parts are ratio units that split the ratio into shares, shown after
	// it as "label r×".
	parts []part
}

// part is one share of a ratio.
type part struct{ unit, label string }

// worldParts split a world's ratio into the engine's share (engine over the
// floor on the world) and the world's (floor on the world over the floor on
// the raw operations: JetStream calls for NATS, SQL statements for
// PostgreSQL).
var worldParts = []part{{"engine/world-floor", "engine"}, {"world-floor/floor", "world"}}

// rules are the benchmarks and targets (issue 10, "Targets").
var rules = []rule{
	{regexp.MustCompile(`^RecorderStepBody$`), "ns/op", "", "x-time.Now", "< 100 ns, 0 allocs",
		[]check{{"ns/op", "<", 100}, {"allocs/op", "<=", 0}}, nil},
	{regexp.MustCompile(`^Perf(Timeline|HDR)Record$`), "ns/record", "floor-ns/record", "ratio", "< 100 ns, 0 allocs",
		[]check{{"ns/record", "<", 100}, {"allocs/op", "<=", 0}}, nil},
	{regexp.MustCompile(`^FanOutMem/.*/branches=256$`), "ttls-p50-us", "floor-ttls-p50-us", "ratio", "ratio ≤ 3",
		[]check{{"ratio", "<=", 3}}, nil},
	{regexp.MustCompile(`^FanOutMem/`), "ttls-p50-us", "floor-ttls-p50-us", "ratio", "", nil, nil},
	{regexp.MustCompile(`^FanOutNATS/.*/branches=256$`), "ttls-p50-us", "floor-ttls-p50-us", "ratio", "ratio ≤ 2",
		[]check{{"ratio", "<=", 2}}, worldParts},
	{regexp.MustCompile(`^FanOutNATS/`), "ttls-p50-us", "floor-ttls-p50-us", "ratio", "", nil, worldParts},
	// internal/bench/rawpg: the same on the PostgreSQL world vs raw SQL statements
	// (issue 17 states no target).
	{regexp.MustCompile(`^FanOutPG/`), "ttls-p50-us", "floor-ttls-p50-us", "ratio", "", nil, worldParts},
	// world/nats: each world operation next to the raw JetStream call it
	// wraps (issue 3), no target.
	{regexp.MustCompile(`^(Publish|GuardedAppend|PublishConsume|Load|FanOutAppends|FanOutAppendsExternal/.*)$`), "world-ns/op", "raw-ns/op", "world/raw", "", nil, nil},
	// world/postgres: each world operation next to the raw pgx statement
	// it wraps (issue 17), no target.
	{regexp.MustCompile(`^PG(Publish|GuardedAppend|Load|PublishConsume|FanOutAppends|FanOutAppendsUnbatched)$`), "world-ns/op", "raw-ns/op", "world/raw", "", nil, nil},
	// The closed-loop soak (issue 14): steps/s next to the raw floor's.
	{regexp.MustCompile(`^SoakNATS$`), "steps/s", "floor-steps/s", "engine/floor", "ratio ≥ 0.8",
		[]check{{"engine/floor", ">=", 0.8}}, nil},
	{regexp.MustCompile(`^FanOut256/`), "runs/s", "", "", "≥ 100 runs/s",
		[]check{{"runs/s", ">=", 100}}, nil},
	// The target protocol (issue 15): one fan-out cell of the built-in
	// engine on embedded NATS, directly and through the protocol.
	{regexp.MustCompile(`^ProtocolOverhead/`), "protocol-ttls-p50-us", "direct-ttls-p50-us", "protocol/direct", "ratio ≤ 1.05",
		[]check{{"protocol/direct", "<=", 1.05}}, nil},
	// The driver (issue 30): open pacing's lag, precise against coarse
	// (sleeping on the runtime) in the same run, against a null engine
	// and the built-in engine on mem; and how many runs/s one driver
	// sustains in process against the same driver on a null engine.
	{regexp.MustCompile(`^Pacer/(null|mem)/rate=(500|5000)$`), "lag-p99-us", "coarse-lag-p99-us", "precise/coarse", "lag p50 ≤ 25 µs, p99 ≤ 300 µs",
		[]check{{"lag-p50-us", "<=", 25}, {"lag-p99-us", "<=", 300}}, nil},
	{regexp.MustCompile(`^Pacer/`), "lag-p99-us", "coarse-lag-p99-us", "precise/coarse", "", nil, nil},
	{regexp.MustCompile(`^SleepOvershoot/`), "overshoot-p50-us", "", "", "", nil, nil},
	{regexp.MustCompile(`^CapacityInProcess$`), "runs/s", "null-runs/s", "engine/null", "driver ≥ 47,500 runs/s (95% of 50,000)",
		[]check{{"null-runs/s", ">=", 47500}}, nil},
	// Through the protocol, the target in another process: what precise
	// pacing costs the target (its start-to-step time under precise and
	// coarse pacing), and one driver's runs/s at 10,000/s against the
	// loopback HTTP floor (the same requests, no engine).
	{regexp.MustCompile(`^ProtocolPacing$`), "start-to-step-p50-us", "coarse-start-to-step-p50-us", "precise/coarse", "ratio ≤ 1.25 (noise)",
		[]check{{"precise/coarse", "<=", 1.25}}, nil},
	{regexp.MustCompile(`^CapacityProtocol$`), "runs/s", "floor-runs/s", "engine/floor", "≥ 9,500 runs/s, lag p99 < 1 ms, 0 errors (target on 1 processor)",
		[]check{{"runs/s", ">=", 9500}, {"lag-p99-us", "<", 1000}, {"errors", "<=", 0}}, nil},
	{regexp.MustCompile(`^StreamLine$`), "wire-ns/line", "json-ns/line", "wire/json", "ratio ≤ 0.5",
		[]check{{"wire/json", "<=", 0.5}}, nil},
	{regexp.MustCompile(`^PerfReport10k/all$`), "ns/op", "", "", "< 1 s",
		[]check{{"ns/op", "<", 1e9}}, nil},
	{regexp.MustCompile(`^PerfReport10k/`), "ns/op", "", "", "", nil, nil},
}

// details are figures shown after a benchmark's name, "label value", for
// the benchmarks whose name matches (the first match wins).
var details = []struct {
	name  *regexp.Regexp
	parts []part
}{
	{regexp.MustCompile(`^Pacer/`), []part{{"lag-p50-us", "p50"}, {"coarse-lag-p50-us", "coarse p50"},
		{"cpu-%", "CPU"}, {"coarse-cpu-%", "coarse CPU"}, {"floor-lag-p99-us", "machine floor p99"}, {"wake-p99-us", "wake p99"}}},
	{regexp.MustCompile(`^ProtocolPacing$`), []part{{"lag-p50-us", "lag p50"}, {"coarse-lag-p50-us", "coarse lag p50"},
		{"cpu-%", "CPU"}, {"coarse-cpu-%", "coarse CPU"}}},
	{regexp.MustCompile(`^CapacityProtocol$`), []part{{"lag-p50-us", "lag p50"}, {"lag-p99-us", "p99"},
		{"errors", "errors"}, {"floor-errors", "floor errors"}, {"cpu-us/run", "driver CPU"}, {"target-cpu-us/run", "target CPU"}, {"floor-cpu-us/run", "floor CPU"},
		{"all-procs-lag-p99-us", "target on every core: lag p99"}, {"all-procs-target-cpu-us/run", "its CPU"}, {"all-procs-errors", "its errors"},
		{"batch-lag-p99-us", "batch 2 lag p99"}, {"batch-cpu-us/run", "batch 2 driver CPU"}, {"batch-target-cpu-us/run", "batch 2 target CPU"},
		{"per-run-runs/s", "per-run polls"}, {"per-run-cpu-us/run", "per-run CPU"},
		{"floor-lag-p99-us", "null target lag p99"}, {"steal-cores", "host steal"}}},
	{regexp.MustCompile(`^SleepOvershoot/`), []part{{"overshoot-p90-us", "p90"}, {"overshoot-p99-us", "p99"}}},
	{regexp.MustCompile(`^CapacityInProcess$`), []part{{"lag-p50-us", "lag p50"}, {"lag-p99-us", "p99"},
		{"cpu-%", "CPU"}, {"null-lag-p99-us", "null lag p99"}}},
}

// detailText is "(label value, …)" for b's details, "" for none.
func detailText(b *bench) string {
	for _, d := range details {
		if !d.name.MatchString(b.name) {
			continue
		}
		var fs []string
		for _, p := range d.parts {
			if v, ok := median(b.values[p.unit]); ok {
				fs = append(fs, p.label+" "+format(p.unit, v))
			}
		}
		if len(fs) > 0 {
			return " (" + strings.Join(fs, ", ") + ")"
		}
		return ""
	}
	return ""
}

// bench is every result of one benchmark name: unit -> values, one per
// repetition.
type bench struct {
	name   string
	values map[string][]float64
}

func main() {
	strict := flag.Bool("strict", false, "exit 1 when a target is missed")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: summary [-strict] [go-test-bench-output ...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	benches, header, err := read(flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(2)
	}
	missed := render(os.Stdout, benches, header)
	if *strict && missed > 0 {
		os.Exit(1)
	}
}

// read parses the files (stdin when none) and returns the benchmarks in
// the order they first appear, and a header naming the machine.
func read(files []string) ([]*bench, string, error) {
	var c collector
	if len(files) == 0 {
		if err := c.scan(os.Stdin, "stdin"); err != nil {
			return nil, "", err
		}
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, "", err
		}
		err = c.scan(fh, f)
		fh.Close()
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", f, err)
		}
	}
	return c.order, c.header(), nil
}

// collector gathers benchmark results from `go test -bench` outputs.
type collector struct {
	order             []*bench
	byName            map[string]*bench
	cpu, goos, goarch string
}

// scan adds the results in r, named name in errors.
func (c *collector) scan(r io.Reader, name string) error {
	if c.byName == nil {
		c.byName = map[string]*bench{}
	}
	br := benchfmt.NewReader(r, name)
	for br.Scan() {
		res, ok := br.Result().(*benchfmt.Result)
		if !ok {
			continue // syntax errors are non-benchmark lines of go test
		}
		c.cpu, c.goos, c.goarch = or(res.GetConfig("cpu"), c.cpu), or(res.GetConfig("goos"), c.goos), or(res.GetConfig("goarch"), c.goarch)
		base, parts := res.Name.Parts()
		full := string(base)
		for _, p := range parts {
			if p[0] == '/' {
				full += string(p)
			}
		}
		b := c.byName[full]
		if b == nil {
			b = &bench{name: full, values: map[string][]float64{}}
			c.byName[full] = b
			c.order = append(c.order, b)
		}
		for _, v := range res.Values {
			unit, val := v.Unit, v.Value
			if v.OrigUnit != "" { // as written, e.g. ns/op rather than sec/op
				unit, val = v.OrigUnit, v.OrigValue
			}
			b.values[unit] = append(b.values[unit], val)
		}
	}
	return br.Err()
}

// header names the machine the results were measured on.
func (c *collector) header() string {
	return strings.TrimSpace(strings.Join([]string{c.goos + "/" + c.goarch, strings.TrimSpace(c.cpu)}, ", "))
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// render writes the table and returns how many targets were missed.
func render(w io.Writer, benches []*bench, header string) (missed int) {
	fmt.Fprintf(w, "durabench performance — %s\n\n", header)
	fmt.Fprintln(w, "| benchmark | value | floor | ratio | target | ok |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|:-:|")
	checked, skipped := 0, 0
	var notes []string
	for _, b := range benches {
		r := match(b.name)
		if r == nil {
			skipped++
			continue
		}
		val, ok := median(b.values[r.value])
		if !ok {
			skipped++
			continue
		}
		floorCell, ratioCell := "", ""
		if ratio, ok := median(b.values[r.ratio]); ok && r.ratio != "" {
			ratioCell = fmt.Sprintf("%.2f×", ratio)
			if lo, hi := spread(b.values[r.ratio]); hi > lo {
				ratioCell += fmt.Sprintf(" (%.2f–%.2f)", lo, hi)
			}
			if r.floor == "" && ratio > 0 {
				floorCell = format(r.value, val/ratio)
			}
			var shares []string
			for _, p := range r.parts {
				if v, ok := median(b.values[p.unit]); ok {
					shares = append(shares, fmt.Sprintf("%s %.2f×", p.label, v))
				}
			}
			if len(shares) > 0 {
				ratioCell += " = " + strings.Join(shares, " · ")
			}
		}
		if fl, ok := median(b.values[r.floor]); ok && r.floor != "" {
			floorCell = format(r.floor, fl)
		}
		okCell := ""
		if eo, fo, ok := opsDiffer(b); ok {
			// Not like for like: the version's operation count depends
			// on timing and the two sides took different paths.
			okCell = "≠"
			notes = append(notes, fmt.Sprintf("%s: the engine issued %.0f world operations per run, the floor %.0f; the ratio compares different work.", b.name, eo, fo))
		} else if len(r.checks) > 0 {
			checked++
			pass := true
			for _, c := range r.checks {
				v, ok := median(b.values[c.unit])
				pass = pass && ok && c.holds(v)
			}
			okCell = "✓"
			if !pass {
				okCell = "✗"
				missed++
			}
		}
		fmt.Fprintf(w, "| %s%s | %s | %s | %s | %s | %s |\n", b.name, detailText(b), format(r.value, val), floorCell, ratioCell, r.target, okCell)
	}
	fmt.Fprintf(w, "\n%d of %d targets met", checked-missed, checked)
	if skipped > 0 {
		fmt.Fprintf(w, "; %d other benchmarks are in the raw output", skipped)
	}
	fmt.Fprintln(w, ".")
	for _, n := range notes {
		fmt.Fprintln(w, "≠ "+n)
	}
	return missed
}

// opsDiffer reports the engine's and the floor's world operations per run
// when they differ by more than 10%.
func opsDiffer(b *bench) (engineOps, floorOps float64, differ bool) {
	eo, ok1 := median(b.values["ops/run"])
	fo, ok2 := median(b.values["floor-ops/run"])
	if !ok1 || !ok2 || eo <= 0 || fo <= 0 {
		return 0, 0, false
	}
	return eo, fo, math.Abs(eo-fo) > 0.1*max(eo, fo)
}

func match(name string) *rule {
	for i := range rules {
		if rules[i].name.MatchString(name) {
			return &rules[i]
		}
	}
	return nil
}

func median(vs []float64) (float64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}

func spread(vs []float64) (lo, hi float64) {
	if len(vs) == 0 {
		return 0, 0
	}
	return slices.Min(vs), slices.Max(vs)
}

// format shows a value in its unit: durations for time units, plain
// numbers with the unit otherwise.
func format(unit string, v float64) string {
	switch {
	case strings.HasPrefix(unit, "ns/") || strings.HasSuffix(unit, "-ns/record") || strings.HasSuffix(unit, "-ns/op") || strings.HasSuffix(unit, "-ns/line"):
		if v < 1000 {
			return fmt.Sprintf("%.3g ns", v)
		}
		return duration(time.Duration(v))
	case strings.HasSuffix(unit, "-us"):
		return duration(time.Duration(v * float64(time.Microsecond)))
	case strings.HasSuffix(unit, "runs/s"):
		return fmt.Sprintf("%.0f runs/s", v)
	case strings.HasSuffix(unit, "cpu-%"):
		return fmt.Sprintf("%.0f%%", v)
	case strings.HasSuffix(unit, "-us/run"):
		return duration(time.Duration(v*float64(time.Microsecond))) + "/run"
	case strings.HasSuffix(unit, "errors"):
		return fmt.Sprintf("%.0f", v)
	case strings.HasSuffix(unit, "-cores"):
		return fmt.Sprintf("%.2f cores", v)
	}
	return fmt.Sprintf("%.3g %s", v, unit)
}

// duration rounds d to three significant figures.
func duration(d time.Duration) string {
	if d <= 0 {
		return d.String()
	}
	digits := int(math.Floor(math.Log10(float64(d)))) + 1
	if digits > 3 {
		unit := time.Duration(math.Pow10(digits - 3))
		d = d.Round(unit)
	}
	return d.String()
}
