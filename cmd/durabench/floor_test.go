//go:build floor

// The detection floor of compare: how large a Δ A/A pairs (two sweeps of
// one configuration, nothing changed) reach, per world and metric, and how
// often the per-run test calls it significant with and without a null
// sweep. It runs real sweeps (the durabench binary TestMain builds), 20
// ABA triples per world, and prints the table docs/compare-gate-ci.md keeps:
//
//	go test -tags floor -run TestDetectionFloor -v -timeout 2h ./cmd/durabench/ [-floor.pairs 20] [-floor.out FILE]
//
// Worlds: mem, nats (embedded), postgres (throwaway server), and the
// reference engine served over the target protocol (target serve reference
// --world mem). Cells: a fan-out of 8 branches and a sequence of 10 steps,
// 10 runs and 2 warm-ups each (the GitHub Action's default reps).

package main

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/internal/stats"
	"github.com/durabench/durabench/results"
)

var (
	floorPairs = flag.Int("floor.pairs", 20, "A/A pairs per world")
	floorOut   = flag.String("floor.out", "", "also write the markdown table to this file")
)

var floorCells = []string{"--scenario", "fanout,sequential", "--branches", "8", "--option", "steps=10",
	"--reps", "10", "--warmup", "2", "--quiet"}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// floorRow is one metric of one scenario on one world over every pair.
type floorRow struct {
	deltas []float64 // |Δ| % per pair
	sig    int       // pairs the test called significant (p < α)
	beyond int       // of those, pairs whose Δ also cleared the null Δ
	n      int       // runs a side, first pair
	stat   string
}

func TestDetectionFloor(t *testing.T) {
	dir := t.TempDir()
	serve := exec.Command(bin, "target", "serve", "reference", "--world", "mem")
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { serve.Process.Kill(); serve.Wait() }()
	url, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("target serve: %v", err)
	}
	url = strings.TrimSpace(url)

	worlds := []struct {
		name  string
		flags []string
	}{
		{"mem", []string{"--world", "mem", "--versions", "resilient", "--switches", "none"}},
		{"nats", []string{"--world", "nats", "--versions", "resilient", "--switches", "none"}},
		{"postgres", []string{"--world", "postgres", "--versions", "resilient", "--switches", "none"}},
		{"target", []string{"--targets", url}},
	}
	start := time.Now()
	loadStart := loadavg()
	rows := map[string]map[string]*floorRow{} // world → metric·scenario → row
	var keys []string
	for _, w := range worlds {
		rows[w.name] = map[string]*floorRow{}
		wStart := time.Now()
		sweep := func(name string, seed int) *results.File {
			out := filepath.Join(dir, w.name+"-"+name)
			args := append([]string{"sweep"}, w.flags...)
			args = append(args, floorCells...)
			args = append(args, "--seed", fmt.Sprint(seed), "--out", out)
			if r := durabench(t, dir, args...); r.code != 0 {
				t.Fatalf("%s sweep %s: exit %d\n%s", w.name, name, r.code, r.stderr)
			}
			f, err := results.Read(filepath.Join(out, "results.json"))
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		for i := range *floorPairs {
			// ABA, as the GitHub Action's null-sweep input runs them: the
			// second A is the null sweep.
			a := sweep(fmt.Sprintf("a%d", i), 3*i+1)
			b := sweep(fmt.Sprintf("b%d", i), 3*i+2)
			a2 := sweep(fmt.Sprintf("n%d", i), 3*i+3)
			c, err := stats.Compare(a, b, stats.CompareOptions{Null: a2})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range c.Metrics {
				for _, r := range m.Rows {
					if !r.InBase || !r.InHead || math.IsNaN(r.DeltaPct) {
						continue
					}
					k := m.Metric + " · " + r.Cell.Scenario
					fr := rows[w.name][k]
					if fr == nil {
						fr = &floorRow{n: r.Test.N1, stat: r.Statistic}
						rows[w.name][k] = fr
						if !slices.Contains(keys, k) {
							keys = append(keys, k)
						}
					}
					fr.deltas = append(fr.deltas, math.Abs(r.DeltaPct))
					if r.Test.Significant {
						fr.sig++
					}
					if r.Verdict == stats.VerdictWorse || r.Verdict == stats.VerdictBetter || r.Verdict == stats.VerdictChanged {
						fr.beyond++
					}
				}
			}
		}
		t.Logf("%s: %d pairs in %s (load %s)", w.name, *floorPairs, time.Since(wStart).Round(time.Second), loadavg())
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "Detection floor: the smallest |Δ| of the medians that A/A pairs exceed in fewer than 5%% of %d pairs, "+
		"and in brackets how many pairs the test (α = 0.05, per run) called significant / how many of those also cleared the null Δ "+
		"(each pair swept ABA, the second A the null sweep, as the GitHub Action's null-sweep input does). "+
		"Cells: fan-out 8 branches and sequential 10 steps, 10 runs + 2 warm-ups a side, `resilient`. "+
		"Measured %s in %s, load average %s at the start, %s at the end (2 cores, shared).\n\n",
		*floorPairs, start.UTC().Format("2006-01-02 15:04 UTC"), time.Since(start).Round(time.Second), loadStart, loadavg())
	sb.WriteString("| metric · scenario | tested on |")
	for _, w := range worlds {
		sb.WriteString(" " + w.name + " |")
	}
	sb.WriteString("\n|---|---|")
	for range worlds {
		sb.WriteString("--:|")
	}
	sb.WriteString("\n")
	for _, k := range keys {
		stat := ""
		for _, w := range worlds {
			if fr := rows[w.name][k]; fr != nil {
				stat = fr.stat
			}
		}
		fmt.Fprintf(&sb, "| %s | %s |", k, stat)
		for _, w := range worlds {
			fr := rows[w.name][k]
			if fr == nil {
				sb.WriteString(" — |")
				continue
			}
			fmt.Fprintf(&sb, " %.0f%% (%d/%d) |", floorOf(fr.deltas), fr.sig, fr.beyond)
		}
		sb.WriteString("\n")
	}
	t.Logf("\n%s", sb.String())
	if *floorOut != "" {
		if err := os.WriteFile(*floorOut, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// floorOf is the smallest value that fewer than 5% of deltas exceed.
func floorOf(deltas []float64) float64 {
	s := slices.Sorted(slices.Values(deltas))
	allowed := int(math.Ceil(0.05*float64(len(s)))) - 1 // exceedances < 5%
	return s[len(s)-1-max(allowed, 0)]
}
