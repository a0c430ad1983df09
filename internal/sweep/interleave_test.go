package sweep

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// turn is one granted run: side, phase and index.
type turn struct {
	side   int
	warmup bool
	i      int
}

func (t turn) String() string {
	p := "r"
	if t.warmup {
		p = "w"
	}
	return fmt.Sprintf("%c%s%d", "AB"[t.side], p, t.i)
}

// drive runs two fake drivers against ts at once, each taking its warm-up
// and measured runs in turn (a run "finishes" as soon as it started,
// with TTC value(side, i)), and returns the order the runs started in.
func drive(t *testing.T, ts *turnstile, warmup, reps int, value func(side, i int) time.Duration) []turn {
	t.Helper()
	var mu sync.Mutex
	var got []turn
	var wg sync.WaitGroup
	for s := range 2 {
		side := ts.side(s)
		wg.Go(func() {
			defer ts.leave(s)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, ph := range []struct {
				warmup bool
				n      int
			}{{true, warmup}, {false, reps}} {
				for i := range ph.n {
					err := side.Wait(ctx, ph.warmup, i)
					if errors.Is(err, driver.ErrEnough) {
						break
					}
					if err != nil {
						t.Errorf("side %d wait %v %d: %v", s, ph.warmup, i, err)
						return
					}
					mu.Lock()
					got = append(got, turn{s, ph.warmup, i})
					mu.Unlock()
					var v time.Duration
					if value != nil && !ph.warmup {
						v = value(s, i)
					}
					side.Done(ph.warmup, i, metrics.RunTimeline{ID: fmt.Sprint(s, i), Finished: true, Done: v})
				}
				side.End(ph.warmup)
			}
		})
	}
	wg.Wait()
	return got
}

func turns(ts []turn) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.String())
	}
	return b.String()
}

// ABBA: warm-ups and measured runs alternate in blocks AB, BA, AB, BA;
// one run at a time, each side's runs in order; every measured run's
// block and position are recorded.
func TestTurnstileABBA(t *testing.T) {
	ts := newTurnstile(OrderABBA, 1, 2, 4, precisionRule{})
	got := turns(drive(t, ts, 2, 4, nil))
	want := "Aw0 Bw0 Bw1 Aw1 Ar0 Br0 Br1 Ar1 Ar2 Br2 Br3 Ar3"
	if got != want {
		t.Fatalf("order\n got %s\nwant %s", got, want)
	}
	for s := range 2 {
		for i := range 4 {
			block, pos := ts.placeOf(s, i)
			wantPos := (s + i) % 2
			if block != i+1 || pos != wantPos {
				t.Errorf("side %d run %d: block %d position %d, want %d %d", s, i, block, pos, i+1, wantPos)
			}
		}
	}
	if ts.stoppedWhy() != "" {
		t.Errorf("stopped %q without a precision target", ts.stoppedWhy())
	}
}

// Random order: each block holds one run of each side; the order is the
// seed's (the same seed, the same order; another seed, another), and
// about half the blocks start with A.
func TestTurnstileRandomSeeded(t *testing.T) {
	const blocks = 400
	orderOf := func(seed int64) []int {
		ts := newTurnstile(OrderRandom, seed, 0, blocks, precisionRule{})
		var first []int
		for k := range blocks {
			a, b := ts.slots[2*k], ts.slots[2*k+1]
			if a.side == b.side || a.i != k || b.i != k || a.pos != 0 || b.pos != 1 {
				t.Fatalf("block %d: %+v %+v", k, a, b)
			}
			first = append(first, a.side)
		}
		return first
	}
	one, again, other := orderOf(7), orderOf(7), orderOf(8)
	if fmt.Sprint(one) != fmt.Sprint(again) {
		t.Error("the same seed gave another order")
	}
	if fmt.Sprint(one) == fmt.Sprint(other) {
		t.Error("two seeds gave the same order")
	}
	aFirst := 0
	for _, s := range one {
		if s == 0 {
			aFirst++
		}
	}
	if aFirst < blocks*4/10 || aFirst > blocks*6/10 {
		t.Errorf("A first in %d of %d blocks", aFirst, blocks)
	}
	// And it runs: the drivers follow the drawn order.
	ts := newTurnstile(OrderRandom, 7, 0, 6, precisionRule{})
	got := drive(t, ts, 0, 6, nil)
	for k := range 6 {
		if got[2*k].side != one[k] {
			t.Fatalf("block %d started with %v, drawn %d: %s", k, got[2*k], one[k], turns(got))
		}
	}
}

