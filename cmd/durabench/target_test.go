package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/results"
)

// TestTargetServeAndCheck: `durabench target serve reference` prints its
// URL and serves the built-in engine over the target protocol (here on one
// processor, --procs 1); `durabench target check URL` passes it (exit 0,
// PASS); a URL where no target answers is one line, exit 2.
func TestTargetServeAndCheck(t *testing.T) {
	cmd := exec.Command(bin, "target", "serve", "reference", "--world", "nats", "--procs", "1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			urls <- strings.TrimSpace(sc.Text())
		}
	}()
	var url string
	select {
	case url = <-urls:
	case <-time.After(30 * time.Second):
		t.Fatal("target serve printed no URL within 30 s")
	}
	dir := t.TempDir()
	r := durabench(t, dir, "target", "check", url, "--runs", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "PASS") || !strings.Contains(r.stdout, "every step exactly once") {
		t.Fatalf("check of the reference: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = durabench(t, dir, "target", "check", "http://127.0.0.1:1")
	if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Fatalf("check of nothing: exit %d, stderr %q; want one line naming the URL, exit 2", r.code, r.stderr)
	}
}

// buildAdapter builds the test adapter (internal/target/testdata/adapter: the
// built-in engine behind target.Main) next to the durabench binary, where
// `--targets testref` finds it.
func buildAdapter(t *testing.T) {
	t.Helper()
	out := filepath.Join(filepath.Dir(bin), "durabench-target-testref")
	if _, err := os.Stat(out); err == nil {
		return
	}
	if b, err := exec.Command("go", "build", "-o", out, "../../internal/target/testdata/adapter").CombinedOutput(); err != nil {
		t.Fatalf("go build adapter: %v\n%s", err, b)
	}
}

