package reporters

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
)

// workflowPath is the CI workflow that posts Markdown's GitHub comment.
var workflowPath = filepath.Join("..", ".github", "workflows", "benchmark.yml")

// TestWorkflowLints runs the real actionlint linter over the benchmark
// workflow (and shellcheck over its scripts when it is installed): any
// finding fails the test.
func TestWorkflowLints(t *testing.T) {
	var out bytes.Buffer
	opts := &actionlint.LinterOptions{}
	if sc, err := exec.LookPath("shellcheck"); err == nil {
		opts.Shellcheck = sc
	} else {
		t.Log("shellcheck not installed: run: scripts are not shell-checked")
	}
	l, err := actionlint.NewLinter(&out, opts)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.LintFile(workflowPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Errorf("%s:%d:%d: %s [%s]", workflowPath, e.Line, e.Column, e.Message, e.Kind)
	}
}

// TestWorkflowMatchesReporters checks the workflow finds the comment by the
// marker Markdown writes, and runs the commands the report pipeline needs.
func TestWorkflowMatchesReporters(t *testing.T) {
	b, err := os.ReadFile(workflowPath)
	if err != nil {
		t.Fatal(err)
	}
	wf := string(b)
	for _, want := range []string{
		"'" + Marker + "'",
		"sweep \"${flags[@]}\" --out out/head",
		"--world sim",
		"git worktree add",
		"--format github",
		"--png out/charts",
		"$GITHUB_STEP_SUMMARY",
		"actions/upload-artifact",
		"gate out/head/results.json",
		"--rules examples/gate-rules.txt",
		"history add out/head/results.json",
	} {
		if !strings.Contains(wf, want) {
			t.Errorf("workflow lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join("..", "examples", "gate-rules.txt")); err != nil {
		t.Errorf("the workflow's gate rules: %v", err)
	}
}
