package pgserver_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/durabench/durabench/world/postgres/pgserver"
)

// TestMain doubles as the child of TestRemovedWhenTheCallerDies: with
// PGSERVER_CHILD set, it starts a server, prints its directory and pid,
// and waits to be killed (PGSERVER_CHILD=1); or starts one in the
// directory PGSERVER_TMP and waits to be killed during it (=initdb).
func TestMain(m *testing.M) {
	if os.Getenv("PGSERVER_CHILD") == "initdb" {
		_, err := pgserver.Start(context.Background(), pgserver.Options{NoFsync: true, TempDir: os.Getenv("PGSERVER_TMP")})
		fmt.Println("started", err)
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	if os.Getenv("PGSERVER_CHILD") == "1" {
		s, err := pgserver.Start(context.Background(), pgserver.Options{NoFsync: true})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(s.Dir(), s.PID())
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func needBinaries(t *testing.T) {
	t.Helper()
	if _, err := pgserver.FindBinaries(); err != nil {
		t.Skipf("skipped: %v", err)
	}
}

func show(t *testing.T, url, setting string) string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v string
	if err := c.QueryRow(ctx, "SHOW "+setting).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestStartStop: a started server answers on loopback with fsync on by
// default (off with NoFsync); Stop removes its directory and its process.
func TestStartStop(t *testing.T) {
	needBinaries(t)
	for _, noFsync := range []bool{false, true} {
		s, err := pgserver.Start(context.Background(), pgserver.Options{NoFsync: noFsync})
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{false: "on", true: "off"}[noFsync]
		if got := show(t, s.URL(), "fsync"); got != want {
			t.Errorf("NoFsync %v: fsync = %s, want %s", noFsync, got, want)
		}
		if got := show(t, s.URL(), "listen_addresses"); got != "127.0.0.1" {
			t.Errorf("listen_addresses = %s", got)
		}
		if !strings.Contains(s.Version(), "PostgreSQL") {
			t.Errorf("Version = %q", s.Version())
		}
		stopGone(t, s, "postmaster")
		if err := s.Stop(); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	}
}

// TestRemovedWhenTheCallerDies: a process that started a server and is
// killed (SIGKILL: no chance to clean up) leaves neither the server nor its
// directory behind.
func TestRemovedWhenTheCallerDies(t *testing.T) {
	needBinaries(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "PGSERVER_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("child: %v", err)
	}
	var dir string
	var pid int
	if _, err := fmt.Sscan(line, &dir, &pid); err != nil {
		cmd.Process.Kill()
		t.Fatalf("child said %q", line)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("server dir: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, statErr := os.Stat(dir)
		gone := errors.Is(statErr, os.ErrNotExist) && syscall.Kill(pid, 0) != nil
		if gone {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after its caller died: dir %s (%v), postmaster %d alive %v", dir, statErr, pid, syscall.Kill(pid, 0) == nil)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reachableTemp is a directory, removed after the test, that the
// server's account can reach and write (it is not root's when durabench
// runs as root, and t.TempDir's parent is root's only).
func reachableTemp(t *testing.T) string {
	t.Helper()
	tmp, err := os.MkdirTemp("/tmp", "pgserver-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o777); err != nil {
		t.Fatal(err)
	}
	return tmp
}

// TestRemovedWhenKilledDuringInitdb: a process killed while its server's
// cluster is being made (initdb takes about a second) leaves no directory
// behind either.
func TestRemovedWhenKilledDuringInitdb(t *testing.T) {
	needBinaries(t)
	tmp := reachableTemp(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "PGSERVER_CHILD=initdb", "PGSERVER_TMP="+tmp)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Kill it as soon as its directory exists, before initdb is done.
	var dir string
	for end := time.Now().Add(20 * time.Second); dir == ""; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no server directory appeared in 20 s")
		}
		if m, _ := filepath.Glob(filepath.Join(tmp, "durabench-pg-*")); len(m) > 0 {
			dir = m[0]
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err == nil {
		t.Log("initdb was done when the caller was killed; the test did not test the window")
	}
	cmd.Process.Kill()
	cmd.Wait()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left, _ := os.ReadDir(tmp)
		if len(left) == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("20 s after its caller was killed during initdb: %s holds %v", tmp, left)
		}
	}
}

// TestStartCancelled: a start whose context ends during initdb (Ctrl-C
// while a sweep starts its server) returns the context's error and leaves
// no directory.
func TestStartCancelled(t *testing.T) {
	needBinaries(t)
	tmp := reachableTemp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	s, err := pgserver.Start(ctx, pgserver.Options{NoFsync: true, TempDir: tmp})
	if err == nil {
		s.Stop()
		t.Skip("the server started within 300 ms: nothing was cancelled")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start: %v, want the context's deadline", err)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("a cancelled start left %v", left)
	}
}

// TestKill: Kill ends the server like a crash; Stop still cleans up.
func TestKill(t *testing.T) {
	needBinaries(t)
	s, c := startConnected(t, pgserver.Options{NoFsync: true})
	ctx := context.Background()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(ctx) == nil {
		if time.Now().After(deadline) {
			t.Fatal("connection still answers 10 s after the server was killed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there: %v", s.Dir(), err)
	}
}

func TestFindBinaries(t *testing.T) {
	dir, err := pgserver.FindBinaries()
	if errors.Is(err, pgserver.ErrNotInstalled) {
		if !strings.Contains(err.Error(), pgserver.InstallHint) {
			t.Errorf("error does not say how to install: %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
	if err != nil || dir == "" {
		t.Fatalf("FindBinaries = %q, %v", dir, err)
	}
}

// TestRestart: a restart (fast shutdown, then the same data directory and
// port) ends open sessions, keeps every committed row, and gives a new
// postmaster; Stop still removes it all.
func TestRestart(t *testing.T) {
	needBinaries(t)
	s, c := startConnected(t, pgserver.Options{})
	ctx := context.Background()
	if _, err := c.Exec(ctx, "CREATE TABLE kept (n int); INSERT INTO kept SELECT generate_series(1, 100)"); err != nil {
		t.Fatal(err)
	}
	before := s.PID()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if s.PID() == before || syscall.Kill(before, 0) == nil {
		t.Errorf("postmaster %d still runs after Restart (now %d)", before, s.PID())
	}
	if c.Ping(ctx) == nil {
		t.Error("a session opened before the restart still answers")
	}
	c2, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		t.Fatalf("connect after Restart: %v", err)
	}
	defer c2.Close(ctx)
	var n int
	if err := c2.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 100 {
		t.Fatalf("rows after Restart: %d, %v; want 100", n, err)
	}
	stopGone(t, s, "restarted postmaster")
}

// startConnected starts a server with opt, stopped when the test ends, and
// opens a session to it.
func startConnected(t *testing.T, opt pgserver.Options) (*pgserver.Server, *pgx.Conn) {
	t.Helper()
	s, err := pgserver.Start(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	c, err := pgx.Connect(context.Background(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// stopGone stops s and checks that its data directory and its postmaster
// (named what in the error) are gone.
func stopGone(t *testing.T, s *pgserver.Server, what string) {
	t.Helper()
	pid := s.PID()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there after Stop: %v", s.Dir(), err)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("%s %d still runs after Stop", what, pid)
	}
}