// TestSweepTargetsSideBySide: `--targets reference,testref` starts the
// adapter executable found next to durabench, runs the built-in engine and
// the target on the same cells, and writes one results file: the target's
// cells carry what it said it is, a scenario it does not declare is skipped
// with the reason (not an error), and the report has the engines table.
func TestSweepTargetsSideBySide(t *testing.T) {
	buildAdapter(t)
	dir := t.TempDir()
	r := durabench(t, dir, "sweep", "--targets", "reference,testref --scenarios=fanout", "--scenario", "fanout,sequential",
		"--world", "mem", "--branches", "8,32", "--option", "steps=5", "--versions", "pending-count", "--switches", "none",
		"--reps", "3", "--warmup", "1", "--out", "out")
	if r.code != 0 {
		t.Fatalf("sweep exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	f, err := results.Read(filepath.Join(dir, "out", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref, tgt, skipped int
	for _, c := range f.Cells {
		// What the cell kept busy: durabench's process, and an adapter it
		// started (read from /proc on Linux).
		switch {
		case c.Skipped != "":
		case c.CPU == nil:
			t.Errorf("cell %s %d br %s: no cpu", c.Scenario, c.Branches, c.Target)
		case c.Target == "" && (c.CPU.DurabenchCores <= 0 || c.CPU.TargetCores != nil):
			t.Errorf("reference cell %d br: cpu %+v, want durabench's cores (the engine runs in it) and no target's", c.Branches, *c.CPU)
		case c.Target != "" && runtime.GOOS == "linux" && c.CPU.TargetCores == nil:
			t.Errorf("target cell %d br: cpu %+v, want the adapter's cores", c.Branches, *c.CPU)
		case runtime.GOOS == "linux" && c.CPU.StealCores == nil:
			t.Errorf("cell %s %d br %s: cpu %+v, want the host's steal (/proc/stat)", c.Scenario, c.Branches, c.Target, *c.CPU)
		}
		switch {
		case c.Target == "":
			ref++
		case c.Skipped != "":
			skipped++
			if c.Scenario != "sequential" || !strings.Contains(c.Skipped, "does not support scenario sequential") || c.Runs != 0 {
				t.Errorf("skipped cell %s: %q, %d runs", c.Scenario, c.Skipped, c.Runs)
			}
		default:
			tgt++
			if c.Target != "testref" || c.Engine != "testref" || c.EngineVersion != "pending-count" || c.Version != "" || c.World != "" {
				t.Errorf("target cell: target %q engine %q %q, version %q world %q", c.Target, c.Engine, c.EngineVersion, c.Version, c.World)
			}
			if c.Runs != 3 || c.Errors != 0 || c.Stalls != 0 || c.Metrics["ttls"].Count != 3 {
				t.Errorf("target cell %d br: %d runs, %d errors, %d stalls, %d TTLS samples; want 3 clean runs",
					c.Branches, c.Runs, c.Errors, c.Stalls, c.Metrics["ttls"].Count)
			}
			if c.ClockErrorUS <= 0 {
				t.Errorf("target cell %d br: no clock error bound", c.Branches)
			}
		}
	}
	if ref != 3 || tgt != 2 || skipped != 1 {
		t.Fatalf("%d reference cells, %d target cells, %d skipped; want 3, 2 and 1", ref, tgt, skipped)
	}
	// The progress line of the skipped cell says so, never figures of no run.
	if out := r.stdout + r.stderr; !strings.Contains(out, "skipped: testref does not support scenario sequential") || strings.Contains(out, "p50 0s") {
		t.Errorf("progress of the skipped cell:\n%s", out)
	}
	rep, err := os.ReadFile(filepath.Join(dir, "out", "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Engines", "testref (testref pending-count)", "reference pending-count · mem",
		"Skipped (the target does not run them)", "32 br · testref"} {
		if !strings.Contains(string(rep), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if f.Plan.Engines == nil || f.Plan.Engines[1] != "testref --scenarios=fanout" {
		t.Errorf("plan engines %q", f.Plan.Engines)
	}
}

// TestTargetCheckByName: `target check NAME` starts the adapter and checks
// it; a name with no executable, or an adapter that dies before it is
// ready, is one clear error, exit 2 or 3, never a hang.
func TestTargetCheckByName(t *testing.T) {
	buildAdapter(t)
	dir := t.TempDir()
	r := durabench(t, dir, "target", "check", "testref", "--runs", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "target: testref pending-count") || !strings.Contains(r.stdout, "PASS") {
		t.Fatalf("check testref: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Every adapter built on target.Main takes --procs.
	r = durabench(t, dir, "target", "check", "testref --procs=1", "--runs", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "PASS") {
		t.Fatalf("check 'testref --procs=1': exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = durabench(t, dir, "list")
	if r.code != 0 || !regexp.MustCompile(`(?m)^  testref +\S*durabench-target-testref$`).MatchString(r.stdout) {
		t.Errorf("durabench list does not show the installed adapter:\n%s", r.stdout)
	}
	r = durabench(t, dir, "target", "check", "nosuch")
	if r.code != 2 || !strings.Contains(r.stderr, "durabench-target-nosuch") {
		t.Fatalf("check nosuch: exit %d, stderr %q; want exit 2 naming the executable", r.code, r.stderr)
	}
	r = durabench(t, dir, "sweep", "--targets", "testref --no-such-flag", "--world", "mem", "--reps", "1", "--warmup", "0", "--out", "out")
	if r.code == 0 || !strings.Contains(r.stderr, "exited before it was ready") || !strings.Contains(r.stderr, "no-such-flag") {
		t.Fatalf("sweep with a broken adapter: exit %d, stderr %q; want the adapter's own error", r.code, r.stderr)
	}
	r = durabench(t, dir, "target", "check", "testref --procs=-1")
	if r.code == 0 || !strings.Contains(r.stderr, "--procs -1") {
		t.Fatalf("check 'testref --procs=-1': exit %d, stderr %q; want the adapter's error naming --procs", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "results.json")); err == nil {
		t.Errorf("a sweep whose target never started wrote results.json")
	}
}

// TestSweepRoundsRestartTargets: `--interleave --rounds 3` runs an
// interleaved pair of two started targets in three rounds, both adapters
// started afresh (new processes, in targets.log) before the second and
// the third; the blocks are numbered on across the rounds, each run id is
// the results' once, and compare tests the pair across its rounds.
func TestSweepRoundsRestartTargets(t *testing.T) {
	buildAdapter(t)
	dir := t.TempDir()
	r := durabench(t, dir, "sweep", "--targets", "testref,testref --procs=1", "--interleave", "--rounds", "3",
		"--scenario", "fanout", "--world", "mem", "--branches", "8", "--reps", "7", "--warmup", "1", "--out", "out")
	if r.code != 0 {
		t.Fatalf("sweep exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	f, err := results.Read(filepath.Join(dir, "out", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if in := f.Plan.Interleave; in == nil || in.Rounds != 3 || in.Dimension != "targets" {
		t.Fatalf("interleave record %+v, want targets in 3 rounds", in)
	}
	if len(f.Cells) != 2 {
		t.Fatalf("%d cells, want 2", len(f.Cells))
	}
	ids := map[string]bool{}
	for s, c := range f.Cells {
		if c.Runs != 7 || c.Errors != 0 || c.Pairing == nil || len(c.Pairing.Runs) != 7 || c.Metrics["ttls"].Count != 7 {
			t.Fatalf("side %d: %d runs, %d errors, pairing %+v; want 7 clean paired runs", s, c.Runs, c.Errors, c.Pairing)
		}
		// 7 blocks in 3 rounds: 3, 2 and 2.
		wantRound := []int{1, 1, 1, 2, 2, 3, 3}
		for i, run := range c.Pairing.Runs {
			if run.Block != i+1 || run.Round != wantRound[i] {
				t.Errorf("side %d run %d: block %d round %d, want block %d round %d", s, i, run.Block, run.Round, i+1, wantRound[i])
			}
			if ids[run.Run] {
				t.Errorf("run id %s twice in the results", run.Run)
			}
			ids[run.Run] = true
		}
	}
	// Two adapters at the start and both again before rounds 2 and 3.
	logb, err := os.ReadFile(filepath.Join(dir, "out", "targets.log"))
	if err != nil {
		t.Fatal(err)
	}
	pids := regexp.MustCompile(`durabench: target (.+) started: pid (\d+)`).FindAllStringSubmatch(string(logb), -1)
	seen := map[string]bool{}
	for _, m := range pids {
		seen[m[2]] = true
	}
	if len(pids) != 6 || len(seen) != 6 {
		t.Fatalf("targets.log: %d starts of %d processes, want 6 of 6\n%s", len(pids), len(seen), logb)
	}
	r = durabench(t, dir, "compare", filepath.Join("out", "results.json"), "--format", "json")
	if r.code != 0 {
		t.Fatalf("compare exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, `"test": "student t across rounds"`) || !strings.Contains(r.stdout, `"rounds": 3`) {
		t.Errorf("compare --format json does not test across the 3 rounds:\n%.3000s", r.stdout)
	}
	r = durabench(t, dir, "compare", filepath.Join("out", "results.json"))
	if r.code != 0 || !strings.Contains(r.stdout, "in 3 rounds on processes started afresh") {
		t.Errorf("compare exit %d; its note does not say the rounds:\n%s%s", r.code, r.stdout, r.stderr)
	}
}
