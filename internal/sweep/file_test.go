package sweep

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func planFrom(t *testing.T, args ...string) (*Plan, error) {
	t.Helper()
	return ParsePlan(args)
}

// TestFileMistakes: each kind of mistake in a sweep file is one error naming
// the file, the line and the field.
func TestFileMistakes(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string
	}{
		{"unknown key", "scenarios: [fanout]\nrep: 5\n", []string{"sweep.yaml:2:", "rep:", "unknown field", "reps"}},
		{"wrong type", "reps: five\n", []string{"sweep.yaml:1:", "reps:", "want an integer", `"five"`}},
		{"list for a value", "warmup: [1, 2]\n", []string{"sweep.yaml:1:", "warmup:", "want a single value"}},
		{"negative reps", "versions: [baseline]\nreps: -1\n", []string{"sweep.yaml:2:", "reps:", "-1 is less than 1"}},
		{"unknown version", "versions:\n  - baseline\n  - turbo9000\n", []string{"sweep.yaml:2:", "versions:", `unknown version "turbo9000"`}},
		{"zero branches", "branches: [20, 0]\n", []string{"sweep.yaml:1:", "branches:", "0 is less than 1"}},
		{"bad duration", "cell_timeout: 10\n", []string{"sweep.yaml:1:", "cell_timeout:", "want a duration"}},
		{"unknown nested key", "nats:\n  urll: nats://x\n", []string{"sweep.yaml:2:", "nats.urll:", "unknown field"}},
		{"unknown scenario", "scenarios: [fanout, nope]\n", []string{"sweep.yaml:1:", "scenarios:", `"nope"`}},
		{"unknown feature", "custom_versions:\n  - name: x\n    base: resilient\n    features:\n      turbo: true\n", []string{"sweep.yaml:5:", "custom_versions.features.turbo:", "unknown feature"}},
		{"bad feature value", "custom_versions:\n  - name: x\n    features:\n      dispatch: sideways\n      publish_loop: serial\n      recovery: none\n", []string{"sweep.yaml:2:", "custom_versions.features:", "dispatch"}},
		{"syntax", "reps: [1,\n", []string{"sweep.yaml", "line"}},
		{"unknown switch", "switches: [none, turbo=0]\n", []string{"sweep.yaml:1:", "switches:", `unknown switch "turbo"`}},
		{"bad pace", "pace: sometimes\n", []string{"sweep.yaml:1:", "pace:", "burst, closed or open"}},
		{"bad spans", "spans: sometimes\n", []string{"sweep.yaml:1:", "spans:", `"sometimes" is not on or off`}},
		{"option of no scenario", "options:\n  steps: 10\n", []string{"option steps", "no scenario"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "sweep.yaml")
			if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := planFrom(t, "-f", p)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestFileAndFlags(t *testing.T) {
	p := writeFile(t, "sweep.yaml", `
scenarios:
  - fanout
  - name: sequential
    options: {steps: [10, 20]}
branches: [20, 64]
versions: [baseline, serial-resilient]
custom_versions:
  - name: serial-resilient
    base: resilient
    description: resilient dispatch with the serial publish loop
    features:
      publish_loop: serial
switches: [none, resilient-step-dispatch=0]
worlds: [mem]
reps: 3
warmup: 0
pace: open
rate: 50
cell_timeout: 30s
seed: 7
nats:
  storage: memory
targets:
  ttfs: [200, 300, 600]
`)
	plan, err := planFrom(t, "-f", p, "--reps", "4", "--switches", "none")
	if err != nil {
		t.Fatal(err)
	}
	if plan.Reps != 4 || plan.Warmup != 0 || plan.Pace != "open" || plan.Rate != 50 || plan.CellTimeout != 30*time.Second ||
		plan.Seed != 7 || plan.WorldSettings["nats"]["storage"] != "memory" || len(plan.Switches) != 1 {
		t.Errorf("plan %+v", plan)
	}
	if len(plan.Versions) != 2 || plan.Versions[1].Name != "serial-resilient" ||
		plan.Versions[1].Features.PublishLoop != engine.Serial || plan.Versions[1].Features.Dispatch != engine.Parallel {
		t.Errorf("versions %+v", plan.Versions)
	}
	cells, err := plan.Cells()
	if err != nil {
		t.Fatal(err)
	}
	// fanout: 2 branch counts; sequential: 2 step counts; × 2 versions.
	if len(cells) != 8 {
		t.Fatalf("%d cells, want 8", len(cells))
	}
	if cells[0].Key == cells[1].Key || cells[0].Hash == "" || cells[0].Seed == cells[1].Seed {
		t.Errorf("cells not distinct: %+v %+v", cells[0], cells[1])
	}
	// Identity and seed depend on the cell, not its position.
	again, _ := plan.Cells()
	if again[5].Key != cells[5].Key || again[5].Seed != cells[5].Seed {
		t.Error("cell expansion is not deterministic")
	}
}

func TestFlagMistakes(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--branches", "0"}, "--branches 0: 0 is less than 1"},
		{[]string{"--reps", "-1"}, "--reps -1: -1 is less than 1"},
		{[]string{"--versions", "baseline,nope"}, `unknown version "nope"`},
		{[]string{"--scenario", "nope"}, `--scenario nope: unknown scenario "nope"`},
		{[]string{"--world", "redis"}, `unknown world "redis"`},
		{[]string{"--switches", "none,resilient-step-dispatch=2"}, "--switches"},
		{[]string{"--profile", "moon"}, "--profile moon"},
		{[]string{"--pace", "open"}, "pace open needs --rate"},
		{[]string{"--option", "steps=10"}, "option steps: no scenario"},
		{[]string{"--option", "branches=x"}, "branches"},
		{[]string{"--scenario", "sequential", "--branches", "20"}, "branches: no scenario"},
		{[]string{"--faults", "nonsense"}, "--faults"},
		{[]string{"--spans", "maybe"}, `--spans maybe: "maybe" is not on or off`},
	}
	for _, c := range cases {
		_, err := planFrom(t, c.args...)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q wrapping ErrInvalid", c.args, err, c.want)
		}
	}
}

