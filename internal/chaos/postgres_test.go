package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/world/postgres/pgserver"
)

// TestPostgresRestarted: a sweep on the PostgreSQL world; mid-cell the
// server is restarted (fast shutdown, then started again on the same data
// directory). The world reconnects and every run of the cell finishes or is
// counted with its reason, none lost; a sweep that stopped instead (exit 3)
// is finished by --resume.
func TestPostgresRestarted(t *testing.T) {
	needChaos(t)
	if _, err := pgserver.FindBinaries(); err != nil {
		t.Fatal(err) // make chaos needs them; .ci/run installs them
	}
	srv, err := pgserver.Start(ctxT(t), pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	const reps = 60
	dir := t.TempDir()
	args := []string{"--world", "postgres", "--postgres-url", srv.URL(),
		"--branches", "16", "--option", "body=300ms", "--versions", "pending-count", "--switches", "none",
		"--reps", fmt.Sprint(reps), "--warmup", "0", "--pace", "open", "--rate", "10",
		"--visibility-timeout", "5s", "--cell-timeout", "2m"}
	s := startSweep(t, dir, nil, args...)
	inFlight := s.waitStarted(t, 20, 2*time.Minute)
	began := time.Now()
	if err := srv.Restart(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL restarted in %v with %d runs in flight", time.Since(began).Round(time.Millisecond), inFlight)
	f, code, note := finishOneCell(t, s, dir, nil, args)
	k := account(f.Cells[0], reps)
	if f.Cells[0].WorldIncidents != nil {
		note += fmt.Sprintf(" last incident: %.120s", f.Cells[0].WorldIncidents.Last)
	}
	record(t, figure{Case: "PostgreSQL: restart mid-cell (fast shutdown, same data dir)", InFlight: inFlight, Tally: k, Exit: code, Note: note})
	for _, fr := range f.Cells[0].FailedRuns {
		t.Logf("failed: %s: %s", fr.Run, fr.Error)
	}
	if k.Lost != 0 || k.Runs != reps || k.Unfinished != 0 {
		t.Errorf("%s: want every run accounted for, none unfinished", k)
	}
	// Committed work is never lost: a run whose creation committed
	// finishes; the runs that fail are those the server refused to create
	// while it was down, with that reason.
	for _, fr := range f.Cells[0].FailedRuns {
		if !refusedStart(fr.Error) {
			t.Errorf("run %s failed after it was created: %s", fr.Run, fr.Error)
		}
	}
}

// TestDBOSPostgresRestarted: the DBOS adapter (adapters/dbos, built here) on
// a PostgreSQL server the test started; mid-cell the server is restarted.
// Every run finishes or is counted failed with DBOS's error, none lost.
func TestDBOSPostgresRestarted(t *testing.T) {
	needChaos(t)
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-C", "../../adapters/dbos", "-o", filepath.Join(dir, "durabench-target-dbos"), ".").CombinedOutput(); err != nil {
		t.Fatalf("go build adapters/dbos: %v\n%s", err, out)
	}
	srv, err := pgserver.Start(ctxT(t), pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	const reps = 60
	env := []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")}
	args := []string{"--targets", "dbos --pg-url=" + srv.URL(), "--branches", "16", "--option", "body=300ms",
		"--reps", fmt.Sprint(reps), "--warmup", "0", "--pace", "open", "--rate", "10", "--cell-timeout", "2m"}
	s := startSweep(t, dir, env, args...)
	inFlight := s.waitStarted(t, 20, 3*time.Minute)
	if err := srv.Restart(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	f, code, note := finishOneCell(t, s, dir, env, args)
	k := account(f.Cells[0], reps)
	for i, fr := range f.Cells[0].FailedRuns {
		if i < 3 {
			note += fmt.Sprintf(" a failed run: %.160s", fr.Error)
		}
		t.Logf("failed: %s: %s", fr.Run, fr.Error)
	}
	record(t, figure{Case: "DBOS adapter: its PostgreSQL restarted mid-cell", InFlight: inFlight, Tally: k, Exit: code, Note: note})
	if k.Lost != 0 || k.Runs != reps {
		t.Errorf("%s: want every run accounted for", k)
	}
}

// finishOneCell waits for a one-cell sweep started with args, finishing it
// with --resume when it stopped (exit 3; the note says so), and returns
// its results, its exit code and that note. Any other failure, or a sweep
// without its one complete cell, fails the test.
func finishOneCell(t *testing.T, s *sweepProc, dir string, env, args []string) (f *results.File, code int, note string) {
	t.Helper()
	code = s.wait(t, 4*time.Minute)
	t.Logf("sweep exit %d; stderr:\n%s", code, s.stderr.String())
	f = readResults(t, s.out)
	if code == 3 {
		note = "the sweep stopped (exit 3); --resume finished it"
		r := startSweep(t, dir, env, append(args, "--resume", s.out)...)
		if rc := r.wait(t, 4*time.Minute); rc != 0 {
			t.Fatalf("--resume: exit %d; stderr:\n%s", rc, r.stderr.String())
		}
		f = readResults(t, s.out)
	} else if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, s.stderr.String())
	}
	if len(f.Cells) != 1 || f.Partial {
		t.Fatalf("%d cells, partial %v (%s)", len(f.Cells), f.Partial, f.Error)
	}
	return f, code, note
}
