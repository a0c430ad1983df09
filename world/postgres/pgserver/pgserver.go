// Package pgserver runs a throwaway PostgreSQL server for a benchmark: the
// system's own binaries (initdb and postgres, found on PATH or under
// /usr/lib/postgresql/*/bin), a fresh cluster in a temporary directory,
// listening on a free loopback port, removed when the server is stopped —
// or when the process that started it exits, however it exits (Ctrl-C, a
// crash, SIGKILL).
//
// The server is tuned for a benchmark, not for safety of the data it will
// throw away: no checkpoints during a run, minimal WAL, no parallel query,
// no JIT. fsync stays on by default — a user's server runs with it, and a
// commit's flush is a large part of what a durable engine pays per write;
// Options.NoFsync turns it (and synchronous_commit, full_page_writes) off.
//
// Running as root (CI), initdb and postgres refuse to start; the server then
// runs as the "postgres" user (or "nobody") and its directory belongs to
// that user.
//
// How the clean-up survives the caller: a small shell (the guardian) makes
// the directory and runs initdb and postgres in it, its standard input a
// pipe from this process. When the pipe closes — Stop, or this process
// ending in any way, during initdb too — the guardian stops postgres
// (immediate shutdown) and removes the directory. The
// guardian has its own process group, so a Ctrl-C on the terminal reaches
// only the caller, which can finish cleanly while its server still answers.
package pgserver

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// InstallHint says how to get the binaries on Debian and Ubuntu.
const InstallHint = "apt-get install postgresql"

// ErrNotInstalled: no PostgreSQL server binaries were found. Its message
// says how to install them.
var ErrNotInstalled = errors.New("no PostgreSQL server binaries (initdb, postgres) on PATH or under /usr/lib/postgresql/*/bin: install them (" +
	InstallHint + ") or give the URL of a running server")

// User is the database superuser of a server this package starts (trust
// authentication, loopback only).
const User = "durabench"

// Database is the database a started server's URL names.
const Database = "postgres"

// Options configure Start. Zero values mean defaults.
type Options struct {
	// NoFsync turns fsync, synchronous_commit and full_page_writes off:
	// commits no longer wait for the disk. Faster, and not what a user's
	// server runs. Default: fsync on.
	NoFsync bool
	// BinDir holds initdb and postgres; default: found by FindBinaries.
	BinDir string
	// TempDir is where the server's directory is made (default
	// os.TempDir()).
	TempDir string
	// Settings are more server settings (name -> value), applied after
	// (and so over) the defaults.
	Settings map[string]string
	// StartTimeout bounds initdb plus the start (default 60 s).
	StartTimeout time.Duration
}

// Server is a running throwaway PostgreSQL server.
type Server struct {
	url      string
	dir      string
	port     int
	pid      atomic.Int64 // the postmaster (a restart changes it)
	version  string
	settings []string

	guard    *exec.Cmd
	stdin    io.WriteCloser
	pids     *bufio.Reader // the guardian's stdout: the postmaster's pid, then one per restart
	restarts sync.Mutex
	exited   chan struct{} // closed when the guardian exited
	stopOnce sync.Once
	stopErr  error
}

// URL is the server's connection URL (user durabench, database postgres,
// no password, no TLS).
func (s *Server) URL() string { return s.url }

// Dir is the server's temporary directory (data/ and server.log inside).
func (s *Server) Dir() string { return s.dir }

// Port is the loopback TCP port the server listens on.
func (s *Server) Port() int { return s.port }

// PID is the postmaster's process id.
func (s *Server) PID() int { return int(s.pid.Load()) }

// Version is the output of `postgres --version`.
func (s *Server) Version() string { return s.version }

// Settings are the server settings given on its command line (name=value).
func (s *Server) Settings() []string { return slices.Clone(s.settings) }

// LogPath is the server's log file.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "server.log") }

// initdbOut is where the guardian writes initdb's output.
func (s *Server) initdbOut() string { return filepath.Join(s.dir, "initdb.out") }

