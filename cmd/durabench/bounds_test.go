package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestPlanTooBigForMemory: a plan whose cells cannot fit in memory fails
// before anything runs — one line naming the flag or the sweep file's
// field, and the limit, exit 2 — where it used to die in a Go out-of-memory
// crash; a big plan that fits runs.
func TestPlanTooBigForMemory(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	write(t, dir, "big.yaml", "worlds: [mem]\nbranches: [20, 1000000000]\nreps: 1\nmax_memory: 1GiB\n")
	cases := []struct {
		args []string
		want *regexp.Regexp
	}{
		// The command of issue 14, at the default limit (3/4 of this
		// machine's available memory).
		{[]string{"sweep", "--world", "mem", "--branches", "1000000000", "--reps", "1"}, regexp.MustCompile(`^durabench: --branches 1000000000: ` +
			`too big for memory: 3 runs × 1000000000 branches on mem need about 33\.5 TiB at 12 KiB each, ` +
			`over the limit of [0-9.]+ [MGT]iB \(3/4 of the memory available; --max-memory sets it\); at most [0-9]+ branches fit\n$`)},
		{[]string{"sweep", "--world", "mem", "--branches", "1000000000", "--reps", "1", "--max-memory", "1GiB"}, regexp.MustCompile(`^` + regexp.QuoteMeta(
			"durabench: --branches 1000000000: too big for memory: 3 runs × 1000000000 branches on mem need about 33.5 TiB at 12 KiB each, "+
				"over the limit of 1 GiB (--max-memory); at most 29127 branches fit\n") + `$`)},
		{[]string{"sweep", "--world", "mem", "--reps", "100000000", "--max-memory", "1GiB"}, regexp.MustCompile(`^` + regexp.QuoteMeta(
			"durabench: --reps 100000000: too big for memory: 100000002 runs × 20 branches on mem need about 22.4 TiB at 12 KiB each, "+
				"over the limit of 1 GiB (--max-memory); at most 4367 reps fit (with 2 warm-ups)\n") + `$`)},
		{[]string{"sweep", "-f", "big.yaml"}, regexp.MustCompile(`^` + regexp.QuoteMeta(
			"durabench: big.yaml:2: branches: too big for memory: 3 runs × 1000000000 branches on mem need about 33.5 TiB at 12 KiB each, "+
				"over the limit of 1 GiB (--max-memory); at most 29127 branches fit\n") + `$`)},
	}
	for _, c := range cases {
		r := durabench(t, dir, append(c.args, "--out", out)...)
		if r.code != 2 || !c.want.MatchString(r.stderr) || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %s", c.args, r.code, r.stdout, r.stderr, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: %s was created", c.args, out)
		}
	}
	// 10,000 branches fit: the cell runs.
	r := durabench(t, dir, "sweep", "--world", "mem", "--branches", "10000", "--versions", "pending-count", "--switches", "none",
		"--reps", "1", "--warmup", "0", "--quiet", "--out", out)
	if r.code != 0 {
		t.Errorf("10,000 branches: exit %d, stderr %q", r.code, r.stderr)
	}
}
