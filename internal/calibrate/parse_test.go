package calibrate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
)

// TestParsePublished: the shipped table reads, with its defaults and
// aliases, and every figure in it is fitted.
func TestParsePublished(t *testing.T) {
	tab, err := ReadFile("../../examples/published.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if tab.Profile != "cloud" || tab.Reps != 20 || tab.Warmup != 2 || len(tab.Cells) != 8 {
		t.Fatalf("profile %q, reps %d, warmup %d, %d cells", tab.Profile, tab.Reps, tab.Warmup, len(tab.Cells))
	}
	c := tab.Cells[0]
	if c.Scenario != "fanout" || c.Options["branches"] != "64" || c.Version != "resilient" || c.Switches != "none" {
		t.Errorf("first cell: %+v", c)
	}
	if f := c.Figures[0]; f.Name() != "ttls p50" || time.Duration(f.Value) != 1054*time.Millisecond || f.Unfitted != "" {
		t.Errorf("first figure: %+v", f)
	}
	unfitted := 0
	for _, c := range tab.Cells {
		for _, f := range c.Figures {
			if f.Unfitted != "" {
				unfitted++
			}
		}
	}
	if unfitted != 0 {
		t.Errorf("%d unfitted figures, want 0", unfitted)
	}
	if trace := tab.Cells[2]; trace.Version != "baseline-serial" || len(trace.Figures) != 2 ||
		trace.Figures[1].Name() != "dispatch.publish p50" || time.Duration(trace.Figures[1].Value) != 2700*time.Millisecond {
		t.Errorf("trace cell: %+v", trace)
	}
	stall := tab.Cells[6]
	if stall.RetryStyle != world.Fresh || stall.VisibilityTimeout != 300*time.Second || stall.Reps != 300 ||
		stall.Figures[0].Name() != "stalls rate" || stall.Figures[0].Value != 0.06 {
		t.Errorf("stall cell: %+v", stall)
	}
	if got := stall.Label(); got != "fanout 64 br · resilient · fresh VT 300s" {
		t.Errorf("label %q", got)
	}
}

// TestParseUnfitted: a figure can be shown but kept out of the fit, with
// the reason the table gives.
func TestParseUnfitted(t *testing.T) {
	tab, err := Parse("t.yaml", []byte("profile: p\ncells:\n  - version: baseline\n    metrics:\n      ttls:\n        p50: 1s\n        p99: {value: 9s, unfitted: a trace of another path}\n"))
	if err != nil {
		t.Fatal(err)
	}
	fs := tab.Cells[0].Figures
	if len(fs) != 2 || fs[0].Unfitted != "" || fs[1].Unfitted != "a trace of another path" || time.Duration(fs[1].Value) != 9*time.Second {
		t.Errorf("figures: %+v", fs)
	}
}

