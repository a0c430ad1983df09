package stats

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// withPath gives every cell of f a critical path: per run, TTLS split into
// queue_wait (queue of it), write (the rest) and nothing else; queue
// scales the queue wait of the 256-branch cells.
func withPath(f *results.File, seed uint64, queue float64) *results.File {
	rng := rand.New(rand.NewPCG(seed, 9))
	for i := range f.Cells {
		c := &f.Cells[i]
		ttls := c.Metrics["ttls"].Values
		share := 0.4
		if c.Branches == 256 {
			share *= queue
		}
		path := make([]results.PathCategory, len(metrics.Categories))
		for j, def := range metrics.Categories {
			path[j] = results.PathCategory{Category: def.Name, Values: make([]int64, len(ttls))}
		}
		qi, _ := metrics.CategoryIndex(metrics.CatQueueWait)
		wi, _ := metrics.CategoryIndex(metrics.CatWrite)
		for r, x := range ttls {
			q := int64(float64(x) * share * (0.95 + 0.1*rng.Float64()))
			path[qi].Values[r], path[wi].Values[r] = q, max(0, x-q)
		}
		for j := range path {
			vs := slices.Sorted(slices.Values(path[j].Values))
			path[j].P50, path[j].P90 = metrics.Quantile(vs, 50), metrics.Quantile(vs, 90)
			var sum float64
			for _, v := range vs {
				sum += float64(v)
			}
			path[j].Mean = sum / float64(len(vs))
		}
		c.CriticalPath = path
	}
	return f
}

func TestParseCriticalPathRules(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Rule
	}{
		{"critical_path.queue_wait.p50 < 1.10x baseline", Rule{Metric: "critical_path.queue_wait", Stat: "p50", Op: "<",
			Threshold: 1.10, Relative: true}},
		{"critical_path.contention{branches=256}.p90 <= 2s", Rule{Metric: "critical_path.contention", Stat: "p90", Op: "<=",
			Threshold: 2e6, Selector: []Match{{"branches", []string{"256"}}}}},
	} {
		got, err := ParseRule(tc.text)
		if err != nil {
			t.Fatalf("ParseRule(%q): %v", tc.text, err)
		}
		got.Text, got.Source = "", ""
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseRule(%q)\n got %+v\nwant %+v", tc.text, got, tc.want)
		}
		again, err := ParseRule(got.String())
		if err != nil || again.Metric != got.Metric {
			t.Errorf("re-parse of %q: %v %+v", got.String(), err, again)
		}
	}
	for _, tc := range []struct{ text, want string }{
		{"critical_path.p50 < 1.1x baseline", `--rule:1:15: unknown critical-path category "p50"`},
		{"critical_path < 1.1x baseline", "--rule:1:1: critical_path needs a category, e.g. critical_path.queue_wait.p50"},
		{"critical_path.waiting.p50 < 1.1x baseline", `--rule:1:15: unknown critical-path category "waiting"`},
		{"critical_path.queue_wait < 3ms", "--rule:1:25: critical_path.queue_wait needs a statistic, e.g. critical_path.queue_wait.p90"},
	} {
		_, err := ParseRule(tc.text)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseRule(%q): %v, want %q…", tc.text, err, tc.want)
		}
	}
}

