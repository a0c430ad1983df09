package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/results"
	"go.yaml.in/yaml/v3"
)

// The GitHub Action at the repository root, the script of its shell steps,
// and the documentation with the example consumer workflow.
var (
	repoRoot     = filepath.Join("..", "..")
	actionPath   = filepath.Join(repoRoot, "action.yml")
	actionScript = filepath.Join(repoRoot, ".github", "scripts", "durabench-action.sh")
	ciDoc        = filepath.Join(repoRoot, "docs", "ci.md")
)

type actionStep struct {
	ID   string            `yaml:"id"`
	If   string            `yaml:"if"`
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	Env  map[string]string `yaml:"env"`
	With map[string]string `yaml:"with"`
}

type actionFile struct {
	Inputs map[string]struct {
		Default string `yaml:"default"`
	} `yaml:"inputs"`
	Outputs map[string]struct {
		Value string `yaml:"value"`
	} `yaml:"outputs"`
	Runs struct {
		Using string       `yaml:"using"`
		Steps []actionStep `yaml:"steps"`
	} `yaml:"runs"`
}

func readAction(t *testing.T) actionFile {
	t.Helper()
	b, err := os.ReadFile(actionPath)
	if err != nil {
		t.Fatal(err)
	}
	var a actionFile
	if err := yaml.Unmarshal(b, &a); err != nil {
		t.Fatalf("%s: %v", actionPath, err)
	}
	return a
}