// TestSpansSetting: --spans off (or spans: off in a file) records no spans
// and says so in the results file's plan; on is the default and records
// nothing there.
func TestSpansSetting(t *testing.T) {
	for _, c := range []struct {
		args   []string
		on     bool
		record string
	}{
		{nil, true, ""},
		{[]string{"--spans", "off"}, false, "off"},
		{[]string{"--spans", "on"}, true, ""},
		{[]string{"--spans=OFF"}, false, "off"},
		{[]string{"-f", writeFile(t, "spans.yaml", "spans: off\n")}, false, "off"},
		{[]string{"-f", writeFile(t, "spans-on.yaml", "spans: off\n"), "--spans", "on"}, true, ""},
	} {
		plan, err := planFrom(t, c.args...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if _, err := plan.Cells(); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		rp := plan.resultsPlan()
		if plan.Spans != c.on || rp.Spans != c.record {
			t.Errorf("%v: spans %v, recorded %q; want %v, %q", c.args, plan.Spans, rp.Spans, c.on, c.record)
		}
		if dc := (&sweepRun{plan: plan, prog: NoProgress{}}).driverConfig(CellPlan{}, nil, "x"); dc.NoSpans == c.on {
			t.Errorf("%v: driver NoSpans %v", c.args, dc.NoSpans)
		}
	}
	// A sweep resumed with the other setting is refused: its cells would
	// not stand next to each other.
	on, _ := planFrom(t)
	off, _ := planFrom(t, "--spans", "off")
	for _, p := range []*Plan{on, off} {
		if _, err := p.Cells(); err != nil {
			t.Fatal(err)
		}
	}
	if err := on.compatible(off.resultsPlan()); err == nil || !strings.Contains(err.Error(), "spans") {
		t.Errorf("resuming a --spans off sweep with spans on: %v", err)
	}
}

func TestDefaultPlan(t *testing.T) {
	plan, err := planFrom(t)
	if err != nil {
		t.Fatal(err)
	}
	cells, err := plan.Cells()
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * len(engine.DefaultVersions()) * 2; len(cells) != want { // every version but baseline-serial
		t.Errorf("default plan has %d cells, want %d", len(cells), want)
	}
}

// TestExamples: every sweep file in examples/ is valid.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		if filepath.Base(f) == "published.yaml" {
			continue // a table of observed figures for durabench calibrate (its tests read it)
		}
		plan, err := planFrom(t, "-f", f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if _, err := plan.Cells(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// A targets entry may be an adapter's product of flags: one target per
// combination, each told apart by its spec, "none" leaving its flag out.
func TestFileTargetProduct(t *testing.T) {
	p := writeFile(t, "sweep.yaml", `
targets:
  - reference
  - adapter: workflow
    sdk: [4.8.9]
    world: [local, postgres]
  - adapter: workflow
    sdk: 5.0.0-beta.55
    env: [none, WORKFLOW_RESILIENT_STEP_DISPATCH=1]
scenarios: [fanout]
branches: [8]
`)
	plan, err := planFrom(t, "-f", p)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range plan.Targets {
		got = append(got, s.ID())
	}
	want := []string{"reference", "workflow --sdk=4.8.9 --world=local", "workflow --sdk=4.8.9 --world=postgres",
		"workflow --sdk=5.0.0-beta.55", "workflow --sdk=5.0.0-beta.55 --env=WORKFLOW_RESILIENT_STEP_DISPATCH=1"}
	if !slices.Equal(got, want) {
		t.Fatalf("targets %q, want %q", got, want)
	}
	for _, s := range plan.Targets[1:] {
		if s.Name != "workflow" {
			t.Errorf("target %q runs adapter %q", s.ID(), s.Name)
		}
	}
	cells, err := plan.Cells()
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, c := range cells {
		keys[c.Key] = true
	}
	if len(keys) != len(cells) {
		t.Errorf("%d cells, %d distinct keys", len(cells), len(keys))
	}
	bad := writeFile(t, "bad.yaml", "targets:\n  - sdk: [4.8.9]\n")
	if _, err := planFrom(t, "-f", bad); err == nil || !strings.Contains(err.Error(), "adapter: NAME") {
		t.Errorf("a product without its adapter: %v", err)
	}
}