// A side whose phase ends early (its driver timed out, or failed) does not
// hold the other: its slots are skipped.
func TestTurnstileSideLeaves(t *testing.T) {
	ts := newTurnstile(OrderABBA, 1, 0, 6, precisionRule{})
	b := ts.side(1)
	ctx := context.Background()
	early, cancelEarly := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelEarly()
	if err := b.Wait(early, false, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("B's run 0 before A's: %v, want the deadline", err)
	}
	done := make(chan []turn)
	a := ts.side(0)
	go func() {
		var got []turn
		for i := range 6 {
			if err := a.Wait(ctx, false, i); err != nil {
				t.Errorf("A run %d: %v", i, err)
				break
			}
			got = append(got, turn{0, false, i})
			a.Done(false, i, metrics.RunTimeline{Finished: true})
		}
		done <- got
	}()
	// B is granted its first run, then its phase ends with it in flight;
	// its End returns once A's phase is over too.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := b.Wait(wctx, false, 0); err != nil {
		t.Fatal(err)
	}
	bEnded := make(chan struct{})
	go func() { b.End(false); close(bEnded) }()
	select {
	case got := <-done:
		if len(got) != 6 {
			t.Errorf("A ran %d of 6", len(got))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("A is stuck behind B's ended phase")
	}
	select {
	case <-bEnded:
		t.Fatal("B's measured phase ended before A's")
	case <-time.After(20 * time.Millisecond):
	}
	a.End(false)
	select {
	case <-bEnded:
	case <-time.After(5 * time.Second):
		t.Fatal("B's End still waits after A's phase ended")
	}
}

