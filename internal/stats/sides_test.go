package stats

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/results"
)

// interleavedFile is an interleaved sweep of one fan-out pair per branch
// count, versions "a" and "b": in block k both runs share the
// environment's drift (a random walk of sd drift per block) and add their
// own noise (sd noise); b's runs are effect times a's. Every figure is a
// log-normal of median 100 ms.
func interleavedFile(seed uint64, blocks int, drift, noise, effect float64, branches ...int) *results.File {
	rng := rand.New(rand.NewPCG(seed, 45))
	f := &results.File{Schema: results.Schema, Methodology: results.Methodology, DurabenchVersion: "test",
		StartedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Host: results.Host{CPUs: 2, OS: "linux", Go: "go"},
		Plan: results.PlanRecord{Interleave: &results.Interleave{Dimension: "versions", A: "a", B: "b", Order: "abba"}}}
	for _, br := range branches {
		var vals [2][]int64
		var runs [2][]results.PairedRun
		env := 0.0
		for k := range blocks {
			env += drift * rng.NormFloat64()
			for s := range 2 {
				x := 1e5 * math.Exp(env+noise*rng.NormFloat64())
				if s == 1 {
					x *= effect
				}
				v := int64(x)
				vals[s] = append(vals[s], v)
				runs[s] = append(runs[s], results.PairedRun{Run: "r", Block: k + 1, Position: (s + k) % 2, Values: map[string]int64{"ttls": v}})
			}
		}
		for s, v := range []string{"a", "b"} {
			f.Cells = append(f.Cells, results.Cell{Scenario: "fanout", Branches: br, Version: v, Switches: []string{}, World: "nats",
				Profile: "none", Runs: blocks, Metrics: map[string]results.Metric{"ttls": results.NewMetric(vals[s], 0)},
				Pairing: &results.Pairing{Pair: "p" + string(rune('0'+br%10)) + v[:0], Side: []string{results.SideA, results.SideB}[s],
					Partner: "other", Mode: results.PairTurnstile, Runs: runs[s]}})
		}
	}
	return f
}

// A +5% change under an environment that drifts by ±15% from block to
// block: the two sides' runs of a block share the drift, so the paired
// test finds the change and its interval holds +5%, while the same
// values taken as two samples (Mann-Whitney) do not tell it from the
// drift. An A/A file is not called a change.
func TestPairedUnderDrift(t *testing.T) {
	f := interleavedFile(1, 20, 0.15, 0.02, 1.05, 64)
	base, head, bl, hl, missing, err := SplitSides(f)
	if err != nil || len(missing) > 0 {
		t.Fatal(err, missing)
	}
	if bl != "version a" || hl != "version b" || len(base.Cells) != 1 || len(head.Cells) != 1 || KeyOf(&base.Cells[0]) != KeyOf(&head.Cells[0]) {
		t.Fatalf("sides %q %q: %v / %v", bl, hl, base.Cells, head.Cells)
	}
	c, err := Compare(base, head, CompareOptions{BaseLabel: bl, HeadLabel: hl})
	if err != nil {
		t.Fatal(err)
	}
	r := c.Metrics[0].Rows[0]
	if r.Paired == nil || !r.Test.Significant || r.Verdict != VerdictWorse || r.Paired.N != 20 {
		t.Fatalf("paired: %+v", r.Paired)
	}
	if !(r.MDEPct > 0 && r.MDEPct < 4) {
		t.Errorf("MDE %.2f%%: noise of 2%% a run over 20 pairs", r.MDEPct)
	}
	if mw := MannWhitney(base.Cells[0].Metrics["ttls"].Values, head.Cells[0].Metrics["ttls"].Values, Alpha); mw.Significant {
		t.Errorf("unpaired: p=%.3f, the drift should hide +5%%", mw.P)
	}
	if c.Interleave == nil {
		t.Error("comparison has no interleave record")
	}
	var text bytes.Buffer
	if err := c.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "paired: one interleaved sweep") || !strings.Contains(text.String(), "n=20 pairs, MDE ") {
		t.Errorf("text:\n%s", text.String())
	}

	// The interval holds the change in about 95% of sweeps.
	covered := 0
	const sweeps = 400
	for seed := range uint64(sweeps) {
		base, head, _, _, _, _ := SplitSides(interleavedFile(100+seed, 20, 0.15, 0.02, 1.05, 64))
		c, _ := Compare(base, head, CompareOptions{})
		if lo, hi := c.Metrics[0].Rows[0].Paired.CIPct(); lo < 5 && 5 < hi {
			covered++
		}
	}
	if rate := float64(covered) / sweeps; rate < 0.92 || rate > 0.985 {
		t.Errorf("the 95%% interval held +5%% in %d of %d sweeps", covered, sweeps)
	}

	aa := interleavedFile(2, 20, 0.15, 0.02, 1, 64)
	base, head, _, _, _, _ = SplitSides(aa)
	c, _ = Compare(base, head, CompareOptions{})
	if r := c.Metrics[0].Rows[0]; r.Verdict != VerdictSame || r.Paired == nil {
		t.Errorf("A/A: verdict %s, paired %+v", r.Verdict, r.Paired)
	}
}

// The gate on an interleaved file: a relative rule's tests are paired (a
// +20% change fails a 1.10x rule beyond it), and a rule whose threshold
// is within a cell's MDE says so.
func TestGatePaired(t *testing.T) {
	f := interleavedFile(3, 12, 0.1, 0.02, 1.2, 64)
	base, head, _, _, _, err := SplitSides(f)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Gate(head, base, mustRules(t, "ttls.p50 < 1.10x baseline\nttls.p90 < 1.01x baseline\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Rules[0].Checks[0]
	if c.Paired == nil || c.Verdict != Fail || !(c.PBeyond < 0.05) || rep.Interleave == nil {
		t.Errorf("check %+v", c)
	}
	var warned bool
	for _, w := range rep.Warnings {
		if strings.HasPrefix(w, "ttls.p90 < 1.01x baseline") && strings.Contains(w, "minimum detectable effect") {
			warned = true
		}
		if strings.HasPrefix(w, "ttls.p50 < 1.10x baseline") {
			t.Errorf("a 10%% threshold over an MDE of %.1f%% warned: %s", c.MDEPct, w)
		}
	}
	if !warned {
		t.Errorf("no MDE warning for the 1%% rule (MDE %.2f%%): %q", c.MDEPct, rep.Warnings)
	}
}

// Pairs of targets are keyed by their point alone on both sides.
func TestSplitSidesTargets(t *testing.T) {
	f := interleavedFile(4, 6, 0, 0.02, 1, 8)
	f.Plan.Interleave.Dimension = "targets"
	f.Cells[0].Target, f.Cells[0].Version, f.Cells[0].World = "", "resilient", "mem"
	f.Cells[1].Target, f.Cells[1].Version, f.Cells[1].World = "myengine", "", ""
	base, head, _, _, _, err := SplitSides(f)
	if err != nil {
		t.Fatal(err)
	}
	if KeyOf(&base.Cells[0]) != KeyOf(&head.Cells[0]) || PairKey(f, &f.Cells[1]) != KeyOf(&head.Cells[0]) {
		t.Errorf("keys %v %v", KeyOf(&base.Cells[0]), KeyOf(&head.Cells[0]))
	}
	if _, _, _, _, _, err := SplitSides(synthFile(1, 5, 0.1, 1, synthMatrix)); err == nil {
		t.Error("a file that is not interleaved split")
	}
}
