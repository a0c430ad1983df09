package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimFindsTheMintOrderedRaceAndTheGuardFixesIt runs the real binary:
// on the mint-ordered log some fan-outs lose their continuation, on the
// append-only log none do, and with the guard enforced none do either. A
// failure's trace replays it exactly.
func TestSimFindsTheMintOrderedRaceAndTheGuardFixesIt(t *testing.T) {
	dir := t.TempDir()
	r := durabench(t, dir, "sim", "--seeds", "10", "--scenario", "fanout-2,fanout-8", "--out", "traces")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(r.stdout, "\n")
	if !strings.HasPrefix(lines[0], "🟠 Mint-ordered log — ") || strings.Contains(lines[0], " 0 fail") {
		t.Fatalf("mint-ordered should fail some cases:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "🟢 Append-only log — 0 fail of 100 total") {
		t.Fatalf("append-only should pass every case:\n%s", r.stdout)
	}
	traces, _ := filepath.Glob(filepath.Join(dir, "traces", "*.trace"))
	if len(traces) == 0 {
		t.Fatal("no trace written for the failures")
	}
	// The trace names the command that replays it; running it breaks the
	// same invariant again.
	body, err := os.ReadFile(traces[0])
	if err != nil {
		t.Fatal(err)
	}
	var replay string
	for _, l := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(l, "# replay: durabench "); ok {
			replay = rest
		}
	}
	if replay == "" {
		t.Fatalf("trace has no replay line:\n%s", body[:min(len(body), 400)])
	}
	rr := durabench(t, dir, append(strings.Fields(replay), "--out", "again")...)
	if rr.code != 0 || !strings.Contains(rr.stdout, "FAIL: ") {
		t.Fatalf("replay did not reproduce the failure (exit %d):\n%s%s", rr.code, rr.stdout, rr.stderr)
	}
	again, _ := filepath.Glob(filepath.Join(dir, "again", "*.trace"))
	if len(again) != 1 {
		t.Fatalf("replay wrote %d traces", len(again))
	}
	body2, _ := os.ReadFile(again[0])
	if string(body2) != string(body) {
		t.Error("the replayed trace differs from the explored one")
	}

	g := durabench(t, dir, "sim", "--seeds", "10", "--scenario", "fanout-2,fanout-8", "--guard", "--gate", "--out", "guarded")
	if g.code != 0 || !strings.Contains(g.stdout, "🟢 Mint-ordered log — 0 fail of 100 total") {
		t.Fatalf("with the guard, mint-ordered should pass (exit %d):\n%s%s", g.code, g.stdout, g.stderr)
	}
	if u := durabench(t, dir, "sim", "--log", "sideways"); u.code != 2 || !strings.Contains(u.stderr, "--log") {
		t.Fatalf("bad --log: exit %d %q", u.code, u.stderr)
	}
}