// --precision: a pair whose ratio barely departs from 1 stops at the
// plan's reps (the interval is narrow at once); one whose ratio scatters
// adds blocks up to the budget, of runs or of time; ABBA stops after an
// even number of blocks only.
func TestTurnstilePrecision(t *testing.T) {
	// A/A-like: the two sides within half a percent of each other.
	tight := func(side, i int) time.Duration {
		return time.Duration(1000+side*5+i%3) * time.Millisecond
	}
	ts := newTurnstile(OrderABBA, 1, 0, 5, precisionRule{pct: 2, metrics: []string{"ttc"}, maxRuns: 40})
	got := drive(t, ts, 0, 40, tight)
	if n := len(got); n != 12 || ts.stoppedWhy() != results.StoppedPrecision {
		t.Errorf("tight: %d runs (want 12: 5 reps, then the 6th block to make them even), stopped %q", n, ts.stoppedWhy())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	wide := func(side, i int) time.Duration {
		return time.Duration(1e6 * math.Exp(rng.NormFloat64()))
	}
	ts = newTurnstile(OrderRandom, 1, 0, 5, precisionRule{pct: 2, metrics: []string{"ttc"}, maxRuns: 12})
	got = drive(t, ts, 0, 40, wide)
	if n := len(got); n != 24 || ts.stoppedWhy() != results.StoppedMaxRuns {
		t.Errorf("wide: %d runs (want 24), stopped %q", n, ts.stoppedWhy())
	}
	ts = newTurnstile(OrderRandom, 1, 0, 5, precisionRule{pct: 2, metrics: []string{"ttc"}, maxRuns: 1000, maxTime: time.Millisecond})
	start := time.Now()
	ts.now = func() time.Time { return start.Add(time.Duration(len(ts.slots)) * time.Millisecond) }
	drive(t, ts, 0, 1000, wide)
	if ts.stoppedWhy() != results.StoppedMaxTime || ts.blocks > 6 {
		t.Errorf("max time: %d blocks, stopped %q", ts.blocks, ts.stoppedWhy())
	}
}

// The stopping rule's false-positive rate: A/A pairs (both sides drawn
// from one log-normal, with a drift shared by a block's two runs) swept
// with --precision until the interval's half-width is at most 5% or 40
// blocks ran, 2000 times each for two shapes of noise. The rule stops on
// a width (never on significance) taken from the log ratios' magnitudes
// alone, so the share of sweeps whose final signed-rank test is
// significant stays at α: measured 0.05 (a rule on the Hodges–Lehmann
// interval's own width, which depends on the signs too, measured 0.065).
func TestPrecisionStoppingAlpha(t *testing.T) {
	if testing.Short() {
		t.Skip("2×2000 simulated sweeps")
	}
	const sweeps = 2000
	for _, shape := range []struct {
		name string
		draw func(r *rand.Rand) float64
	}{
		{"log-normal", func(r *rand.Rand) float64 { return 0.1 * r.NormFloat64() }},
		// Heavy-tailed: one run in 20 three times slower (a stall).
		{"log-normal with stalls", func(r *rand.Rand) float64 {
			x := 0.08 * r.NormFloat64()
			if r.IntN(20) == 0 {
				x += math.Log(3)
			}
			return x
		}},
	} {
		t.Run(shape.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(45, uint64(len(shape.name))))
			significant, stops, blocks := 0, map[string]int{}, 0
			for sw := range sweeps {
				ts := newTurnstile([]string{OrderABBA, OrderRandom}[sw%2], int64(sw), 0, 10,
					precisionRule{pct: 5, metrics: []string{"ttc"}, maxRuns: 40})
				ts.arrived = [2]bool{true, true} // one goroutine plays both drivers
				drift := 0.0
				var a, b []int64
				for {
					ts.mu.Lock()
					ts.advanceLocked()
					if ts.cur >= len(ts.slots) {
						ts.mu.Unlock()
						break
					}
					s := ts.slots[ts.cur]
					ts.mu.Unlock()
					if s.pos == 0 {
						drift += 0.05 * rng.NormFloat64() // the environment moves between blocks
					}
					v := int64(1e5 * math.Exp(drift+shape.draw(rng)))
					side := ts.side(s.side)
					if err := side.Wait(context.Background(), false, s.i); err != nil {
						t.Fatal(err)
					}
					side.Done(false, s.i, metrics.RunTimeline{Finished: true, Done: time.Duration(v) * time.Microsecond})
					if s.side == 0 {
						a = append(a, v)
					} else {
						b = append(b, v)
					}
				}
				stops[ts.stoppedWhy()]++
				blocks += ts.blocks
				// Pairs by block: both sides ran every block.
				aa, bb := make([]int64, ts.blocks), make([]int64, ts.blocks)
				for k := range ts.blocks {
					aa[k], bb[k] = a[k], b[k]
				}
				if stats.PairedTest(aa, bb, stats.Alpha).Significant {
					significant++
				}
			}
			rate := float64(significant) / sweeps
			t.Logf("%s: %d of %d A/A sweeps significant (%.3f); stopped %v; %.1f blocks on average",
				shape.name, significant, sweeps, rate, stops, float64(blocks)/sweeps)
			if rate > 0.06 {
				t.Errorf("false-positive rate %.3f > 0.06", rate)
			}
			if stops[results.StoppedPrecision] == 0 || stops[results.StoppedMaxRuns] == 0 {
				t.Errorf("stops %v: the test should see both rules stop sweeps", stops)
			}
		})
	}
}

