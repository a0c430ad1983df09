package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// adapter writes an adapter executable, durabench-target-NAME, into a new
// directory: it records its pid in pidFile and serves durabench's built-in
// engine over the target protocol (durabench target serve reference). It
// returns the directory (to put on PATH).
func adapter(t *testing.T, name, pidFile string) string {
	t.Helper()
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\necho $$ > %q\necho \"adapter %s: serving the reference engine\" >&2\nexec %q target serve \"$@\" reference\n",
		pidFile, name, bin)
	if err := os.WriteFile(filepath.Join(dir, "durabench-target-"+name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAdapterKilled: a sweep of two cells on a target adapter; mid-way
// through the second cell the adapter is SIGKILLed. The first cell is kept;
// the second cell's runs in flight and the ones after are counted failed,
// each with the adapter's exit and its last log lines; the sweep stops with
// exit 3 (the target is gone), and --resume runs the missing cells with a
// new adapter.
func TestAdapterKilled(t *testing.T) {
	needChaos(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "adapter.pid")
	path := adapter(t, "chaosref", pidFile)
	env := []string{"PATH=" + path + string(os.PathListSeparator) + os.Getenv("PATH")}
	const reps = 30
	args := []string{"--targets", "chaosref", "--branches", "16,32,64", "--option", "body=300ms",
		"--reps", fmt.Sprint(reps), "--warmup", "0", "--pace", "open", "--rate", "10", "--cell-timeout", "1m"}
	s := startSweep(t, dir, env, args...)
	inFlight := s.waitStarted(t, reps+10, 2*time.Minute)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	t.Logf("SIGKILL the adapter (pid %d) with %d runs in flight", pid, inFlight)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	code := s.wait(t, 3*time.Minute)
	t.Logf("what the user sees (stderr):\n%s", s.stderr.String())
	f := readResults(t, s.out)
	if code != 3 || !f.Partial || len(f.Cells) != 2 || len(f.Missing) != 1 {
		t.Fatalf("exit %d, partial %v, %d cells, missing %v; want exit 3, the first two cells kept, the third missing; stderr:\n%s",
			code, f.Partial, len(f.Cells), f.Missing, s.stderr.String())
	}
	if !strings.Contains(s.stderr.String(), "adapter durabench-target-chaosref exited (signal: killed)") {
		t.Errorf("stderr does not say the adapter was killed:\n%s", s.stderr.String())
	}
	if strings.Contains(s.stderr.String(), "interrupted") {
		t.Errorf("stderr says the sweep was interrupted; nobody interrupted it:\n%s", s.stderr.String())
	}
	if k := account(f.Cells[0], reps); k.Finished != reps {
		t.Errorf("first cell: %s; want every run finished", k)
	}
	k := account(f.Cells[1], reps)
	record(t, figure{Case: "target adapter SIGKILLed mid-cell", InFlight: inFlight, Tally: k, Exit: code,
		Note: "runs failed with the adapter's exit and last log lines; the sweep stops after the cell (exit 3), --resume runs the rest with a new adapter"})
	if k.Lost != 0 || k.Runs != reps || k.Failed == 0 || k.Unfinished != 0 {
		t.Errorf("second cell: %s; want every run finished or failed", k)
	}
	for _, fr := range f.Cells[1].FailedRuns {
		if !strings.Contains(fr.Error, "exited (signal: killed)") || !strings.Contains(fr.Error, "adapter chaosref: serving the reference engine") {
			t.Fatalf("failed run %s does not carry the adapter's exit and log: %s", fr.Run, fr.Error)
		}
	}
	r := startSweep(t, dir, env, append(args, "--resume", s.out)...)
	if rc := r.wait(t, 3*time.Minute); rc != 0 {
		t.Fatalf("--resume: exit %d; stderr:\n%s", rc, r.stderr.String())
	}
	f = readResults(t, s.out)
	if f.Partial || len(f.Cells) != 3 {
		t.Fatalf("after --resume: partial %v, %d cells", f.Partial, len(f.Cells))
	}
	if k := account(f.Cells[2], reps); k.Finished != reps {
		t.Errorf("resumed cell: %s; want every run finished", k)
	}
}