// FindBinaries returns the directory holding initdb and postgres: the one
// of initdb on PATH, else the newest /usr/lib/postgresql/<version>/bin (and
// a few other usual places). The error is ErrNotInstalled.
func FindBinaries() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if has(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	var dirs []string
	for _, pat := range []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/usr/local/pgsql/bin"} {
		m, _ := filepath.Glob(pat)
		dirs = append(dirs, m...)
	}
	// Newest major version first: /usr/lib/postgresql/17/bin before 9.6.
	version := func(d string) float64 {
		for _, part := range strings.Split(d, string(filepath.Separator)) {
			part = strings.TrimPrefix(part, "pgsql-")
			if v, err := strconv.ParseFloat(part, 64); err == nil {
				return v
			}
		}
		return 0
	}
	slices.SortStableFunc(dirs, func(a, b string) int {
		va, vb := version(a), version(b)
		switch {
		case va > vb:
			return -1
		case va < vb:
			return 1
		}
		return 0
	})
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	return "", ErrNotInstalled
}

// Start initialises a cluster in a new temporary directory and starts a
// server on a free loopback port. It returns when the server accepts
// connections. The server lives until Stop, or until this process exits.
func Start(ctx context.Context, opt Options) (*Server, error) {
	if opt.BinDir == "" {
		dir, err := FindBinaries()
		if err != nil {
			return nil, err
		}
		opt.BinDir = dir
	}
	if opt.StartTimeout <= 0 {
		opt.StartTimeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, opt.StartTimeout)
	defer cancel()
	// A port picked free can be taken before postgres binds it; try again
	// with another.
	var err error
	for range 3 {
		var s *Server
		s, err = start(ctx, opt)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errBind) || ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

var errBind = errors.New("could not bind its port")

// runAs is the account the server runs as: the caller's, or when the caller
// is root (postgres refuses to run as root) the postgres user's, else
// nobody's.
type runAs struct {
	cred *syscall.Credential // nil: the caller's own
	name string
}

func account() (runAs, error) {
	if os.Geteuid() != 0 {
		return runAs{}, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return runAs{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, name: name}, nil
	}
	return runAs{}, errors.New("pgserver: running as root, and neither a postgres nor a nobody user exists to run the server as (postgres refuses to run as root)")
}

// tempBase is where the server's directory goes: opt.TempDir, or
// os.TempDir() — unless the server's account, which makes the directory,
// could not reach it or write in it (a root-only TMPDIR), then /tmp.
func tempBase(opt Options, as runAs) string {
	if opt.TempDir != "" {
		return opt.TempDir
	}
	base := os.TempDir()
	if as.cred != nil && !(traversable(base) && writableBy(base, as.cred)) {
		return "/tmp"
	}
	return base
}

// writableBy reports whether the account cred may make entries in dir
// (its mode bits: owner, group, others).
func writableBy(dir string, cred *syscall.Credential) bool {
	fi, err := os.Stat(dir)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	perm := fi.Mode().Perm()
	switch {
	case !ok:
		return false
	case st.Uid == cred.Uid:
		return perm&0o300 == 0o300
	case st.Gid == cred.Gid:
		return perm&0o030 == 0o030
	}
	return perm&0o003 == 0o003
}

// traversable reports whether every directory on the way to dir lets
// anyone through.
func traversable(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

func start(ctx context.Context, opt Options) (_ *Server, err error) {
	as, err := account()
	if err != nil {
		return nil, err
	}
	// The directory's name is chosen here, so that Stop removes it
	// whenever the guardian was stopped (it may have made it already).
	var r [8]byte
	if _, err := crand.Read(r[:]); err != nil {
		return nil, fmt.Errorf("pgserver: %w", err)
	}
	base := tempBase(opt, as)
	s := &Server{dir: filepath.Join(base, "durabench-pg-"+hex.EncodeToString(r[:])), exited: make(chan struct{})}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	env := []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "LANG=C", "TZ=UTC"}
	version := exec.CommandContext(ctx, filepath.Join(opt.BinDir, "postgres"), "--version")
	version.Dir, version.Env = base, env
	version.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: as.cred}
	if out, err := version.Output(); err == nil {
		s.version = strings.TrimSpace(string(out))
	}
	// The guardian makes the directory, runs initdb and postgres in it,
	// and removes it: from the directory's first instant to its last, a
	// process watches this one's end (a kill during initdb included).
	guard := exec.Command("/bin/sh", "-c", guardian, "pgserver-guardian", opt.BinDir, s.dir, s.LogPath(), s.initdbOut(), User)
	guard.Dir = base
	guard.Env = env
	// Its own process group: a Ctrl-C on the terminal must not stop the
	// server under a caller that is finishing cleanly.
	guard.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: as.cred}
	if s.stdin, err = guard.StdinPipe(); err != nil {
		return nil, fmt.Errorf("pgserver: guardian: %w", err)
	}
	stdout, err := guard.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("pgserver: guardian: %w", err)
	}
	if err := guard.Start(); err != nil {
		return nil, fmt.Errorf("pgserver: start the guardian shell: %w", err)
	}
	s.guard = guard
	go func() {
		guard.Wait()
		close(s.exited)
	}()
	// A start that outlives ctx ends the guardian's group (initdb
	// included); Stop then removes what it left.
	defer context.AfterFunc(ctx, func() { _ = syscall.Kill(-guard.Process.Pid, syscall.SIGKILL) })()
	s.pids = bufio.NewReader(stdout)
	line, err := s.pids.ReadString('\n')
	switch {
	case err != nil:
		return nil, fmt.Errorf("pgserver: initdb as %s did not finish: %w", or(as.name, "this user"), orCtx(ctx, err))
	case line == "mkdir\n":
		return nil, fmt.Errorf("pgserver: %s could not make a directory in %s", or(as.name, "this user"), base)
	}
	if code := strings.TrimSpace(strings.TrimPrefix(line, "initdb ")); code != "0" {
		out, _ := os.ReadFile(s.initdbOut())
		return nil, fmt.Errorf("pgserver: initdb as %s: exit status %s: %s", or(as.name, "this user"), code, lastLines(string(out), 3))
	}
	if s.port, err = freePort(); err != nil {
		return nil, err
	}
	s.settings = settings(opt, s.port)
	msg := "start\n"
	for _, kv := range s.settings {
		if strings.ContainsAny(kv, "\n\r") {
			return nil, fmt.Errorf("pgserver: setting %q: a line break in a setting", kv)
		}
		msg += kv + "\n"
	}
	if _, err := io.WriteString(s.stdin, msg+".\n"); err != nil {
		return nil, fmt.Errorf("pgserver: guardian: %w", err)
	}
	line, err = s.pids.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("pgserver: the guardian shell did not start postgres: %w", orCtx(ctx, err))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return nil, fmt.Errorf("pgserver: the guardian shell said %q, not a process id", line)
	}
	s.pid.Store(int64(pid))
	s.url = fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", User, s.port, Database)
	return s, s.waitReady(ctx)
}