// TestGateCriticalPath: the head's queue wait at 256 branches grows by 60%
// while its TTLS does not move: a rule on that category fails, with the
// per-run test, in those cells only; a rule on another category passes.
func TestGateCriticalPath(t *testing.T) {
	base := withPath(synthFile(1, 30, 0.05, 1, synthMatrix), 1, 1)
	head := withPath(synthFile(2, 30, 0.05, 1, synthMatrix), 2, 1.6)
	rules := []Rule{}
	for _, text := range []string{"critical_path.queue_wait.p50 < 1.10x baseline", "critical_path.write{branches=20|64}.p50 < 1.10x baseline"} {
		r, err := ParseRule(text)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	rep := failsAt256(t, head, base, rules, "critical_path.queue_wait")
	if n := len(rep.Rules[1].Checks); n != 4 {
		t.Errorf("the write rule checked %d cells, want 4", n)
	}
}

// failsAt256 gates head against base with rules and checks that exactly
// the two 256-branch cells fail, on metric, by the per-run test.
func failsAt256(t *testing.T, head, base *results.File, rules []Rule, metric string) *GateReport {
	t.Helper()
	rep, err := Gate(head, base, rules)
	if err != nil {
		t.Fatal(err)
	}
	failed := rep.Failed()
	if len(failed) != 2 {
		t.Fatalf("%d failed checks, want the two 256-branch cells: %+v", len(failed), failed)
	}
	for _, f := range failed {
		if f.Rule.Metric != metric || f.Check.Cell.Branches != 256 || !(f.Check.P < Alpha) {
			t.Errorf("unexpected failure %+v", f)
		}
	}
	return rep
}

// TestCompareCriticalPath: compare lists each category that holds time as
// a metric of its own, tested run by run like TTLS.
func TestCompareCriticalPath(t *testing.T) {
	base := withPath(synthFile(1, 30, 0.05, 1, synthMatrix), 1, 1)
	head := withPath(synthFile(2, 30, 0.05, 1, synthMatrix), 2, 1.6)
	c, err := Compare(base, head, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mc := range c.Metrics {
		names = append(names, mc.Metric)
	}
	if want := []string{"ttfs", "ttls", "critical_path.queue_wait", "critical_path.write"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("metrics %v, want %v", names, want)
	}
	for _, r := range c.Metrics[2].Rows {
		worse := r.Cell.Branches == 256
		if worse != (r.Verdict == VerdictWorse) || r.Unit != UnitRun || r.Statistic != string(metrics.RunValue) {
			t.Errorf("%v: verdict %s (%s, %s), Δ %.1f%%", r.Cell, r.Verdict, r.Statistic, r.Unit, r.DeltaPct)
		}
	}
	only, err := Compare(base, head, CompareOptions{Metrics: []string{"critical_path"}})
	if err != nil || len(only.Metrics) != 2 {
		t.Errorf("--metrics critical_path: %v, %d metrics", err, len(only.Metrics))
	}
}

// withTail gives every cell of f a path to completion: its critical path
// and then a tail of unattributed time (tail µs a run; ×scale at 256
// branches).
func withTail(f *results.File, seed uint64, tail int64, scale float64) *results.File {
	rng := rand.New(rand.NewPCG(seed, 11))
	ui, _ := metrics.CategoryIndex(metrics.CatUnattributed)
	for i := range f.Cells {
		c := &f.Cells[i]
		path := make([]results.PathCategory, len(c.CriticalPath))
		for j, pc := range c.CriticalPath {
			pc.Values = slices.Clone(pc.Values)
			path[j] = pc
		}
		t := float64(tail)
		if c.Branches == 256 {
			t *= scale
		}
		for r := range path[ui].Values {
			path[ui].Values[r] += int64(t * (0.95 + 0.1*rng.Float64()))
		}
		vs := slices.Sorted(slices.Values(path[ui].Values))
		path[ui].P50, path[ui].P90 = metrics.Quantile(vs, 50), metrics.Quantile(vs, 90)
		c.CompletionPath = path
	}
	return f
}

// TestCompletionPathCompareAndGate: the path to completion's categories
// are metrics of their own (critical_path_ttc.<category>), which compare
// lists when asked and a gate rule names: the head's tail after the last
// step doubles at 256 branches, and a rule on it fails there only.
func TestCompletionPathCompareAndGate(t *testing.T) {
	base := withTail(withPath(synthFile(1, 30, 0.05, 1, synthMatrix), 1, 1), 1, 5000, 1)
	head := withTail(withPath(synthFile(2, 30, 0.05, 1, synthMatrix), 2, 1), 2, 5000, 2)
	def, err := Compare(base, head, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, mc := range def.Metrics {
		if strings.HasPrefix(mc.Metric, metrics.CompletionPathMetricPrefix) {
			t.Errorf("compare lists %s unasked", mc.Metric)
		}
	}
	c, err := Compare(base, head, CompareOptions{Metrics: []string{"critical_path_ttc"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mc := range c.Metrics {
		names = append(names, mc.Metric)
	}
	want := []string{"critical_path_ttc.queue_wait", "critical_path_ttc.write", "critical_path_ttc.unattributed"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("--metrics critical_path_ttc: %v, want %v", names, want)
	}
	for _, r := range c.Metrics[2].Rows {
		if worse := r.Cell.Branches == 256; worse != (r.Verdict == VerdictWorse) {
			t.Errorf("%v: unattributed verdict %s, Δ %.1f%%", r.Cell, r.Verdict, r.DeltaPct)
		}
	}

	r, err := ParseRule("critical_path_ttc.unattributed.p50 < 1.10x baseline")
	if err != nil || r.Metric != "critical_path_ttc.unattributed" {
		t.Fatalf("rule: %v, %+v", err, r)
	}
	failsAt256(t, head, base, []Rule{r}, "critical_path_ttc.unattributed")
	if _, err := ParseRule("critical_path_ttc < 1.1x baseline"); err == nil ||
		!strings.HasPrefix(err.Error(), "--rule:1:1: critical_path_ttc needs a category, e.g. critical_path_ttc.queue_wait.p50") {
		t.Errorf("critical_path_ttc without a category: %v", err)
	}
}
