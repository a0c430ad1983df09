package reporters

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"

	"github.com/durabench/durabench/results"
)

func benchfmtFile() *results.File {
	return &results.File{
		Schema: results.Schema, Methodology: results.Methodology,
		DurabenchVersion: "v0.1.0", GitCommit: "0123456789abcdef",
		Host:        results.Host{CPUs: 8, OS: "linux", Arch: "amd64", Go: "go1.26.0"},
		VirtualTime: true,
		Cells: []results.Cell{
			{
				Scenario: "fanout", Branches: 256, Version: "resilient", World: "nats", Profile: "none", Runs: 3,
				Metrics: map[string]results.Metric{
					"ttfs": results.NewMetric([]int64{1200, 1500}, 0), // the third run never started a step
					"ttls": results.NewMetric([]int64{2345, 2400, 300000000}, 0),
					// Per-branch and per-step samples are not per run: left out.
					"skew_offset": results.NewMetric([]int64{0, 5, 9, 12, 40}, 0),
					"stso":        results.NewMetric([]int64{700, 800}, 0),
				},
			},
			{
				Scenario: "hook-stream", Options: map[string]string{"chunks": "10"}, Version: "baseline",
				Switches: []string{"resilient-step-dispatch=0", "guard=on"}, World: "sim", Profile: "cloud", Runs: 2,
				Metrics: map[string]results.Metric{
					"ttc":       results.NewMetric([]int64{50000, 51000}, 0),
					"sl":        results.NewMetric([]int64{10, 11, 12, 13}, 0),
					"read_rate": results.NewMetric([]int64{300, 310}, 0),
				},
			},
		},
	}
}

func TestBenchfmt(t *testing.T) {
	f := benchfmtFile()
	var out bytes.Buffer
	if err := Benchfmt(&out, f); err != nil {
		t.Fatal(err)
	}
	t.Logf("output:\n%s", out.String())

	type line struct {
		name   string
		values map[string]float64 // unit as written -> value as written
	}
	var got []line
	r := benchfmt.NewReader(bytes.NewReader(out.Bytes()), "durabench.txt")
	for r.Scan() {
		switch rec := r.Result().(type) {
		case *benchfmt.SyntaxError:
			t.Fatalf("syntax error: %v", rec)
		case *benchfmt.Result:
			if rec.Iters != 1 {
				t.Errorf("%s: iters %d, want 1", rec.Name, rec.Iters)
			}
			for k, want := range map[string]string{"goos": "linux", "goarch": "amd64", "cpu": "8 CPUs", "pkg": "durabench",
				"durabench-version": "v0.1.0", "commit": "0123456789abcdef", "clock": "virtual"} {
				if v := rec.GetConfig(k); v != want {
					t.Errorf("config %s = %q, want %q", k, v, want)
				}
			}
			l := line{name: rec.Name.String(), values: map[string]float64{}}
			for _, v := range rec.Values {
				unit, val := v.Unit, v.Value
				if v.OrigUnit != "" {
					unit, val = v.OrigUnit, v.OrigValue
				}
				l.values[unit] = val
				// benchstat tidies ns to seconds: a time unit it scales.
				if want := strings.TrimSuffix(unit, "-ns") + "-sec"; v.Unit != want {
					t.Errorf("%s: tidied unit %q, want %q", unit, v.Unit, want)
				}
			}
			got = append(got, l)
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	fan := "Fanout/branches=256/version=resilient/switches=none/world=nats/profile=none"
	hook := "HookStream/chunks=10/version=baseline/switches=guard=on+resilient-step-dispatch=0/world=sim/profile=cloud"
	want := []line{
		{fan, map[string]float64{"ttfs-ns": 1200e3, "ttls-ns": 2345e3}},
		{fan, map[string]float64{"ttfs-ns": 1500e3, "ttls-ns": 2400e3}},
		{fan, map[string]float64{"ttls-ns": 300000000e3}},
		{hook, map[string]float64{"ttc-ns": 50000e3, "read_rate-ns": 300e3}},
		{hook, map[string]float64{"ttc-ns": 51000e3, "read_rate-ns": 310e3}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parsed\n%v\nwant\n%v", got, want)
	}
	units := r.Units()
	for _, u := range []string{"ttfs-ns", "ttls-ns", "ttc-ns"} {
		if units.GetBetter(u) != -1 {
			t.Errorf("unit %s: better = %d, want lower (-1)", u, units.GetBetter(u))
		}
	}
	// An informational metric (a slower engine can lower it) names no
	// direction.
	if units.GetBetter("read_rate-ns") != 0 {
		t.Errorf("unit read_rate-ns: better = %d, want none (0)", units.GetBetter("read_rate-ns"))
	}

	// The name's sub-benchmark parts are the cell key, so benchstat can
	// pivot on them (-col /version).
	base, parts := benchfmt.Name(fan).Parts()
	if string(base) != "Fanout" || len(parts) != 5 || string(parts[1]) != "/version=resilient" {
		t.Errorf("Parts(%s) = %s %q", fan, base, parts)
	}
}

func TestBenchfmtEmpty(t *testing.T) {
	var out bytes.Buffer
	if err := Benchfmt(&out, &results.File{Schema: results.Schema}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "pkg: durabench\n" {
		t.Errorf("empty file: %q", got)
	}
}
