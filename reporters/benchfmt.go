package reporters

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// Benchfmt writes f in the Go benchmark format
// (https://golang.org/design/14313-benchmark-format) so that benchstat
// and the golang.org/x/perf tools read durabench results:
//
//	goos: linux
//	goarch: amd64
//	cpu: 8 CPUs
//	pkg: durabench
//	durabench-version: v0.1.0
//	commit: 0123abc
//	BenchmarkFanout/branches=256/version=resilient/switches=none/world=nats/profile=none 1 31250000 ttfs-ns 1054000000 ttls-ns ...
//
// Each cell writes one line per run, carrying that run's value of every
// per-run metric (metrics.Def.Sample "run": ttfs, ttls, wo, ttc, so, ...)
// in nanoseconds, with the unit "<metric>-ns". Metrics with several samples
// per run (skew_offset per branch, stso per step, sl per chunk) are left
// out: benchstat would read each sample as a run. Values of the i-th line
// are each metric's i-th per-run value; a metric with fewer values (e.g. no
// TTFS for a run that never started a step) is absent from the last lines.
func Benchfmt(w io.Writer, f *results.File) error {
	var b strings.Builder
	for _, kv := range benchfmtConfig(f) {
		fmt.Fprintf(&b, "%s: %s\n", kv[0], kv[1])
	}
	// Unit metadata: a metric whose lower is better says so (an
	// informational one, which a slower engine can lower, names no
	// direction), and no distribution is assumed (benchstat then uses the
	// median and Mann-Whitney U, as durabench compare does).
	units := map[string]bool{}
	for i := range f.Cells {
		for _, m := range benchfmtMetrics(&f.Cells[i]) {
			if !units[m] {
				units[m] = true
				better := ""
				if metrics.BetterOf(m) == metrics.Lower {
					better = " better=lower"
				}
				fmt.Fprintf(&b, "Unit %s-ns%s assume=nothing\n", m, better)
			}
		}
	}
	for i := range f.Cells {
		c := &f.Cells[i]
		names := benchfmtMetrics(c)
		n := 0
		for _, m := range names {
			n = max(n, len(c.Metrics[m].Values))
		}
		name := benchfmtName(c)
		for run := 0; run < n; run++ {
			b.WriteString("Benchmark" + name + " 1")
			for _, m := range names {
				if vals := c.Metrics[m].Values; run < len(vals) {
					// µs -> ns, the unit benchstat scales and labels.
					fmt.Fprintf(&b, " %d %s-ns", vals[run]*1000, m)
				}
			}
			b.WriteByte('\n')
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("benchfmt: %w", err)
	}
	return nil
}

// benchfmtConfig is the file configuration, as key/value pairs.
func benchfmtConfig(f *results.File) [][2]string {
	var cfg [][2]string
	add := func(k, v string) {
		if v = strings.Join(strings.Fields(v), " "); v != "" {
			cfg = append(cfg, [2]string{k, v})
		}
	}
	add("goos", f.Host.OS)
	add("goarch", f.Host.Arch)
	if f.Host.CPUs > 0 {
		add("cpu", fmt.Sprintf("%d CPUs", f.Host.CPUs))
	}
	add("pkg", "durabench")
	add("durabench-version", f.DurabenchVersion)
	add("commit", f.GitCommit)
	if f.VirtualTime {
		add("clock", "virtual")
	}
	return cfg
}

// benchfmtMetrics returns the cell's per-run metrics in definition order.
// Metrics unknown to this build (a newer results file) are left out:
// nothing says they have one sample per run.
func benchfmtMetrics(c *results.Cell) []string {
	var out []string
	for _, d := range metrics.Definitions {
		if _, ok := c.Metrics[d.Name]; ok && d.Sample == "run" {
			out = append(out, d.Name)
		}
	}
	return out
}

// benchfmtName is "Scenario/key=value/...": the cell key as sub-benchmark
// configuration, which benchstat can split into columns (-col, -row).
func benchfmtName(c *results.Cell) string {
	k := stats.KeyOf(c)
	parts := []string{benchfmtTitle(k.Scenario)}
	if k.Branches != 0 {
		parts = append(parts, "branches="+strconv.Itoa(k.Branches))
	}
	if k.Steps != 0 {
		parts = append(parts, "steps="+strconv.Itoa(k.Steps))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Options)) {
		parts = append(parts, benchfmtPart(name)+"="+benchfmtPart(c.Options[name]))
	}
	parts = append(parts,
		"version="+benchfmtPart(k.Version),
		"switches="+benchfmtPart(k.Switches),
		"world="+benchfmtPart(k.World),
		"profile="+benchfmtPart(k.Profile))
	return strings.Join(parts, "/")
}

// benchfmtTitle turns a scenario name ("fanout", "hook-stream") into a
// benchmark base name ("Fanout", "HookStream").
func benchfmtTitle(s string) string {
	var b strings.Builder
	upper := true
	for _, r := range s {
		if r == '-' || r == '_' || unicode.IsSpace(r) {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	return benchfmtPart(b.String())
}

// benchfmtPart keeps a name part from breaking the format: no spaces (they
// end the name) and no '/' (it separates parts).
func benchfmtPart(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '/' {
			return '_'
		}
		return r
	}, s)
}
