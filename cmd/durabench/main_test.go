package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durabench/durabench/results"
)

// bin is the durabench binary built once for every test: the behaviour under
// test is the real command's (flags, output, exit codes, signals).
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "durabench-cli-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "durabench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

func durabench(t *testing.T, dir string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// smallSweep is a quick sweep on the in-memory world.
var smallSweep = []string{"sweep", "--world", "mem", "--branches", "4,8", "--versions", "baseline,resilient",
	"--switches", "none", "--reps", "3", "--warmup", "1"}

// TestBadInput: every kind of mistake is one line on stderr naming the flag,
// field or file, exit 2, and nothing written.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	corrupt := write(t, dir, "corrupt.json", `{"schema":"durabench/results/v1","cells":[{"scenario":`)
	foreign := write(t, dir, "foreign.json", `{"hello":"world"}`)
	yamls := map[string]string{
		"unknown-key.yaml":     "scenarios: [fanout]\nrepz: 3\n",
		"wrong-type.yaml":      "reps: lots\n",
		"negative-reps.yaml":   "reps: -1\n",
		"unknown-version.yaml": "versions: [baseline, turbo]\n",
		"syntax.yaml":          "versions: [baseline\n",
		"table-stat.yaml":      "cells:\n  - version: baseline\n    branches: 64\n    metrics:\n      ttls: {p51: 1s}\n",
		"table-version.yaml":   "cells:\n  - version: turbo\n    metrics: {ttls: {p50: 1s}}\n",
		"table.yaml":           "profile: table\ncells:\n  - version: baseline\n    branches: 4\n    metrics: {ttls: {p50: 100ms}}\n",
		"bad-target.yaml":      "targets: [reference, \"http://\"]\n",
	}
	for name, body := range yamls {
		write(t, dir, name, body)
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown scenario", []string{"sweep", "--scenario", "fanin"}, []string{"--scenario fanin", `unknown scenario "fanin"`}},
		{"unknown version", []string{"sweep", "--versions", "baseline,v9"}, []string{"--versions", `unknown version "v9"`}},
		{"unknown switch", []string{"sweep", "--switches", "none,warp=1"}, []string{"--switches", `unknown switch "warp"`}},
		{"unknown world", []string{"sweep", "--world", "redis"}, []string{"--world redis", `unknown world "redis"`}},
		{"unknown profile", []string{"sweep", "--profile", "moon"}, []string{"--profile moon", "moon"}},
		{"zero branches", []string{"sweep", "--branches", "20,0"}, []string{"--branches 20,0", "0 is less than 1"}},
		{"negative reps", []string{"sweep", "--reps", "-1"}, []string{"--reps -1", "-1 is less than 1"}},
		{"unknown option", []string{"sweep", "--option", "colour=red"}, []string{"option colour"}},
		{"bad option value", []string{"sweep", "--option", "body=soon"}, []string{"body", `"soon"`}},
		{"open without rate", []string{"sweep", "--pace", "open"}, []string{"pace open needs --rate"}},
		{"unknown flag", []string{"sweep", "--brunches", "3"}, []string{"brunches"}},
		{"bad target", []string{"sweep", "--targets", "reference,Go Workflows"}, []string{"--targets", `"Go Workflows" is not a target`}},
		{"missing adapter", []string{"sweep", "--targets", "nosuchengine"}, []string{"--targets", "durabench-target-nosuchengine"}},
		{"target twice", []string{"sweep", "--targets", "reference,reference"}, []string{"--targets", "given twice"}},
		{"negative procs", []string{"target", "serve", "reference", "--procs", "-1"}, []string{"--procs -1", "0 (every core) or more"}},
		{"yaml bad target", []string{"sweep", "-f", "bad-target.yaml"}, []string{"bad-target.yaml:1:", "targets:", `"http://" is not a target URL`}},
		{"yaml unknown key", []string{"sweep", "-f", "unknown-key.yaml"}, []string{"unknown-key.yaml:2:", "repz:", "unknown field"}},
		{"yaml wrong type", []string{"sweep", "-f", "wrong-type.yaml"}, []string{"wrong-type.yaml:1:", "reps:", "want an integer"}},
		{"yaml negative reps", []string{"sweep", "-f", "negative-reps.yaml"}, []string{"negative-reps.yaml:1:", "reps:", "-1 is less than 1"}},
		{"yaml unknown version", []string{"sweep", "-f", "unknown-version.yaml"}, []string{"unknown-version.yaml:1:", "versions:", `unknown version "turbo"`}},
		{"yaml syntax", []string{"sweep", "-f", "syntax.yaml"}, []string{"syntax.yaml", "line"}},
		{"missing yaml", []string{"sweep", "-f", "nope.yaml"}, []string{"nope.yaml"}},
		{"corrupt results", []string{"report", corrupt}, []string{"corrupt.json"}},
		{"foreign results", []string{"report", foreign}, []string{"foreign.json"}},
		{"corrupt compare", []string{"compare", corrupt, corrupt}, []string{"corrupt.json"}},
		{"corrupt gate", []string{"gate", corrupt}, []string{"corrupt.json"}},
		{"bad format", []string{"report", corrupt, "--format", "pdf"}, []string{"--format pdf"}},
		{"bad rule", []string{"gate", corrupt, "--rule", "ttls.p90 <<< 3"}, []string{"--rule"}},
		{"unknown command", []string{"swep"}, []string{`unknown command "swep"`}},
		{"bad status", []string{"report", "--status", "done"}, []string{"--status done"}},
		{"status with results", []string{"report", "--status", "running", corrupt}, []string{"no results file"}},
		{"commit without status", []string{"report", corrupt, "--commit", "abc"}, []string{"--commit"}},
		{"table statistic", []string{"calibrate", "table-stat.yaml"}, []string{"table-stat.yaml:5:", "cells[0].metrics.ttls.p51", "unknown statistic"}},
		{"table version", []string{"calibrate", "table-version.yaml"}, []string{"table-version.yaml:2:", "cells[0].version", `unknown version "turbo"`}},
		{"missing table", []string{"calibrate", "nope.yaml"}, []string{"nope.yaml"}},
		{"no table", []string{"calibrate"}, []string{"calibrate needs one table"}},
		{"unknown base", []string{"calibrate", "table.yaml", "--base", "moon"}, []string{"--base", "moon"}},
		{"format without check", []string{"calibrate", "table.yaml", "--format", "md"}, []string{"--format applies to --check only"}},
		{"bad parallel", []string{"calibrate", "table.yaml", "--parallel", "0"}, []string{"--parallel 0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(c.name, " ", "-"))
			args := c.args
			if args[0] == "sweep" || args[0] == "calibrate" {
				args = append(args, "--out", out)
			}
			r := durabench(t, dir, args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2; stderr %q", r.code, r.stderr)
			}
			if lines := strings.Count(strings.TrimSpace(r.stderr), "\n") + 1; lines != 1 {
				t.Errorf("stderr has %d lines, want 1: %q", lines, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q does not name %q", r.stderr, w)
				}
			}
			if r.stdout != "" {
				t.Errorf("stdout not empty: %q", r.stdout)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was created", out)
			}
		})
	}
}