// TestParseErrors: each mistake is one error naming the file, the line and
// the field, and matches sweep.ErrInvalid (exit 2).
func TestParseErrors(t *testing.T) {
	const head = "profile: p\ncells:\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"empty", "", "t.yaml: the file is empty"},
		{"syntax", "cells: [", "t.yaml: malformed YAML"},
		{"unknown top", "profil: p\n", "t.yaml:1: profil: unknown field (known: profile, description, reps, warmup, custom_versions, cells)"},
		{"no cells", "profile: p\n", "t.yaml:1: cells: want a list of observed cells"},
		{"bad name", "profile: a b\ncells: []\n", "t.yaml:1: profile: \"a b\" must be a name"},
		{"reps", "reps: 0\ncells: []\n", "t.yaml:1: reps: \"0\" is not a whole number >= 1"},
		{"unknown cell field", head + "  - version: baseline\n    brances: 64\n", "t.yaml:4: cells[0].brances: unknown field"},
		{"no version", head + "  - branches: 64\n    metrics: {ttls: {p50: 1s}}\n", "t.yaml:3: cells[0].version: missing"},
		{"unknown version", head + "  - version: turbo\n    metrics: {ttls: {p50: 1s}}\n", "t.yaml:3: cells[0].version: unknown version \"turbo\""},
		{"scenario", head + "  - scenario: fanin\n    version: baseline\n", "t.yaml:3: cells[0].scenario: "},
		{"option", head + "  - version: baseline\n    options: {steps: 3}\n    metrics: {ttls: {p50: 1s}}\n", "t.yaml:4: cells[0].options.steps: scenario fanout has no option \"steps\""},
		{"branches", head + "  - version: baseline\n    branches: many\n    metrics: {ttls: {p50: 1s}}\n", "t.yaml:4: cells[0].branches: option branches: \"many\" is not an integer"},
		{"switches", head + "  - version: baseline\n    switches: turbo=1\n", "t.yaml:4: cells[0].switches: unknown switch \"turbo\""},
		{"retry", head + "  - version: baseline\n    retry_style: again\n", "t.yaml:4: cells[0].retry_style: \"again\" is not redeliver or fresh"},
		{"vt", head + "  - version: baseline\n    visibility_timeout: 300\n", "t.yaml:4: cells[0].visibility_timeout: \"300\" is not a positive duration"},
		{"no metrics", head + "  - version: baseline\n", "t.yaml:3: cells[0].metrics: missing"},
		{"metric", head + "  - version: baseline\n    metrics: {ttl: {p50: 1s}}\n", "t.yaml:4: cells[0].metrics.ttl: unknown metric (scenario fanout has ttfs, first_end, ttls, skew"},
		{"op", head + "  - version: baseline\n    metrics: {op.run_gets: {p50: 1s}}\n", "t.yaml:4: cells[0].metrics.op.run_gets: unknown op \"run_gets\""},
		{"stat", head + "  - version: baseline\n    metrics:\n      ttls: {p51: 1s}\n", "t.yaml:5: cells[0].metrics.ttls.p51: unknown statistic (p50, p75, p90, p99, max, mean)"},
		{"duration", head + "  - version: baseline\n    metrics:\n      ttls: {p50: 1054}\n", "t.yaml:5: cells[0].metrics.ttls.p50: \"1054\" is not a positive duration (e.g. 1054ms, 9.5s)"},
		{"rate stat", head + "  - version: baseline\n    metrics:\n      stalls: {p50: 6%}\n", "t.yaml:5: cells[0].metrics.stalls.p50: stalls has one statistic: rate"},
		{"rate", head + "  - version: baseline\n    metrics:\n      stalls: {rate: 0.06}\n", "t.yaml:5: cells[0].metrics.stalls.rate: \"0.06\" is not a percentage in 0–100% (e.g. 6%)"},
		{"unfitted field", head + "  - version: baseline\n    metrics:\n      ttls:\n        p50: {value: 1s, why: x}\n", "t.yaml:6: cells[0].metrics.ttls.p50.why: unknown field (known: value, unfitted)"},
		{"no value", head + "  - version: baseline\n    metrics:\n      ttls:\n        p50: {unfitted: x}\n", "t.yaml:6: cells[0].metrics.ttls.p50.value: missing"},
		{"twice", head + "  - version: baseline\n    version: resilient\n", "t.yaml:4: cells[0].version: given twice (first on line 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %q,\nwant prefix %q", err, tc.want)
			}
			if !errors.Is(err, sweep.ErrInvalid) {
				t.Errorf("%v does not match sweep.ErrInvalid", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// TestCustomVersions: a table defines its own versions as a sweep file does
// (custom_versions:), a cell names one, and its features are what is
// measured: the same dispatch with the serial publish loop takes one publish
// per queued step where the concurrent one takes about one.
func TestCustomVersions(t *testing.T) {
	const table = `profile: p
reps: 4
warmup: 0
custom_versions:
  - name: resilient-serial
    base: resilient
    features: {publish_loop: serial}
cells:
  - version: resilient
    branches: 17
    metrics: {dispatch.publish: {p50: 1s}}
  - version: resilient-serial
    branches: 17
    metrics: {dispatch.publish: {p50: 1s}}
`
	tab, err := Parse("t.yaml", []byte(table))
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Custom) != 1 || tab.Custom[0].Features.PublishLoop != engine.Serial || tab.Cells[1].Version != "resilient-serial" {
		t.Fatalf("custom %+v, cells %+v", tab.Custom, tab.Cells)
	}
	prof, err := profile.Parse("p.yaml", []byte("name: p\nops:\n  default: {latency: 1ms}\n  publish: {latency: 10ms}\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Check(context.Background(), tab, prof, "p", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	concurrent, serial := time.Duration(res.Fitted[0][0]), time.Duration(res.Fitted[1][0])
	t.Logf("dispatch.publish p50 of 16 queued steps at 10 ms a publish: concurrent %v, serial %v", concurrent, serial)
	if concurrent > 20*time.Millisecond || serial < 150*time.Millisecond {
		t.Errorf("concurrent %v (want about 10 ms), serial %v (want about 160 ms)", concurrent, serial)
	}

	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown name", "profile: p\ncells:\n  - version: resilient-serial\n    metrics: {ttls: {p50: 1s}}\n",
			`t.yaml:3: cells[0].version: unknown version "resilient-serial" (known: baseline`},
		{"built-in name", "profile: p\ncustom_versions:\n  - {name: baseline, base: resilient}\ncells:\n  - version: baseline\n    metrics: {ttls: {p50: 1s}}\n",
			`t.yaml:3: custom_versions.name: "baseline" is a built-in version`},
		{"bad feature", "profile: p\ncustom_versions:\n  - {name: x, base: resilient, features: {publish_loop: sometimes}}\ncells:\n  - version: x\n    metrics: {ttls: {p50: 1s}}\n",
			`t.yaml:3: custom_versions`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.yaml))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.Is(err, sweep.ErrInvalid) {
				t.Errorf("error %v, want prefix %q and sweep.ErrInvalid", err, tc.want)
			}
		})
	}
}
