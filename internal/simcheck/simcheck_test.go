package simcheck

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/sim"
)

// raceConfig explores the fan-outs whose last completers race, on every
// built-in version.
func raceConfig(t *testing.T) Config {
	var scs []Scenario
	for _, name := range []string{"fanout-2", "fanout-8"} {
		sc, err := LookupScenario(name)
		if err != nil {
			t.Fatal(err)
		}
		scs = append(scs, sc)
	}
	return Config{Seeds: 12, Scenarios: scs, TraceDir: t.TempDir()}
}

func model(t *testing.T, r Report, log sim.LogModel) ModelReport {
	t.Helper()
	for _, m := range r.Models {
		if m.Log == log {
			return m
		}
	}
	t.Fatalf("no %s model in the report", log)
	return ModelReport{}
}

// TestMintOrderedRace: the mint-ordered log lets two last completers of a
// stage each read a log that misses the other's completion, so nobody
// continues the run; the append-only log never does, for the same seeds.
func TestMintOrderedRace(t *testing.T) {
	cfg := raceConfig(t)
	rep, err := Explore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ao, mo := model(t, rep, sim.AppendOnly), model(t, rep, sim.MintOrdered)
	want := 12 * 2 * len(engine.DefaultVersions())
	if ao.Total != want || mo.Total != want {
		t.Fatalf("totals %d and %d, want %d each", ao.Total, mo.Total, want)
	}
	if len(ao.Failures) != 0 {
		t.Fatalf("append-only log failed %d cases, first: %s %v", len(ao.Failures), ao.Failures[0].Case, ao.Failures[0].Violations)
	}
	if len(mo.Failures) == 0 {
		t.Fatalf("mint-ordered log: no failure in %d cases; the lost-continuation race was not found", mo.Total)
	}
	for _, f := range mo.Failures {
		if f.Violations[0].Invariant != InvRunCompletes || f.Finished {
			t.Errorf("%s: violations %v, want a lost continuation (%s)", f.Case, f.Violations, InvRunCompletes)
		}
		b, err := os.ReadFile(f.TracePath)
		if err != nil {
			t.Fatalf("%s: trace: %v", f.Case, err)
		}
		if !bytes.Contains(b, []byte("VIOLATION "+InvRunCompletes)) || !bytes.Contains(b, []byte("minted=")) {
			t.Fatalf("%s: trace %s lacks the violation or the minted positions", f.Case, f.TracePath)
		}
	}
	t.Logf("%s", strings.Join(rep.Summary(), "\n"))
}

// TestGuardFixesRace: under the enforced guard the completers read the whole
// log and every Load-based version passes on the mint-ordered log; the
// pending-count version still trusts a Pending counted over the prefix up to
// its own position, and passes only when the world counts Pending at commit.
func TestGuardFixesRace(t *testing.T) {
	cfg := raceConfig(t)
	cfg.Options.Guard = true
	cfg.Logs = []sim.LogModel{sim.MintOrdered}
	rep, err := Explore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range model(t, rep, sim.MintOrdered).Failures {
		if f.Version != "pending-count" {
			t.Errorf("guarded %s: %v", f.Case, f.Violations)
		}
	}
	cfg.PendingAtCommit = true
	rep, err = Explore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m := model(t, rep, sim.MintOrdered); len(m.Failures) != 0 {
		t.Fatalf("guard + pending at commit: %d fail of %d, first %s %v", len(m.Failures), m.Total, m.Failures[0].Case, m.Failures[0].Violations)
	}
}