// TestUnreachableNATS: a NATS URL where nothing listens fails within 5 s,
// naming the URL, before anything runs.
func TestUnreachableNATS(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	r := durabench(t, dir, "sweep", "--nats-url", "nats://127.0.0.1:1", "--out", filepath.Join(dir, "o"))
	if took := time.Since(start); took > 6*time.Second {
		t.Errorf("took %v, want < 5 s (+ process start)", took)
	}
	if r.code != 2 || !strings.Contains(r.stderr, "nats://127.0.0.1:1") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestSweepAndTools runs a small sweep, then every command on its results.
func TestSweepAndTools(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	r := durabench(t, dir, append(smallSweep, "--out", out)...)
	if r.code != 0 {
		t.Fatalf("sweep: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	resPath := filepath.Join(out, "results.json")
	if strings.Contains(r.stdout, "\x1b[") || strings.Contains(r.stdout, "ETA") {
		t.Errorf("output that is not a terminal has progress bars:\n%q", r.stdout)
	}
	for _, want := range []string{"[4/4]", "fanout", "TTLS p50", "results: " + resPath, "report:  " + filepath.Join(out, "report.md")} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("sweep output lacks %q:\n%s", want, r.stdout)
		}
	}
	f, err := results.Read(resPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cells) != 4 || f.Partial || f.Plan.Reps != 3 || f.Plan.Pace != "burst" {
		t.Fatalf("results: %d cells, partial %v, plan %+v", len(f.Cells), f.Partial, f.Plan)
	}
	for _, c := range f.Cells {
		if c.Runs != 3 || c.Errors != 0 || c.Metrics["ttls"].Count != 3 {
			t.Errorf("cell %s/%d: runs %d errors %d ttls %d", c.Version, c.Branches, c.Runs, c.Errors, c.Metrics["ttls"].Count)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "report.md")); err != nil {
		t.Error(err)
	}
	for _, format := range []string{"text", "md", "github", "json", "benchfmt"} {
		if r := durabench(t, dir, "report", resPath, "--format", format); r.code != 0 || r.stdout == "" {
			t.Errorf("report --format %s: exit %d, stderr %q", format, r.code, r.stderr)
		}
	}
	if r := durabench(t, dir, "compare", resPath, resPath); r.code != 0 {
		t.Errorf("compare: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := durabench(t, dir, "gate", resPath, "--baseline", resPath, "--rule", "errors == 0"); r.code != 0 {
		t.Errorf("gate errors == 0: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := durabench(t, dir, "gate", resPath, "--rule", "ttls.p50 < 1us"); r.code != 1 {
		t.Errorf("gate ttls.p50 < 1us: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := durabench(t, dir, "history", "add", resPath, "--dir", filepath.Join(dir, "hist")); r.code != 0 {
		t.Errorf("history add: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := durabench(t, dir, "report", "--status", "running", "--commit", "0123456789", "--run-url", "https://ci/1"); r.code != 0 ||
		!strings.HasPrefix(r.stdout, "<!-- durabench-benchmark -->\n## 📊 Durable Workflow Benchmarks — ⏳ running") {
		t.Errorf("report --status running: exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
	if r := durabench(t, dir, "list"); r.code != 0 || !strings.Contains(r.stdout, "branches  int") {
		t.Errorf("list: exit %d\n%s", r.code, r.stdout)
	}
}

// TestInterruptAndResume sends SIGINT to a running sweep: it exits 130
// leaving a readable partial results file with the finished cells, and
// --resume runs only the missing cells, keeping the finished ones
// identical.
func TestInterruptAndResume(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	// Five cells of about half a second each (11 runs of a 40 ms body).
	args := []string{"sweep", "--world", "mem", "--branches", "4", "--switches", "none",
		"--reps", "10", "--warmup", "1", "--option", "body=40ms", "--progress", "lines", "--grace", "2s"}
	sweep := startUntil(t, dir, "[1/5]", append(args, "--out", out)...)
	if err := sweep.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code, stderr, seen := sweep.finish(t, 60*time.Second, "the sweep did not stop on SIGINT")
	if code != 130 {
		t.Fatalf("exit %d, want 130; stdout %q stderr %q", code, seen, stderr)
	}
	resPath := filepath.Join(out, "results.json")
	if !strings.Contains(stderr, "partial results in "+resPath) || !strings.Contains(stderr, "--resume "+out) {
		t.Errorf("stderr does not say where the results are and how to resume: %q", stderr)
	}
	partial, err := results.Read(resPath)
	if err != nil {
		t.Fatal(err)
	}
	if !partial.Partial || len(partial.Cells) < 1 || len(partial.Cells) >= 5 {
		t.Fatalf("partial %v with %d cells", partial.Partial, len(partial.Cells))
	}
	if len(partial.Missing) != 5-len(partial.Cells) {
		t.Errorf("partial results list %d missing cells, want %d: %q", len(partial.Missing), 5-len(partial.Cells), partial.Missing)
	}
	if r := durabench(t, dir, "report", resPath); !strings.Contains(r.stdout, "PARTIAL RESULTS") || !strings.Contains(r.stdout, "missing: "+partial.Missing[0]) {
		t.Errorf("report of partial results does not name the missing cells:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(out, "report.md")); err == nil {
		t.Error("an interrupted sweep wrote report.md, which looks complete")
	}
	if _, err := os.Stat(filepath.Join(out, results.JournalName)); err != nil {
		t.Errorf("an interrupted sweep left no journal: %v", err)
	}
	// A partial sweep is nothing to gate: exit 3, not a pass.
	if g := durabench(t, dir, "gate", resPath, "--rule", "errors == 0"); g.code != 3 {
		t.Errorf("gate on partial results: exit %d, want 3\n%s%s", g.code, g.stdout, g.stderr)
	}

	r := durabench(t, dir, append(args, "--resume", out)...)
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got := strings.Count(r.stdout, "(resumed)"); got != len(partial.Cells) {
		t.Errorf("resume reused %d cells, want %d:\n%s", got, len(partial.Cells), r.stdout)
	}
	full, err := results.Read(resPath)
	if err != nil {
		t.Fatal(err)
	}
	if full.Partial || len(full.Cells) != 5 {
		t.Fatalf("resumed results: partial %v, %d cells", full.Partial, len(full.Cells))
	}
	// Complete results hold every cell: no journal is left beside them.
	if _, err := os.Stat(filepath.Join(out, results.JournalName)); err == nil {
		t.Error("a complete sweep left its journal beside results.json")
	}
	for i, c := range partial.Cells {
		a, _ := json.Marshal(c)
		b, _ := json.Marshal(full.Cells[i])
		if !bytes.Equal(a, b) {
			t.Errorf("cell %d changed on resume:\n%s\n%s", i, a, b)
		}
	}
}

// TestProgressInTerminal runs a sweep under a pseudo-terminal (script from
// util-linux): bars with an ETA are drawn and finished cells are summarised;
// with --quiet nothing but the output paths is printed.
func TestProgressInTerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script (util-linux) not installed")
	}
	dir := t.TempDir()
	run := func(extra ...string) string {
		args := append(append([]string{bin}, smallSweep...), "--option", "body=20ms", "--out", filepath.Join(dir, "o"+fmt.Sprint(len(extra))))
		args = append(args, extra...)
		// A pty made by script has no size; give it one, as a terminal has.
		cmd := exec.Command(script, "-qfec", "stty cols 120 rows 40; "+strings.Join(args, " "), "/dev/null")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TERM=xterm", "COLUMNS=120")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	tty := run()
	for _, want := range []string{"sweep", "ETA", "runs", "\x1b[", "[4/4] fanout body=20ms branches=8 resilient mem/none: TTLS p50"} {
		if !strings.Contains(tty, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, tty)
		}
	}
	quiet := run("--quiet")
	if strings.Contains(quiet, "ETA") || strings.Contains(quiet, "\x1b[") || strings.Contains(quiet, "[1/4]") {
		t.Errorf("--quiet output has progress:\n%q", quiet)
	}
	if !strings.Contains(quiet, "results: ") {
		t.Errorf("--quiet output lacks the results path:\n%q", quiet)
	}
}

// running is a durabench process whose stdout a test reads line by line.
type running struct {
	cmd    *exec.Cmd
	stdout io.Reader
	stderr *bytes.Buffer
	seen   []string
}

// startUntil starts durabench in dir and reads its stdout until a line
// starts with prefix; the test then acts (a signal, a dead server) and calls
// finish.
func startUntil(t *testing.T, dir, prefix string, args ...string) *running {
	t.Helper()
	r := &running{cmd: exec.Command(bin, args...), stderr: &bytes.Buffer{}}
	r.cmd.Dir = dir
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.stdout = stdout
	r.cmd.Stderr = r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		r.seen = append(r.seen, sc.Text())
		if strings.HasPrefix(sc.Text(), prefix) {
			return r
		}
	}
	r.cmd.Wait() // stdout is closed; Wait finishes copying stderr before it is read
	t.Fatalf("no stdout line starting with %q; stdout %q stderr %q", prefix, r.seen, r.stderr.String())
	return nil
}

// finish reads the rest of stdout and waits for the exit, killing the
// process (and failing with what) after limit; it returns the exit code,
// stderr and the stdout lines read before the prefix.
func (r *running) finish(t *testing.T, limit time.Duration, what string) (int, string, []string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		io.Copy(io.Discard, r.stdout)
		done <- r.cmd.Wait()
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(limit):
		r.cmd.Process.Kill()
		<-done
		t.Fatalf("%s within %v; stderr %q", what, limit, r.stderr.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return code, r.stderr.String(), r.seen
}

// TestUnreachableTarget: a target URL where nothing listens, or where
// something answers that is not a target, fails before anything runs:
// exit 2, one line naming the URL.
func TestUnreachableTarget(t *testing.T) {
	notTarget := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("<html>hello</html>"))
	}))
	defer notTarget.Close()
	for _, url := range []string{"http://127.0.0.1:1", notTarget.URL} {
		dir := t.TempDir()
		r := durabench(t, dir, "sweep", "--targets", url, "--world", "mem", "--reps", "1", "--out", filepath.Join(dir, "o"))
		if r.code != 2 || !strings.Contains(r.stderr, url) || !strings.Contains(r.stderr, "not a working target") ||
			strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line naming it", url, r.code, r.stderr)
		}
	}
}
