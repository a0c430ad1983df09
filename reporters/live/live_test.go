package live_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/reporters/live"
	"github.com/durabench/durabench/results"
)

func plan(t *testing.T, args ...string) *sweep.Plan {
	t.Helper()
	p, err := sweep.ParsePlan(args)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// scrape reads the server's /metrics as a person's Prometheus would.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// series finds the series of fam for the cell with these labels.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	fam := fams[name]
	if fam == nil {
		return nil
	}
next:
	for _, m := range fam.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func counter(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m := series(fams, name, labels)
	if m == nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

func cellLabels(c results.Cell) map[string]string {
	sw := strings.Join(c.Switches, "+")
	if sw == "" {
		sw = "none"
	}
	return map[string]string{"scenario": c.Scenario, "branches": strconv.Itoa(c.Branches), "version": c.Version,
		"switches": sw, "world": c.World, "target": live.DefaultTarget}
}

func total(fams map[string]*dto.MetricFamily, name string) float64 {
	var n float64
	if fam := fams[name]; fam != nil {
		for _, m := range fam.Metric {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

// TestScrapeDuringSweep scrapes /metrics while a real mem-world sweep runs
// (open pacing stretches it to about a second) and, at the end, checks
// every cell's series against the results file the sweep wrote.
func TestScrapeDuringSweep(t *testing.T) {
	p := plan(t, "--world", "mem", "--branches", "20,64", "--versions", "baseline,pending-count", "--switches", "none",
		"--reps", "24", "--warmup", "2", "--pace", "open", "--rate", "80", "--seed", "3")
	m := live.New()
	srv, err := m.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	var (
		mu      sync.Mutex
		midway  int // scrapes that saw some runs started and not all
		scrapes int
	)
	stop := make(chan struct{})
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(25 * time.Millisecond):
			}
			fams := scrape(t, srv.Addr())
			n := total(fams, "durabench_runs_started_total")
			mu.Lock()
			scrapes++
			if n > 0 && n < 4*24 {
				midway++
			}
			mu.Unlock()
		}
	}()
	out := filepath.Join(t.TempDir(), "out")
	start := time.Now()
	res, err := sweep.Run(context.Background(), sweep.Config{Plan: p, Out: out, Progress: m.Progress(nil)})
	close(stop)
	<-scraped
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sweep %v, %d scrapes, %d mid-sweep", time.Since(start).Round(time.Millisecond), scrapes, midway)
	if midway == 0 {
		t.Errorf("no scrape during the sweep saw runs in progress (%d scrapes)", scrapes)
	}

	f, err := results.Read(res.ResultsPath)
	if err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, srv.Addr())
	checkAgainstResults(t, fams, f)
	if got := fams["durabench_cells_done_total"].Metric[0].GetCounter().GetValue(); got != float64(len(f.Cells)) {
		t.Errorf("cells done %v, results have %d", got, len(f.Cells))
	}
	// The histograms are latency histograms, not Prometheus' defaults.
	h := series(fams, "durabench_ttls_seconds", cellLabels(f.Cells[0])).GetHistogram()
	if b := h.GetBucket(); len(b) == 0 || b[0].GetUpperBound() != 1e-4 {
		t.Errorf("ttls buckets start at %v, want 100µs", b)
	}
}

// checkAgainstResults: each cell's counters and histogram counts equal
// what results.json says of that cell.
func checkAgainstResults(t *testing.T, fams map[string]*dto.MetricFamily, f *results.File) {
	t.Helper()
	for _, c := range f.Cells {
		l := cellLabels(c)
		name := fmt.Sprintf("%s/%d/%s", c.Scenario, c.Branches, c.Version)
		notStarted, unfinished := 0, 0
		for _, s := range c.StalledRuns {
			if s.NotStarted {
				notStarted++
			} else if !s.Finished {
				unfinished++
			}
		}
		for _, chk := range []struct {
			metric string
			want   int
		}{
			{"durabench_runs_started_total", c.Runs - notStarted},
			{"durabench_runs_completed_total", c.Runs - notStarted - c.Errors - unfinished},
			{"durabench_runs_failed_total", c.Errors},
			{"durabench_runs_stalled_total", c.Stalls},
		} {
			if got := counter(fams, chk.metric, l); got != float64(chk.want) {
				t.Errorf("%s: %s = %v, results.json says %d", name, chk.metric, got, chk.want)
			}
		}
		for _, hm := range []struct{ metric, name string }{{"durabench_ttls_seconds", metrics.TTLS}, {"durabench_ttfs_seconds", metrics.TTFS}} {
			want := c.Metrics[hm.name]
			s := series(fams, hm.metric, l)
			if s == nil {
				t.Errorf("%s: no %s series", name, hm.metric)
				continue
			}
			h := s.GetHistogram()
			if int(h.GetSampleCount()) != want.Count {
				t.Errorf("%s: %s count %d, results.json %d", name, hm.metric, h.GetSampleCount(), want.Count)
			}
			var sum float64
			for _, v := range want.Values {
				sum += float64(v) / 1e6
			}
			if math.Abs(h.GetSampleSum()-sum) > 1e-6*float64(want.Count+1) {
				t.Errorf("%s: %s sum %v s, results.json values add up to %v s", name, hm.metric, h.GetSampleSum(), sum)
			}
		}
		if got := counter(fams, "durabench_steps_total", l); got < float64(c.Branches*(c.Runs-c.Errors-notStarted-unfinished)) {
			t.Errorf("%s: %v step bodies for %d finished runs of %d branches", name, got, c.Runs, c.Branches)
		}
		if g := series(fams, "durabench_runs_in_flight", l); g == nil || g.GetGauge().GetValue() != 0 {
			t.Errorf("%s: runs in flight after the cell: %v", name, g)
		}
	}
}

// TestStallsCounted: on the sim world a fault that needs a 300 s
// redelivery stalls some runs (virtual time); the stalled and started
// counters match the results, including runs cut at the cell timeout.
func TestStallsCounted(t *testing.T) {
	p := plan(t, "--world", "sim", "--profile", "cloud", "--branches", "64", "--versions", "resilient", "--switches", "none",
		"--retry-style", "fresh", "--visibility-timeout", "300s", "--reps", "40", "--warmup", "0", "--cell-timeout", "200s", "--seed", "1")
	m := live.New()
	res, err := sweep.Run(context.Background(), sweep.Config{Plan: p, Out: filepath.Join(t.TempDir(), "out"), Progress: m.Progress(nil)})
	if err != nil {
		t.Fatal(err)
	}
	c := res.File.Cells[0]
	if c.Stalls == 0 {
		t.Fatalf("no stall in %d runs: the test needs one", c.Runs)
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	checkAgainstResults(t, byName, res.File)
	t.Logf("%d runs, %d stalls", c.Runs, c.Stalls)
}

// TestPortInUse: a second server on a bound port fails at once.
func TestPortInUse(t *testing.T) {
	srv, err := live.New().Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if s2, err := live.New().Serve(srv.Addr()); err == nil {
		s2.Close()
		t.Fatalf("a second server bound %s", srv.Addr())
	}
}
