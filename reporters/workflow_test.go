package reporters

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// workflowPath is the CI workflow that posts Markdown's GitHub comment
// (make lint-workflows runs actionlint over it).
var workflowPath = filepath.Join("..", ".github", "workflows", "benchmark.yml")

// stickyScript posts the sticky comment for the workflow.
var stickyScript = filepath.Join("..", ".github", "scripts", "sticky-comment.js")

// TestWorkflowMatchesReporters checks the workflow finds the comment by the
// marker Markdown writes, and runs the commands the report pipeline needs.
func TestWorkflowMatchesReporters(t *testing.T) {
	b, err := os.ReadFile(workflowPath)
	if err != nil {
		t.Fatal(err)
	}
	wf := string(b)
	script, err := os.ReadFile(stickyScript)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "'"+Marker+"'") {
		t.Errorf("%s does not look for the marker %s", stickyScript, Marker)
	}
	for _, want := range []string{
		"require('./.github/scripts/sticky-comment.js')",
		"report --status running",
		"report --status failed",
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

// TestStickyCommentScript runs the workflow's comment script under Node
// against a recording stand-in for the GitHub API: the first post creates
// the comment, later posts (running, then completed) update that one comment
// and leave other people's comments alone.
func TestStickyCommentScript(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	dir := t.TempDir()
	var running, done bytes.Buffer
	if err := StatusComment(&running, StatusRunning, "abcdef0123", "https://ci/run/1"); err != nil {
		t.Fatal(err)
	}
	done.WriteString(Marker + "\n## completed\n")
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	runningMD := write("running.md", running.Bytes())
	doneMD := write("done.md", done.Bytes())
	plain := write("plain.md", []byte("no marker\n"))
	abs, err := filepath.Abs(stickyScript)
	if err != nil {
		t.Fatal(err)
	}
	js := `
const post = require(process.argv[1]);
const comments = [{ id: 7, body: 'LGTM' }];
const calls = [];
let failed = '';
const github = {
  paginate: async (fn, args) => fn(args),
  rest: { issues: {
    listComments: () => comments.map((c) => ({ ...c })),
    createComment: async ({ body }) => { calls.push('create'); comments.push({ id: 100 + comments.length, body }); },
    updateComment: async ({ comment_id, body }) => { calls.push('update ' + comment_id); comments.find((c) => c.id === comment_id).body = body; },
  } },
};
const context = { repo: { owner: 'o', repo: 'r' }, issue: { number: 1 } };
const core = { warning: () => {}, setFailed: (m) => { failed = m; } };
(async () => {
  await post({ github, context, core }, process.argv[2]);
  await post({ github, context, core }, process.argv[3]);
  await post({ github, context, core }, process.argv[4]);
  console.log(JSON.stringify({ calls, comments, failed: failed !== '' }));
})().catch((e) => { console.error(e); process.exit(1); });
`
	out, err := exec.Command(node, "-e", js, abs, runningMD, doneMD, plain).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got struct {
		Calls    []string
		Comments []struct {
			ID   int
			Body string
		}
		Failed bool
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Join(got.Calls, ",") != "create,update 101" {
		t.Errorf("calls %v, want one create then one update of the same comment", got.Calls)
	}
	if len(got.Comments) != 2 || got.Comments[0].Body != "LGTM" || got.Comments[1].Body != done.String() {
		t.Errorf("comments after running → completed: %+v", got.Comments)
	}
	if !got.Failed {
		t.Error("a body without the marker was not refused")
	}
}