// An interleaved sweep on the mem world: the two versions' cells run as
// one pair, taking turns in ABBA blocks; each cell records its partner,
// and each run its block, position and tested values.
func TestInterleavedSweep(t *testing.T) {
	plan, err := planFrom(t, "--world", "mem", "--scenario", "fanout", "--branches", "8", "--versions", "baseline,resilient",
		"--switches", "none", "--reps", "4", "--warmup", "1", "--interleave=abba")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Config{Plan: plan, Out: filepath.Join(t.TempDir(), "out")})
	if err != nil {
		t.Fatal(err)
	}
	f, err := results.Read(res.ResultsPath)
	if err != nil {
		t.Fatal(err)
	}
	in := f.Plan.Interleave
	if in == nil || in.Dimension != "versions" || in.A != "baseline" || in.B != "resilient" || in.Order != OrderABBA {
		t.Fatalf("interleave record %+v", in)
	}
	if len(f.Cells) != 2 {
		t.Fatalf("%d cells", len(f.Cells))
	}
	a, b := f.Cells[0], f.Cells[1]
	if a.Version != "baseline" || b.Version != "resilient" || a.Pairing == nil || b.Pairing == nil {
		t.Fatalf("cells %s %v, %s %v", a.Version, a.Pairing, b.Version, b.Pairing)
	}
	if a.Pairing.Pair != b.Pairing.Pair || a.Pairing.Side != results.SideA || b.Pairing.Side != results.SideB ||
		a.Pairing.Partner != KeyOf(b) || b.Pairing.Partner != KeyOf(a) || a.Pairing.Mode != results.PairTurnstile {
		t.Errorf("pairings %+v / %+v", a.Pairing, b.Pairing)
	}
	for s, c := range []results.Cell{a, b} {
		if c.Runs != 4 || len(c.Pairing.Runs) != 4 {
			t.Fatalf("side %d: %d runs, %d paired", s, c.Runs, len(c.Pairing.Runs))
		}
		for i, r := range c.Pairing.Runs {
			if r.Block != i+1 || r.Position != (s+i)%2 || r.Values["ttls"] <= 0 {
				t.Errorf("side %d run %d: %+v", s, i, r)
			}
		}
		// The values are the cell's per-run values.
		if got, want := c.Pairing.Runs[2].Values["ttls"], c.Metrics["ttls"].Values[2]; got != want {
			t.Errorf("side %d: paired ttls %d, the cell's %d", s, got, want)
		}
	}
}

// --rounds on the built-in engine: each round's cells run on new worlds
// and engines, the blocks are numbered on across the rounds and every run
// id is the file's once.
func TestInterleavedSweepRounds(t *testing.T) {
	plan, err := planFrom(t, "--world", "mem", "--scenario", "fanout", "--branches", "8", "--versions", "baseline,resilient",
		"--switches", "none", "--reps", "5", "--warmup", "1", "--interleave", "--rounds", "2")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Config{Plan: plan, Out: filepath.Join(t.TempDir(), "out")})
	if err != nil {
		t.Fatal(err)
	}
	f := res.File
	if f.Plan.Interleave == nil || f.Plan.Interleave.Rounds != 2 || len(f.Cells) != 2 {
		t.Fatalf("%+v, %d cells", f.Plan.Interleave, len(f.Cells))
	}
	ids := map[string]bool{}
	for s, c := range f.Cells {
		if c.Runs != 5 || c.Metrics["ttls"].Count != 5 || c.Pairing == nil || len(c.Pairing.Runs) != 5 {
			t.Fatalf("side %d: %d runs, %d TTLS, pairing %+v", s, c.Runs, c.Metrics["ttls"].Count, c.Pairing)
		}
		for i, r := range c.Pairing.Runs {
			want := 1
			if i >= 3 {
				want = 2
			}
			if r.Block != i+1 || r.Round != want || ids[r.Run] {
				t.Errorf("side %d run %d: %+v (round %d wanted; id seen before: %v)", s, i, r, want, ids[r.Run])
			}
			ids[r.Run] = true
		}
	}
}

