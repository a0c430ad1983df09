//go:build floor

// The detection floor of an interleaved sweep: A/A pairs run in one sweep
// (sweep --interleave: the same version twice, as two switch sets that
// change nothing: none, and lazy-hook-resume=1, which resilient has
// already), compared side against side
// (compare FILE). It prints the share of the paired tests that were
// significant with its 95% interval, the sweeps as clusters (an A/A pair:
// about α of them should be; it fails when the interval lies above 5%),
// and, per scenario and metric, how many were significant, the minimum
// detectable effect at the default run count, the pairs
// a minute of the pair's measured runs holds, the MDE one minute of them
// gives, and the minutes a 5% MDE takes:
//
//	go test -tags floor -run TestInterleavedFloor -v -timeout 1h ./cmd/durabench/ [-floor.pairs 20] [-floor.world nats]
//	  [-floor.order random|abba] [-floor.flags '--nats-storage memory'] [-floor.out FILE]
//	  [-floor.targets 'A|B'] [-floor.cells 'sweep flags']
//
// With -floor.targets (the adapters on PATH: PATH=$PWD/bin:$PATH after make
// engines) the pair is two targets instead (an A/A: one build
// named two ways, e.g. 'workflow --sdk=4.8.9|workflow --sdk=DIR' where DIR
// is that version's installed directory), and -floor.cells replaces the
// cells (e.g. '--scenario fanout,sequential --branches 20 --option
// steps=20 --reps 20 --warmup 2 --quiet').

package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/results"
)

var (
	floorWorld   = flag.String("floor.world", "nats", "world of the interleaved A/A sweeps")
	floorOrder   = flag.String("floor.order", "random", "order of the interleaved blocks: random or abba")
	floorFlags   = flag.String("floor.flags", "", "more sweep flags, e.g. --nats-storage memory")
	floorTargets = flag.String("floor.targets", "", "the pair as two targets, A|B (default: resilient under two switch sets that change nothing)")
	floorCellArg = flag.String("floor.cells", "", "the cells' sweep flags (default: fan-out 8 and sequential 10, 10 runs + 2 warm-ups)")
)

// interleavedPair is the sweep flags of the A/A pair and its cells.
func interleavedPair(t *testing.T) (pair, cells []string, what string) {
	cells = floorCells
	if *floorCellArg != "" {
		cells = strings.Fields(*floorCellArg)
	}
	what = "fan-out 8 branches and sequential 10 steps, 10 runs + 2 warm-ups a side"
	if *floorCellArg != "" {
		what = "`" + *floorCellArg + "`"
	}
	if *floorTargets == "" {
		return []string{"--world", *floorWorld, "--versions", "resilient", "--switches", "none,lazy-hook-resume=1"}, cells, what
	}
	ab := strings.Split(*floorTargets, "|")
	if len(ab) != 2 {
		t.Fatalf("-floor.targets %q: want two targets, A|B", *floorTargets)
	}
	return []string{"--targets", ab[0] + "," + ab[1]}, cells, what
}

// interleavedRow is one metric of one scenario over every A/A sweep.
type interleavedRow struct {
	tests, sig int
	slower     int       // significant with B slower than A
	mde        []float64 // % at the sweep's pairs
	perPair    []float64 // seconds of the cell pair's measured runs per pair
	setup      []float64 // seconds of the sweep outside measured runs, per cell pair
	n          int
}