// TestActionLint: the example consumer workflow in docs/ci.md lints clean
// with actionlint, as `uses: ./`, so that its inputs are checked against
// action.yml; every input, step output and script step action.yml names
// exists.
func TestActionLint(t *testing.T) {
	a := readAction(t)
	if a.Runs.Using != "composite" {
		t.Errorf("runs.using %q", a.Runs.Using)
	}
	raw, _ := os.ReadFile(actionPath)
	script, err := os.ReadFile(actionScript)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`inputs\.([a-z-]+)`).FindAllStringSubmatch(string(raw), -1) {
		if _, ok := a.Inputs[m[1]]; !ok {
			t.Errorf("action.yml uses inputs.%s, which it does not declare", m[1])
		}
	}
	ids := map[string]bool{}
	for _, s := range a.Runs.Steps {
		ids[s.ID] = true
	}
	for _, m := range regexp.MustCompile(`steps\.([a-z-]+)\.outputs`).FindAllStringSubmatch(string(raw), -1) {
		if !ids[m[1]] {
			t.Errorf("action.yml reads steps.%s.outputs: no such step", m[1])
		}
	}
	for _, s := range a.Runs.Steps {
		if m := regexp.MustCompile(`durabench-action\.sh" ([a-z-]+)`).FindStringSubmatch(s.Run); m != nil {
			if !strings.Contains(string(script), "\n"+m[1]+")\n") {
				t.Errorf("action.yml runs script step %q: not in %s", m[1], actionScript)
			}
		}
	}

	doc, err := os.ReadFile(ciDoc)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatalf("%s: no yaml block", ciDoc)
	}
	example := string(m[1])
	if !strings.Contains(example, "uses: durabench/durabench@v1") {
		t.Fatalf("%s: the example does not use durabench/durabench@v1", ciDoc)
	}
	// A project of its own: actionlint resolves ./ from the repository root.
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "action.yml"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(dir, ".github", "workflows", "benchmark.yml")
	if err := os.MkdirAll(filepath.Dir(wf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wf, []byte(strings.ReplaceAll(example, "durabench/durabench@v1", "./")), 0o644); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(wf)
	lint := exec.Command("go", "tool", "actionlint", abs)
	lint.Dir = filepath.Join(repoRoot, "tools")
	if out, err := lint.CombinedOutput(); err != nil {
		t.Errorf("actionlint on the example of %s (as uses: ./): %v\n%s", ciDoc, err, out)
	}
	// The linter does see the action's inputs: a misspelt one fails.
	bad := strings.Replace(strings.ReplaceAll(example, "durabench/durabench@v1", "./"), "sweep-flags:", "sweep-flag:", 1)
	if err := os.WriteFile(wf, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	lint = exec.Command("go", "tool", "actionlint", abs)
	lint.Dir = filepath.Join(repoRoot, "tools")
	if out, err := lint.CombinedOutput(); err == nil || !strings.Contains(string(out), `input "sweep-flag" is not defined`) {
		t.Errorf("actionlint did not check the inputs against action.yml: %v\n%s", err, out)
	}
}

// TestAction runs the action's steps as GitHub would — every step of
// action.yml in order, its `if:` and `${{ }}` expressions evaluated, the
// shell steps in bash, the github-script steps under Node against a
// recording stand-in for the GitHub API (the other actions are recorded,
// not run) — on real durabench sweeps.
func TestAction(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	a := readAction(t)
	// A baseline results file, swept like the head.
	sweepFlags := "--world sim --profile lan --branches 8 --versions baseline --switches none --reps 4 --warmup 0 --seed 1"
	work := t.TempDir()
	if r := durabench(t, work, append([]string{"sweep"}, append(strings.Fields(sweepFlags), "--quiet", "--out", "prev")...)...); r.code != 0 {
		t.Fatalf("baseline sweep: %d %s", r.code, r.stderr)
	}
	baseline := filepath.Join(work, "prev", "results.json")
	rules := filepath.Join(work, "impossible.txt")
	if err := os.WriteFile(rules, []byte("ttls.p50 < 1us\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Base and head built alike, in real time: a relative rule still takes
	// the paired test, but a threshold no noise reaches, not the default
	// 1.10x. With 6 runs a side a default rule fails identical builds now
	// and then at α = 0.05 (1.47x, beyond p = 0.046, under two CPU hogs).
	loose := filepath.Join(work, "loose.txt")
	if err := os.WriteFile(loose, []byte("ttls.p50 < 10x baseline\nerrors == 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// An adapter the build command makes: the built-in engine served over
	// the target protocol (a script, so base and head build it alike).
	adapterBuild := fmt.Sprintf(`printf '#!/bin/sh\nexec %s target serve reference --world mem "$@"\n' > "$DURABENCH_BIN/durabench-target-eng" && chmod +x "$DURABENCH_BIN/durabench-target-eng" && echo built > "$DURABENCH_BIN/marker"`, bin)
	pr := map[string]any{"head": map[string]any{"sha": "feedc0de12345678", "repo": map[string]any{"full_name": "o/r"}},
		"base": map[string]any{"sha": ""}}
	forkPR := map[string]any{"head": map[string]any{"sha": "feedc0de12345678", "repo": map[string]any{"full_name": "fork/r"}},
		"base": map[string]any{"sha": ""}}
	for _, tc := range []struct {
		name   string
		event  string
		pr     map[string]any
		with   map[string]string
		gitRef bool // a workspace with two commits; baseline-ref the first
		// want
		failed   bool
		calls    string // the stand-in's calls
		state    string // what the sticky comment says at the end ("" none)
		gate     string
		baseline bool
		null     bool   // a second baseline sweep (null-sweep), swept after the head
		again    bool   // a second head sweep (null-sweep: abab), swept after the null
		log      string // in the job's log
		// interleaved: base and head in the head's one sweep, as the
		// targets eng-base and eng
		interleaved bool
	}{
		{name: "pull request, baseline file", event: "pull_request", pr: pr,
			with:  map[string]string{"sweep-flags": sweepFlags, "baseline-results": baseline, "history-key": ""},
			calls: "create,update 101", state: "✅ completed", gate: "passed", baseline: true},
		{name: "gate fails after the comment", event: "pull_request", pr: pr,
			with:   map[string]string{"sweep-flags": sweepFlags, "baseline-results": baseline, "gate-rules": rules},
			failed: true, calls: "create,update 101", state: "✅ completed", gate: "failed", baseline: true},
		{name: "gate fails, not enforced", event: "pull_request", pr: pr,
			with:  map[string]string{"sweep-flags": sweepFlags, "baseline-results": baseline, "gate-rules": rules, "fail-on-gate": "false"},
			calls: "create,update 101", state: "✅ completed", gate: "failed", baseline: true},
		{name: "the sweep breaks", event: "pull_request", pr: pr,
			with:   map[string]string{"sweep-flags": "--world nowhere"},
			failed: true, calls: "create,update 101", state: "❌ failed"},
		{name: "a fork's pull request gets no comment", event: "pull_request", pr: forkPR,
			with:  map[string]string{"sweep-flags": sweepFlags, "baseline-results": baseline},
			calls: "", gate: "passed", baseline: true},
		{name: "push, baseline swept from a git ref with the build command", event: "push", gitRef: true,
			with: map[string]string{"sweep-file": "bench/sweep.yaml", "sweep-flags": "--seed 1",
				"build": `echo built > "$DURABENCH_BIN/marker"`, "comment": "false"},
			calls: "", gate: "passed", baseline: true},
		{name: "null sweep: baseline, head, baseline again", event: "push", gitRef: true,
			with: map[string]string{"sweep-file": "bench/sweep.yaml", "sweep-flags": "--seed 1", "null-sweep": "true",
				"build": `echo built > "$DURABENCH_BIN/marker"`, "comment": "false"},
			calls: "", gate: "passed", baseline: true, null: true},
		{name: "null sweep aba: the same as true", event: "push", gitRef: true,
			with: map[string]string{"sweep-file": "bench/sweep.yaml", "sweep-flags": "--seed 1", "null-sweep": "aba",
				"build": `echo built > "$DURABENCH_BIN/marker"`, "comment": "false"},
			calls: "", gate: "passed", baseline: true, null: true},
		{name: "null sweep abab: baseline, head, baseline, head", event: "push", gitRef: true,
			with: map[string]string{"sweep-file": "bench/sweep.yaml", "sweep-flags": "--seed 1", "null-sweep": "abab",
				"build": `echo built > "$DURABENCH_BIN/marker"`, "comment": "false"},
			calls: "", gate: "passed", baseline: true, null: true, again: true},
		{name: "null sweep abab on a pull request, the gate failing", event: "pull_request", pr: pr, gitRef: true,
			with: map[string]string{"sweep-file": "bench/sweep.yaml", "sweep-flags": "--seed 1", "null-sweep": "abab", "gate-rules": rules,
				"build": `echo built > "$DURABENCH_BIN/marker"`},
			failed: true, calls: "create,update 101", state: "✅ completed", gate: "failed", baseline: true, null: true, again: true},
		{name: "null sweep of an unknown kind", event: "push",
			with:   map[string]string{"sweep-flags": sweepFlags, "baseline-results": baseline, "null-sweep": "abba", "comment": "false"},
			failed: true, calls: "", log: "null-sweep: abba is not aba, abab, true or false"},
		{name: "interleaved: base and head builds as two targets of one sweep", event: "pull_request", pr: pr, gitRef: true,
			with: map[string]string{"sweep-flags": "--scenario fanout --branches 8 --reps 6 --warmup 1 --seed 1", "targets": "eng",
				"build": adapterBuild, "gate-rules": loose},
			calls: "create,update 101", state: "✅ completed", gate: "passed", interleaved: true, log: "paired Δ"},
		{name: "interleave true, but a null sweep asked for", event: "pull_request", pr: pr, gitRef: true,
			with: map[string]string{"sweep-flags": "--scenario fanout --branches 8 --reps 4 --warmup 1 --seed 1", "targets": "eng",
				"build": adapterBuild, "interleave": "true", "null-sweep": "aba", "comment": "false"},
			failed: true, calls: "", baseline: true, log: "interleave: true, but null-sweep sweeps base and head apart"},
		{name: "null sweep without a baseline ref sweeps nothing twice", event: "pull_request", pr: pr,
			with:  map[string]string{"sweep-flags": sweepFlags, "baseline-results": baseline, "null-sweep": "true"},
			calls: "create,update 101", state: "✅ completed", gate: "passed", baseline: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newActionHarness(t, a, node)
			h.github["event_name"] = tc.event
			if tc.pr != nil {
				h.github["event"] = map[string]any{"pull_request": tc.pr}
			}
			for k, v := range tc.with {
				h.inputs[k] = v
			}
			if tc.gitRef {
				h.inputs["baseline-ref"] = h.gitWorkspace(sweepFlags)
			}
			failed := h.run()
			if failed != tc.failed {
				t.Errorf("job failed %v, want %v; log:\n%s", failed, tc.failed, h.log.String())
			}
			if !strings.Contains(h.log.String(), tc.log) {
				t.Errorf("the job's log does not say %q:\n%s", tc.log, h.log.String())
			}
			if got := strings.Join(h.calls(), ","); got != tc.calls {
				t.Errorf("GitHub API calls %q, want %q", got, tc.calls)
			}
			if body := h.sticky(); tc.state == "" && body != "" || !strings.Contains(body, tc.state) {
				t.Errorf("the sticky comment %q, want it to say %q", firstLines(body, 3), tc.state)
			}
			if got := h.outputs["gate"]["gate"]; got != tc.gate {
				t.Errorf("output gate %q, want %q", got, tc.gate)
			}
			_, err := os.Stat(filepath.Join(h.temp, "durabench", "base", "results.json"))
			if (err == nil) != tc.baseline {
				t.Errorf("baseline results: %v, want present %v", err, tc.baseline)
			}
			nullPath := filepath.Join(h.temp, "durabench", "null", "results.json")
			_, err = os.Stat(nullPath)
			if (err == nil) != tc.null {
				t.Errorf("null sweep results: %v, want present %v", err, tc.null)
			}
			_, err = os.Stat(filepath.Join(h.temp, "durabench", "head2", "results.json"))
			if (err == nil) != tc.again {
				t.Errorf("second head results: %v, want present %v", err, tc.again)
			}
			if tc.null {
				// ABA: the null sweep began after the head, the head after
				// the baseline; ABAB: the second head after the null sweep.
				var started []time.Time
				sides := []string{"base", "head", "null"}
				if tc.again {
					sides = append(sides, "head2")
				}
				for _, side := range sides {
					f, err := results.Read(filepath.Join(h.temp, "durabench", side, "results.json"))
					if err != nil {
						t.Fatal(err)
					}
					started = append(started, f.StartedAt)
				}
				for i := 1; i < len(started); i++ {
					if !started[i-1].Before(started[i]) {
						t.Errorf("sweeps %v started %v: not in this order", sides, started)
					}
				}
				if got := strings.Contains(h.log.String(), "head again (ABAB"); got != tc.again {
					t.Errorf("the gate gated a second head: %v, want %v; log:\n%s", got, tc.again, h.log.String())
				}
				if !strings.Contains(h.log.String(), ", null sweep ") {
					t.Errorf("the gate did not get the null sweep; log:\n%s", h.log.String())
				}
			}
			comment, _ := os.ReadFile(filepath.Join(h.temp, "durabench", "comment.md"))
			if tc.null && !strings.Contains(string(comment), "| null Δ | n |") {
				t.Errorf("the comment has no null Δ column:\n%s", firstLines(string(comment), 30))
			}
			t.Logf("the comment:\n%s", firstLines(string(comment), 14))
			summary, _ := os.ReadFile(h.summary)
			if tc.state != "" && !strings.Contains(string(summary), "Durable Workflow Benchmarks") {
				t.Errorf("job summary %q", firstLines(string(summary), 3))
			}
			if !slices.Contains(h.used, "actions/upload-artifact@v4") {
				t.Errorf("no artifact upload; actions used: %v", h.used)
			}
			if tc.interleaved {
				f, err := results.Read(filepath.Join(h.temp, "durabench", "head", "results.json"))
				if err != nil {
					t.Fatal(err)
				}
				if in := f.Plan.Interleave; in == nil || in.Dimension != "targets" || in.A != "eng-base" || in.B != "eng" || in.Rounds != 5 {
					t.Errorf("the head's sweep is not base and head interleaved in the default 5 rounds: %+v", f.Plan.Interleave)
				}
				if !strings.Contains(string(comment), "**`eng` against `eng-base`, paired**") {
					t.Errorf("the comment has no paired section:\n%s", firstLines(string(comment), 40))
				}
			}
			if tc.gitRef && !tc.failed {
				for _, dir := range []string{"bin-head", "bin-base"} {
					if _, err := os.Stat(filepath.Join(h.temp, "durabench", dir, "marker")); err != nil {
						t.Errorf("the build command did not run for %s: %v", dir, err)
					}
				}
				// The head is the workspace's last commit, the baseline its first.
				if ref := h.inputs["baseline-ref"]; !tc.interleaved && !strings.Contains(string(comment), "against the baseline `"+ref[:7]+"`") {
					t.Errorf("the comment is not against the baseline %s:\n%s", ref[:7], firstLines(string(comment), 20))
				}
			}
		})
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// actionHarness plays GitHub's runner for one run of the action.
type actionHarness struct {
	t                 *testing.T
	a                 actionFile
	node              string
	inputs            map[string]string
	github            map[string]any
	temp, ws, summary string
	state             string // the stand-in API's comments, between steps
	outputs           map[string]map[string]string
	used              []string
	log               strings.Builder
	failedStep        bool
}

func newActionHarness(t *testing.T, a actionFile, node string) *actionHarness {
	dir := t.TempDir()
	h := &actionHarness{t: t, a: a, node: node, inputs: map[string]string{}, outputs: map[string]map[string]string{},
		temp: filepath.Join(dir, "runner-temp"), ws: filepath.Join(dir, "workspace")}
	for name, in := range a.Inputs {
		h.inputs[name] = in.Default
	}
	root, _ := filepath.Abs(repoRoot)
	h.github = map[string]any{"action_path": root, "token": "t0k3n", "sha": "0123456789abcdef", "server_url": "https://github.example",
		"repository": "o/r", "run_id": "42", "event_name": "push", "event": map[string]any{}}
	h.summary = filepath.Join(dir, "summary.md")
	h.state = filepath.Join(dir, "api.json")
	for _, d := range []string{h.temp, h.ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The cache restores the binary: durabench as built for these tests.
	binDir := filepath.Join(h.temp, "durabench-bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(binDir, "durabench")); err != nil {
		t.Fatal(err)
	}
	// Someone else's comment is already on the pull request.
	if err := os.WriteFile(h.state, []byte(`{"comments":[{"id":7,"body":"LGTM"}],"calls":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return h
}

// gitWorkspace makes the workspace a repository of two commits with a
// sweep file and returns the first commit, the baseline.
func (h *actionHarness) gitWorkspace(flags string) string {
	t := h.t
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = h.ws
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", ".")
	if err := os.MkdirAll(filepath.Join(h.ws, "bench"), 0o755); err != nil {
		t.Fatal(err)
	}
	yaml := "worlds: [sim]\nprofiles: [lan]\nbranches: [8]\nversions: [baseline]\nswitches: [none]\nreps: 4\nwarmup: 0\n"
	if err := os.WriteFile(filepath.Join(h.ws, "bench", "sweep.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "base")
	base := git("rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(h.ws, "README"), []byte("head\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "head")
	return base
}

// run runs every step; it returns whether the job failed.
func (h *actionHarness) run() bool {
	for i, s := range h.a.Runs.Steps {
		cond := strings.TrimSpace(s.If)
		if cond == "" {
			cond = "success()"
		}
		cond = strings.TrimSuffix(strings.TrimPrefix(cond, "${{"), "}}")
		if !regexp.MustCompile(`\b(success|failure|always|cancelled)\(\)`).MatchString(cond) {
			cond = "success() && (" + cond + ")" // GitHub's implied status check
		}
		ok, err := h.eval(cond)
		if err != nil {
			h.t.Fatalf("step %d if %q: %v", i+1, s.If, err)
		}
		if !truthy(ok) {
			fmt.Fprintf(&h.log, "step %d (%s%s): skipped\n", i+1, s.ID, s.Uses)
			continue
		}
		env := os.Environ()
		for k, v := range s.Env {
			env = append(env, k+"="+h.interpolate(v))
		}
		var err2 error
		switch {
		case s.Run != "":
			err2 = h.shell(s, env)
		case strings.HasPrefix(s.Uses, "actions/github-script@"):
			err2 = h.githubScript(s, env)
		default:
			h.used = append(h.used, s.Uses)
			fmt.Fprintf(&h.log, "step %d: %s (recorded)\n", i+1, s.Uses)
		}
		if err2 != nil {
			fmt.Fprintf(&h.log, "step %d (%s): FAILED: %v\n", i+1, s.ID, err2)
			h.failedStep = true
		}
	}
	return h.failedStep
}

func (h *actionHarness) shell(s actionStep, env []string) error {
	out := filepath.Join(h.t.TempDir(), "output")
	if err := os.WriteFile(out, nil, 0o644); err != nil {
		return err
	}
	env = append(env, "GITHUB_ACTION_PATH="+h.github["action_path"].(string), "GITHUB_OUTPUT="+out,
		"GITHUB_STEP_SUMMARY="+h.summary, "GITHUB_WORKSPACE="+h.ws, "RUNNER_TEMP="+h.temp, "RUNNER_OS=Linux")
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s.Run)
	cmd.Dir, cmd.Env = h.ws, env
	b, err := cmd.CombinedOutput()
	fmt.Fprintf(&h.log, "$ %s\n%s", s.Run, b)
	if s.ID != "" {
		o, _ := os.ReadFile(out)
		m := map[string]string{}
		for _, line := range strings.Split(string(o), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				m[k] = v
			}
		}
		h.outputs[s.ID] = m
	}
	return err
}

// githubScript runs the step's script under Node the way
// actions/github-script does (an async function of github, context and
// core), with a github that records its calls into the state file.
func (h *actionHarness) githubScript(s actionStep, env []string) error {
	if tok := h.interpolate(s.With["github-token"]); tok != "t0k3n" {
		return fmt.Errorf("github-token %q, want the job's token", tok)
	}
	js := `
const fs = require('fs');
const state = JSON.parse(fs.readFileSync(process.env.API_STATE, 'utf8'));
const github = {
  paginate: async (fn, args) => fn(args),
  rest: { issues: {
    listComments: () => state.comments.map((c) => ({ ...c })),
    createComment: async ({ body }) => { state.calls.push('create'); state.comments.push({ id: 100 + state.comments.length, body }); },
    updateComment: async ({ comment_id, body }) => { state.calls.push('update ' + comment_id); state.comments.find((c) => c.id === comment_id).body = body; },
  } },
};
const context = { repo: { owner: 'o', repo: 'r' }, issue: { number: 1 } };
const core = { warning: (m) => console.log('warning: ' + m), setFailed: (m) => { console.error(m); process.exitCode = 1; } };
(async () => {
` + s.With["script"] + `
})().then(() => fs.writeFileSync(process.env.API_STATE, JSON.stringify(state)))
  .catch((e) => { console.error(e); process.exit(1); });
`
	cmd := exec.Command(h.node, "-e", js)
	cmd.Dir, cmd.Env = h.ws, append(env, "API_STATE="+h.state)
	b, err := cmd.CombinedOutput()
	fmt.Fprintf(&h.log, "github-script:\n%s", b)
	return err
}

type apiState struct {
	Comments []struct {
		ID   int
		Body string
	}
	Calls []string
}

func (h *actionHarness) api() apiState {
	var st apiState
	b, err := os.ReadFile(h.state)
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

func (h *actionHarness) calls() []string { return h.api().Calls }

// sticky is the body of the durabench comment ("" when none was posted);
// the other comment must be left as it was.
func (h *actionHarness) sticky() string {
	st := h.api()
	body := ""
	for _, c := range st.Comments {
		switch {
		case c.ID == 7 && c.Body != "LGTM":
			h.t.Errorf("someone else's comment was changed: %q", c.Body)
		case c.ID != 7:
			if body != "" {
				h.t.Errorf("two durabench comments")
			}
			body = c.Body
		}
	}
	return body
}

var exprRe = regexp.MustCompile(`\$\{\{(.*?)\}\}`)

// interpolate replaces every ${{ expr }} of s.
func (h *actionHarness) interpolate(s string) string {
	return exprRe.ReplaceAllStringFunc(s, func(m string) string {
		v, err := h.eval(exprRe.FindStringSubmatch(m)[1])
		if err != nil {
			h.t.Fatalf("%s: %v", m, err)
		}
		switch x := v.(type) {
		case nil:
			return ""
		case bool:
			return fmt.Sprint(x)
		}
		return v.(string)
	})
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	}
	return true
}

// eval evaluates a GitHub Actions expression: string literals, true and
// false, the contexts inputs, github, runner and steps, the status
// functions, ==, !=, !, && and || (returning an operand, as GitHub's do),
// and parentheses — what action.yml uses.
func (h *actionHarness) eval(src string) (any, error) {
	re := regexp.MustCompile(`\s*('(?:[^']|'')*'|&&|\|\||==|!=|!|\(|\)|[A-Za-z_][A-Za-z0-9_.\-]*(?:\(\))?)`)
	if left := strings.TrimSpace(re.ReplaceAllString(src, "")); left != "" {
		return nil, fmt.Errorf("cannot parse %q in %q", left, src)
	}
	var rest []string
	for _, m := range re.FindAllStringSubmatch(src, -1) {
		rest = append(rest, m[1])
	}
	p := &exprParser{h: h, toks: rest}
	v, err := p.or()
	if err == nil && p.i != len(p.toks) {
		err = fmt.Errorf("trailing %q", p.toks[p.i:])
	}
	return v, err
}

type exprParser struct {
	h    *actionHarness
	toks []string
	i    int
}

func (p *exprParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *exprParser) or() (any, error) {
	v, err := p.and()
	for err == nil && p.peek() == "||" {
		p.i++
		var r any
		if r, err = p.and(); !truthy(v) {
			v = r
		}
	}
	return v, err
}

func (p *exprParser) and() (any, error) {
	v, err := p.unary()
	for err == nil && p.peek() == "&&" {
		p.i++
		var r any
		if r, err = p.unary(); truthy(v) {
			v = r
		}
	}
	return v, err
}

func (p *exprParser) unary() (any, error) {
	if p.peek() == "!" {
		p.i++
		v, err := p.unary()
		return !truthy(v), err
	}
	l, err := p.primary()
	if err != nil {
		return nil, err
	}
	if op := p.peek(); op == "==" || op == "!=" {
		p.i++
		r, err := p.primary()
		if err != nil {
			return nil, err
		}
		eq := fmt.Sprint(norm(l)) == fmt.Sprint(norm(r))
		return eq == (op == "=="), nil
	}
	return l, nil
}

func norm(v any) any {
	if v == nil {
		return ""
	}
	return v
}

func (p *exprParser) primary() (any, error) {
	tok := p.peek()
	p.i++
	switch {
	case tok == "(":
		v, err := p.or()
		if p.peek() != ")" {
			return nil, errors.New("missing )")
		}
		p.i++
		return v, err
	case strings.HasPrefix(tok, "'"):
		return strings.ReplaceAll(tok[1:len(tok)-1], "''", "'"), nil
	case tok == "true" || tok == "false":
		return tok == "true", nil
	case tok == "always()":
		return true, nil
	case tok == "success()":
		return !p.h.failedStep, nil
	case tok == "failure()":
		return p.h.failedStep, nil
	case tok == "cancelled()":
		return false, nil
	case tok == "":
		return nil, errors.New("unexpected end")
	}
	path := strings.Split(tok, ".")
	switch path[0] {
	case "inputs":
		v, ok := p.h.inputs[path[1]]
		if !ok {
			return nil, fmt.Errorf("no input %s", path[1])
		}
		return p.h.interpolate(v), nil // a default may be an expression
	case "runner":
		return map[string]any{"temp": p.h.temp, "os": "Linux"}[path[1]], nil
	case "steps":
		if len(path) != 4 || path[2] != "outputs" {
			return nil, fmt.Errorf("%s: not steps.ID.outputs.NAME", tok)
		}
		return p.h.outputs[path[1]][path[3]], nil
	case "github":
		var v any = p.h.github
		for _, k := range path[1:] {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, nil
			}
			v = m[k]
		}
		return v, nil
	}
	return nil, fmt.Errorf("unknown %q", tok)
}