// The sim world runs a pair's cells one after the other (virtual time:
// nothing the machine does moves a figure), paired by run index.
func TestInterleavedSweepSim(t *testing.T) {
	plan, err := planFrom(t, "--world", "sim", "--scenario", "fanout", "--branches", "8", "--versions", "resilient",
		"--switches", "none,resilient-step-dispatch=0", "--reps", "3", "--interleave=random")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Config{Plan: plan, Out: filepath.Join(t.TempDir(), "out")})
	if err != nil {
		t.Fatal(err)
	}
	f := res.File
	if f.Plan.Interleave.Dimension != "switches" || len(f.Cells) != 2 {
		t.Fatalf("%+v, %d cells", f.Plan.Interleave, len(f.Cells))
	}
	for s, c := range f.Cells {
		if c.Pairing == nil || c.Pairing.Mode != results.PairSequential || len(c.Pairing.Runs) != 3 {
			t.Fatalf("side %d: %+v", s, c.Pairing)
		}
		for i, r := range c.Pairing.Runs {
			if r.Block != i+1 || r.Position != s {
				t.Errorf("side %d run %d: %+v", s, i, r)
			}
		}
	}
}

// What --interleave cannot pair is a usage error naming the flag.
func TestInterleaveUsage(t *testing.T) {
	pair := []string{"--versions", "baseline,resilient", "--switches", "none"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--versions", "baseline,resilient,runcontext", "--switches", "none", "--interleave"}, "--interleave"},
		{[]string{"--versions", "baseline,resilient", "--switches", "none,guard=on", "--interleave"}, "--interleave"},
		{[]string{"--versions", "resilient", "--switches", "none", "--interleave"}, "--interleave"},
		{append(pair, "--pace", "open", "--rate", "5", "--interleave"), "--interleave"},
		{append(pair, "--concurrency", "2", "--interleave"), "--interleave"},
		{append(pair, "--interleave=sometimes"), "--interleave"},
		{append(pair, "--precision", "2%"), "--precision"},
		{append(pair, "--interleave", "--precision", "0"), "--precision"},
		{append(pair, "--interleave", "--max-runs", "50"), "--max-runs"},
		{append(pair, "--interleave", "--precision", "2%", "--max-runs", "5", "--reps", "10"), "--max-runs"},
		{append(pair, "--world", "sim", "--interleave", "--precision", "2%"), "--precision"},
		{[]string{"--world", "sim", "--targets", "reference,http://127.0.0.1:9", "--versions", "resilient", "--switches", "none", "--interleave"}, "virtual time"},
		{append(pair, "--rounds", "3"), "--rounds"},
		{append(pair, "--interleave", "--rounds", "1"), "--rounds"},
		{append(pair, "--interleave", "--rounds", "3", "--precision", "2%"), "--rounds"},
		{append(pair, "--interleave", "--rounds", "11", "--reps", "10"), "--rounds"},
		{append(pair, "--world", "sim", "--interleave", "--rounds", "3"), "--rounds"},
		{[]string{"--targets", "reference,http://127.0.0.1:9", "--versions", "resilient", "--switches", "none", "--interleave", "--rounds", "2"}, "--rounds"},
	} {
		args := append([]string{"--world", "mem", "--branches", "8"}, tc.args...)
		_, err := planFrom(t, args...)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want a usage error naming %s", tc.args, err, tc.want)
		}
	}
}

// No run starts before both drivers asked for their first turn (both
// worlds and engines are up), and the second one's arrival lets the
// first one's run start.
func TestTurnstileWaitsForBothSides(t *testing.T) {
	ts := newTurnstile(OrderABBA, 1, 1, 2, precisionRule{})
	granted := make(chan error, 1)
	go func() { granted <- ts.side(0).Wait(context.Background(), true, 0) }()
	select {
	case err := <-granted:
		t.Fatalf("A's first run started before B arrived: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
	bctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = ts.side(1).Wait(bctx, true, 0) }() // not B's turn: it waits
	select {
	case err := <-granted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("A's first run did not start once B arrived")
	}
}