// TestReplayExact: a failing case replays to a byte-identical trace and the
// same violations.
func TestReplayExact(t *testing.T) {
	cfg := raceConfig(t)
	cfg.Logs = []sim.LogModel{sim.MintOrdered}
	rep, err := Explore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	fails := model(t, rep, sim.MintOrdered).Failures
	if len(fails) == 0 {
		t.Fatal("no failure to replay")
	}
	first := fails[0]
	cfg.TraceDir = ""
	a, err := Replay(context.Background(), cfg, first.Case)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Replay(context.Background(), cfg, first.Case)
	if err != nil {
		t.Fatal(err)
	}
	var ta, tb bytes.Buffer
	a.Trace.WriteTo(&ta)
	b.Trace.WriteTo(&tb)
	if !bytes.Equal(ta.Bytes(), tb.Bytes()) {
		t.Fatalf("two replays of %s differ", first.Case)
	}
	saved, err := os.ReadFile(first.TracePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(saved, ta.Bytes()) {
		t.Fatalf("replay of %s differs from the trace Explore wrote", first.Case)
	}
	if len(a.Violations) != len(first.Violations) || a.Violations[0] != first.Violations[0] {
		t.Fatalf("replay violations %v, explore %v", a.Violations, first.Violations)
	}
}

// TestParallelSameReport: running cases in parallel changes nothing in the
// report.
func TestParallelSameReport(t *testing.T) {
	cfg := raceConfig(t)
	cfg.TraceDir = ""
	one, err := Explore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Parallel = 3
	three, err := Explore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	one.Markdown(&a, MarkdownOptions{})
	three.Markdown(&b, MarkdownOptions{})
	if a.String() != b.String() {
		t.Fatalf("reports differ:\n%s\n---\n%s", a.String(), b.String())
	}
}

func TestMarkdown(t *testing.T) {
	rep := Report{Models: []ModelReport{
		{Log: sim.MintOrdered, Total: 41, Failures: []Result{{
			Case:       Case{Seed: 7, Log: sim.MintOrdered, Scenario: "fanout-2", Version: "resilient"},
			Violations: []Violation{{InvRunCompletes, "run not completed | stage 0: 2/2 done"}},
			TracePath:  "out/sim/x.trace",
		}}},
		{Log: sim.AppendOnly, Total: 41},
	}}
	var b bytes.Buffer
	if err := rep.Markdown(&b, MarkdownOptions{TraceLink: func(p string) string { return "https://ci/" + p }}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"### Sim World",
		"**🟠 Mint-ordered log — 1 fail of 41 total**",
		"**🟢 Append-only log — 0 fail of 41 total**",
		"| 7 | fanout-2 | resilient | `run-completes` | run not completed \\| stage 0: 2/2 done | [trace](https://ci/out/sim/x.trace) |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
}

// TestCheck: each invariant on a hand-written log.
func TestCheck(t *testing.T) {
	ev := func(pos int64, k world.EventKind, entity string) world.Event {
		return world.Event{Pos: pos, Kind: k, Entity: entity}
	}
	okLog := []world.Event{
		ev(1, world.RunCreated, ""), ev(2, world.RunStarted, ""),
		ev(3, world.StepCreated, "0.0"), ev(4, world.StepCreated, "0.1"),
		ev(5, world.StepStarted, "0.0"), ev(6, world.StepCompleted, "0.0"),
		ev(7, world.StepStarted, "0.1"), ev(8, world.StepCompleted, "0.1"),
		ev(9, world.RunCompleted, ""),
	}
	finished := func() *observer {
		o := &observer{bodies: map[string]int{"0.0": 1, "0.1": 2}, finished: true, ends: 1, at: 2 * time.Second}
		return o
	}
	lim := checkLimits{stall: 30 * time.Second}
	cases := []struct {
		name   string
		events []world.Event
		obs    func() *observer
		lim    checkLimits
		want   []string
	}{
		{"ok", okLog, finished, lim, nil},
		{"event after terminal", append(append([]world.Event{}, okLog...), ev(10, world.StepStarted, "0.1")),
			finished, lim, []string{InvTerminalLast}},
		{"lost continuation", okLog[:8], func() *observer {
			o := finished()
			o.finished, o.ends = false, 0
			return o
		}, lim, []string{InvRunCompletes}},
		{"created never completed", append(append([]world.Event{}, okLog[:7]...), ev(8, world.RunCompleted, "")),
			func() *observer { o := finished(); o.bodies = map[string]int{"0.0": 1}; return o }, lim,
			[]string{InvCreatedComplete, InvStepOnce}},
		{"body never ran", okLog, func() *observer { o := finished(); delete(o.bodies, "0.1"); return o }, lim,
			[]string{InvStepOnce}},
		{"stall", okLog, func() *observer { o := finished(); o.at = time.Minute; return o }, lim, []string{InvNoStall}},
		{"stall with faults", okLog, func() *observer { o := finished(); o.at = time.Minute; return o },
			checkLimits{stall: 30 * time.Second, faults: true}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := check(engine.FanOut(2), tc.events, tc.obs(), tc.lim)
			var names []string
			for _, v := range got {
				names = append(names, v.Invariant)
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("violations %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseLogs(t *testing.T) {
	got, err := ParseLogs("mint-ordered, append-only")
	if err != nil || len(got) != 2 || got[0] != sim.MintOrdered || got[1] != sim.AppendOnly {
		t.Fatalf("ParseLogs = %v, %v", got, err)
	}
	for _, bad := range []string{"", "mint", "append-only,nope"} {
		if _, err := ParseLogs(bad); err == nil {
			t.Errorf("ParseLogs(%q) accepted", bad)
		}
	}
}