// orCtx is ctx's error when ctx ended (the guardian was stopped for it),
// err otherwise.
func orCtx(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// guardian is the shell that makes the server's directory, runs initdb
// (--no-sync: the cluster is thrown away, its creation need not survive a
// power cut; the server's own writes still honour fsync) and postgres in
// it and, once its standard input closes, stops postgres and removes the
// directory — at whatever stage its caller ended. $1 the binaries, $2 the
// directory to make, $3 postgres's log, $4 initdb's output, $5 the
// database superuser (the logs are in the directory). It prints "mkdir" when it
// cannot make the directory, else "initdb <exit status>"; then it waits for
// "start", postgres's settings (one per line) and ".", and prints the
// postmaster's pid; a line "restart" then stops postgres with a fast
// shutdown, starts it again on the same data directory and prints the new
// pid. What it prints to a caller that is gone is lost, not fatal.
const guardian = `bin=$1 dir=$2 log=$3 initdbout=$4 user=$5
# A caller that died cannot read what this shell prints: that must not end
# the shell before it removes the directory (initdb and postgres get the
# default back).
trap '' PIPE
if ! mkdir -m 0700 "$dir" 2>/dev/null; then echo mkdir; exit 1; fi
cd "$dir" || exit 1
(trap - PIPE; exec "$bin/initdb" -D "$dir/data" -U "$user" -A trust -E UTF8 --locale=C --no-sync) >"$initdbout" 2>&1 </dev/null
echo "initdb $?"
start() {
  (trap - PIPE; exec "$bin/postgres" -D "$dir/data" "$@") >>"$log" 2>&1 </dev/null &
  pid=$!
  echo "$pid"
}
if IFS= read -r line && [ "$line" = start ]; then
  set --
  ok=
  while IFS= read -r kv; do
    if [ "$kv" = . ]; then ok=1; break; fi
    set -- "$@" -c "$kv"
  done
  if [ -n "$ok" ]; then
    start "$@"
    while IFS= read -r line; do
      if [ "$line" = restart ]; then
        kill -INT "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        start "$@"
      fi
    done
    kill -QUIT "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
fi
cd /
rm -rf "$dir"
`

// settings are the server's settings for a benchmark.
func settings(opt Options, port int) []string {
	set := [][2]string{
		{"listen_addresses", "127.0.0.1"},
		{"port", strconv.Itoa(port)},
		{"unix_socket_directories", ""}, // TCP only: no socket in a shared directory
		{"max_connections", "300"},
		{"shared_buffers", "256MB"},
		// No checkpoint in the middle of a cell: they come every 30 min or
		// 4 GB of WAL.
		{"max_wal_size", "4GB"},
		{"checkpoint_timeout", "30min"},
		{"wal_level", "minimal"},
		{"max_wal_senders", "0"},
		// Queries are small and many: no parallel workers, no JIT.
		{"max_parallel_workers_per_gather", "0"},
		{"jit", "off"},
		// The queue table churns; vacuum it often.
		{"autovacuum_naptime", "5s"},
		{"log_checkpoints", "off"},
		{"log_min_messages", "warning"},
	}
	if opt.NoFsync {
		set = append(set, [2]string{"fsync", "off"}, [2]string{"synchronous_commit", "off"}, [2]string{"full_page_writes", "off"})
	} else {
		set = append(set, [2]string{"fsync", "on"})
	}
	names := make([]string, 0, len(opt.Settings))
	for k := range opt.Settings {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		set = append(set, [2]string{k, opt.Settings[k]})
	}
	out := make([]string, len(set))
	for i, kv := range set {
		out[i] = kv[0] + "=" + kv[1]
	}
	return out
}

// waitReady waits until the server accepts a connection, or fails with
// the end of its log when postgres exited.
func (s *Server) waitReady(ctx context.Context) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := pgconn.Connect(cctx, s.url)
		cancel()
		if err == nil {
			return c.Close(ctx)
		}
		if !s.alive() {
			log, _ := os.ReadFile(s.LogPath())
			if strings.Contains(string(log), "could not bind") || strings.Contains(string(log), "could not create any TCP/IP sockets") {
				return fmt.Errorf("pgserver: postgres %w %d: %s", errBind, s.port, lastLines(string(log), 3))
			}
			return fmt.Errorf("pgserver: postgres exited while starting: %s", lastLines(string(log), 5))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgserver: postgres did not accept connections on port %d: %w", s.port, ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// alive reports whether the postmaster runs.
func (s *Server) alive() bool {
	pid := s.PID()
	if pid <= 0 {
		return false
	}
	// A zombie (exited, not yet reaped by the guardian) counts as gone.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return false
		}
		return true
	}
	return syscall.Kill(pid, 0) == nil
}