func TestInterleavedFloor(t *testing.T) {
	dir := t.TempDir()
	start, loadStart := time.Now(), loadavg()
	pair, cells, what := interleavedPair(t)
	where := *floorWorld
	if *floorTargets != "" {
		where = "the targets' own worlds"
	}
	side := "`--versions resilient --switches none,lazy-hook-resume=1"
	if *floorTargets != "" {
		side = "`--targets '" + strings.ReplaceAll(*floorTargets, "|", "','") + "'"
	}
	rows := map[string]*interleavedRow{}
	var keys []string
	total, sig := 0, 0
	var perSweep [][2]int // each sweep's significant tests and tests
	var sweepTime time.Duration
	for i := range *floorPairs {
		out := filepath.Join(dir, fmt.Sprintf("aa%d", i))
		args := append(append([]string{"sweep"}, pair...), "--interleave="+*floorOrder)
		args = append(args, cells...)
		args = append(args, strings.Fields(*floorFlags)...)
		args = append(args, "--seed", fmt.Sprint(i+1), "--out", out)
		t0 := time.Now()
		if r := durabench(t, dir, args...); r.code != 0 {
			t.Fatalf("sweep %d: exit %d\n%s", i, r.code, r.stderr)
		}
		sweepTime += time.Since(t0)
		f, err := results.Read(filepath.Join(out, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		base, head, bl, hl, missing, err := stats.SplitSides(f)
		if err != nil || len(missing) > 0 {
			t.Fatalf("sweep %d: %v %v", i, err, missing)
		}
		c, err := stats.Compare(base, head, stats.CompareOptions{BaseLabel: bl, HeadLabel: hl})
		if err != nil {
			t.Fatal(err)
		}
		// A pair's measured runs take its cells' measured phase (both
		// sides' runs, taking turns); the rest of the sweep (starting the
		// process and the worlds, warm-ups) is its set-up, shared by the
		// cell pairs.
		sig0, total0 := sig, total
		elapsed := map[stats.CellKey]float64{}
		measured := 0.0
		for j := range head.Cells {
			elapsed[stats.KeyOf(&head.Cells[j])] = head.Cells[j].ElapsedMS / 1000
			measured += head.Cells[j].ElapsedMS / 1000
		}
		setup := (time.Since(t0).Seconds() - measured) / float64(len(head.Cells))
		for _, m := range c.Metrics {
			for _, r := range m.Rows {
				if r.Paired == nil || r.Paired.N < 2 {
					continue
				}
				k := m.Metric + " · " + r.Cell.Scenario
				row := rows[k]
				if row == nil {
					row = &interleavedRow{n: r.Paired.N}
					rows[k] = row
					keys = append(keys, k)
				}
				row.tests++
				total++
				if r.Test.Significant {
					row.sig++
					sig++
					if r.Paired.Ratio > 1 {
						row.slower++
					}
				}
				row.mde = append(row.mde, r.MDEPct)
				row.perPair = append(row.perPair, elapsed[r.Cell]/float64(r.Paired.N))
				row.setup = append(row.setup, setup)
			}
		}
		perSweep = append(perSweep, [2]int{sig - sig0, total - total0})
		t.Logf("sweep %d: %s (load %s), %d of %d significant", i, time.Since(t0).Round(time.Second), loadavg(), sig-sig0, total-total0)
	}
	median := func(xs []float64) float64 {
		s := slices.Sorted(slices.Values(xs))
		if len(s)%2 == 1 {
			return s[len(s)/2]
		}
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	rate, lo, hi := clusteredRate(perSweep)
	slower := 0
	for _, r := range rows {
		slower += r.slower
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "Interleaved A/A on %s: %d sweeps (%s --interleave=%s %s`, %s), measured %s in %s (%s of sweeps), load average %s at the start, %s at the end. "+
		"Paired tests significant: %d of %d (%.1f%%, 95%% CI %.1f–%.1f%% with each sweep a cluster), %d of them with B slower.\n\n",
		where, *floorPairs, side, *floorOrder, *floorFlags, what, start.UTC().Format("2006-01-02 15:04 UTC"), time.Since(start).Round(time.Second), sweepTime.Round(time.Second),
		loadStart, loadavg(), sig, total, 100*rate, 100*lo, 100*hi, slower)
	n := 0
	if len(keys) > 0 {
		n = rows[keys[0]].n
	}
	fmt.Fprintf(&sb, "| metric · scenario | significant (B slower) | MDE at %d pairs | sweep at %d pairs | pairs in a 1-minute sweep | MDE after 1 minute | sweep for MDE 5%% |\n|---|--:|--:|--:|--:|--:|--:|\n", n, n)
	for _, k := range keys {
		r := rows[k]
		mde, perPair, setup := median(r.mde), median(r.perPair), median(r.setup)
		// The MDE shrinks with √n on the log scale. A sweep of this cell
		// pair alone takes its set-up plus perPair a pair: a minute holds
		// (60 s − set-up)/perPair pairs.
		logMDE := math.Log1p(mde / 100)
		inMinute := (60 - setup) / perPair
		oneMin := 100 * math.Expm1(logMDE*math.Sqrt(float64(r.n)/inMinute))
		n5 := float64(r.n) * math.Pow(logMDE/math.Log(1.05), 2)
		fmt.Fprintf(&sb, "| %s | %d/%d (%d) | %.0f%% | %.1f s | %.0f | %.1f%% | %s |\n", k, r.sig, r.tests, r.slower, mde,
			setup+perPair*float64(r.n), inMinute, oneMin, (time.Duration((setup + n5*perPair) * float64(time.Second))).Round(time.Second))
	}
	t.Logf("\n%s", sb.String())
	if *floorOut != "" {
		if err := os.WriteFile(*floorOut, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The test's level is 5% (4.88% exactly at 10 pairs): an A/A that
	// holds it reads about 5%, above as often as below, and 200 sweeps
	// measure the rate to ±1.3 points. What fails is a rate shown to be
	// over 5%: its interval's low end above it.
	switch {
	case lo > 0.05:
		t.Errorf("A/A: %.1f%% of the paired tests significant (95%% CI %.1f–%.1f%%): over 5%%", 100*rate, 100*lo, 100*hi)
	case rate > 0.05:
		t.Logf("A/A: %.1f%% of the paired tests significant, over 5%% but within its sampling error (95%% CI %.1f–%.1f%%)", 100*rate, 100*lo, 100*hi)
	}
}

// clusteredRate is the share of significant tests over the sweeps (each
// sweep's significant tests and tests in counts) with its 95% interval,
// the sweeps taken as clusters: a sweep's tests share its runs (TTLS, TTC
// and first_end of a fan-out move together), so they are not independent
// trials and a binomial interval would be too narrow. The ratio
// estimator's variance is Σ(s_i − r·t_i)² / (k(k−1) t̄²) over the k sweeps.
func clusteredRate(counts [][2]int) (rate, lo, hi float64) {
	var s, t float64
	for _, c := range counts {
		s += float64(c[0])
		t += float64(c[1])
	}
	k := float64(len(counts))
	if t == 0 || k < 2 {
		return 0, 0, 0
	}
	rate = s / t
	var ss float64
	for _, c := range counts {
		e := float64(c[0]) - rate*float64(c[1])
		ss += e * e
	}
	mean := t / k
	se := math.Sqrt(ss/(k*(k-1))) / mean
	return rate, max(rate-1.96*se, 0), rate + 1.96*se
}