// Kill ends the postmaster with SIGKILL, as a crash would; its backends
// notice and exit, and clients see their connections drop. The directory
// stays until Stop (or this process's exit).
func (s *Server) Kill() error {
	pid := s.PID()
	if pid <= 0 {
		return errors.New("pgserver: no server")
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// Restart stops the server with a fast shutdown (sessions are ended,
// committed transactions stay: a clean checkpoint) and starts it again on the
// same data directory and port, as an operator restarting PostgreSQL does.
// It returns when the server accepts connections again.
func (s *Server) Restart(ctx context.Context) error {
	s.restarts.Lock()
	defer s.restarts.Unlock()
	if s.guard == nil {
		return errors.New("pgserver: no server")
	}
	if _, err := io.WriteString(s.stdin, "restart\n"); err != nil {
		return fmt.Errorf("pgserver: restart: %w", err)
	}
	line, err := s.pids.ReadString('\n')
	if err != nil {
		return fmt.Errorf("pgserver: restart: the guardian shell did not start postgres again: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return fmt.Errorf("pgserver: restart: the guardian shell said %q, not a process id", line)
	}
	s.pid.Store(int64(pid))
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return s.waitReady(ctx)
}

// Stop stops the server (immediate shutdown: it is thrown away) and
// removes its directory. A second Stop does nothing.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = s.stop() })
	return s.stopErr
}

func (s *Server) stop() error {
	if s.guard != nil {
		s.stdin.Close()
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			// The guardian hangs: end its whole group (postgres included).
			_ = syscall.Kill(-s.guard.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
	}
	// The guardian removed the directory; this is for the cases it could
	// not (it never started, or was killed).
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("pgserver: remove %s: %w", s.dir, err)
	}
	return nil
}

// freePort returns a loopback TCP port nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgserver: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
