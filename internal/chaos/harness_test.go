package chaos

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/durabench/durabench/results"
)

// The fault cases run real servers and real sweeps (durabench built from
// this tree, in processes of their own), so they run only in make chaos.
const enableEnv = "DURABENCH_CHAOS"

// bin is the durabench binary the cases run; natsBin the nats-server
// binary at the version go.mod pins. Built once, in TestMain.
var bin, natsBin string

func TestMain(m *testing.M) {
	if os.Getenv(enableEnv) == "1" {
		dir, err := os.MkdirTemp("", "durabench-chaos-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		bin, natsBin = filepath.Join(dir, "durabench"), filepath.Join(dir, "nats-server")
		for _, b := range [][]string{{"-o", bin, "../../cmd/durabench"}, {"-o", natsBin, "github.com/nats-io/nats-server/v2"}} {
			if out, err := exec.Command("go", append([]string{"build"}, b...)...).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", b[len(b)-1], err, out)
				os.Exit(1)
			}
		}
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// needChaos skips a fault case outside make chaos.
func needChaos(t *testing.T) {
	t.Helper()
	if os.Getenv(enableEnv) != "1" {
		t.Skip("set " + enableEnv + "=1 (make chaos) to run the fault cases")
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// sweepProc is a durabench sweep running in its own process, with its live
// metrics served on a loopback port so a case can inject its fault when
// enough runs have started.
type sweepProc struct {
	cmd            *exec.Cmd
	out            string // --out
	metrics        string // http://127.0.0.1:PORT/metrics
	stdout, stderr bytes.Buffer
	done           chan struct{}
	code           int
}

// startSweep runs `durabench sweep ARGS --out DIR/out --metrics-addr …
// --progress lines` (plus extra environment) in the background.
func startSweep(t *testing.T, dir string, env []string, args ...string) *sweepProc {
	t.Helper()
	port := freePort(t)
	s := &sweepProc{out: filepath.Join(dir, "out"), metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", port), done: make(chan struct{})}
	full := append([]string{"sweep"}, args...)
	if !slicesContains(args, "--resume") {
		full = append(full, "--out", s.out)
	}
	full = append(full, "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port), "--progress", "lines")
	s.cmd = exec.Command(bin, full...)
	s.cmd.Dir = dir
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stdout, s.cmd.Stderr = &lockedWriter{w: &s.stdout}, &lockedWriter{w: &s.stderr}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := s.cmd.Wait()
		s.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			s.code = ee.ExitCode()
		} else if err != nil {
			s.code = -1
		}
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// lockedWriter lets a buffer be written by a process and read by the test.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// wait waits for the sweep to exit (within limit) and returns its exit code.
func (s *sweepProc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(limit):
		_ = s.cmd.Process.Signal(syscall.SIGQUIT) // a goroutine dump on stderr
		<-s.done
		t.Fatalf("sweep did not exit within %v; stderr:\n%s", limit, s.stderr.String())
	}
	return s.code
}

// live sums a counter or gauge of the sweep's live metrics over its labels
// (-1 while the sweep does not answer).
func (s *sweepProc) live(name string) float64 {
	resp, err := http.Get(s.metrics)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sum, seen := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum, seen = sum+v, true
		}
	}
	if !seen {
		return 0
	}
	return sum
}

// waitStarted waits until at least n measured runs have started and
// returns how many were in flight then.
func (s *sweepProc) waitStarted(t *testing.T, n int, limit time.Duration) int {
	t.Helper()
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		select {
		case <-s.done:
			t.Fatalf("sweep exited (%d) before %d runs started; stderr:\n%s", s.code, n, s.stderr.String())
		default:
		}
		if s.live("durabench_runs_started_total") >= float64(n) {
			return int(s.live("durabench_runs_in_flight"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("fewer than %d runs started within %v; stderr:\n%s", n, limit, s.stderr.String())
	return 0
}

// tally is what happened to a cell's measured runs, as results.json says.
type tally struct {
	Runs, Finished, Failed, Unfinished, Stalls int
	// Lost is the runs the cell planned that are neither finished, failed
	// nor counted as unfinished stalls: it must be 0.
	Lost      int
	Incidents int64
}

func (c tally) String() string {
	return fmt.Sprintf("runs %d: finished %d, failed %d, unfinished %d (stalls %d), lost %d; world incidents %d",
		c.Runs, c.Finished, c.Failed, c.Unfinished, c.Stalls, c.Lost, c.Incidents)
}

// account counts a cell's runs against the reps it planned.
func account(c results.Cell, reps int) tally {
	k := tally{Runs: c.Runs, Failed: len(c.FailedRuns), Stalls: c.Stalls}
	// A failed run has no TTLS; a stall that started and never finished
	// has its elapsed time as TTLS, one that never started has none.
	inTTLS := 0
	for _, s := range c.StalledRuns {
		switch {
		case s.NotStarted:
			k.Unfinished++
		case !s.Finished:
			k.Unfinished++
			inTTLS++
		}
	}
	k.Finished = c.Metrics["ttls"].Count - inTTLS
	k.Lost = reps - k.Finished - k.Failed - k.Unfinished
	if c.WorldIncidents != nil {
		k.Incidents = c.WorldIncidents.Total()
	}
	return k
}

// refusedStart reports whether a failed run's error is its start refused
// by the world (the engine's create run or its first publish failed, the
// driver's start call returned the error): the run was never accepted, and
// it is counted failed with that reason (a lost connection, or a request
// the killed node never answered).
func refusedStart(err string) bool {
	return strings.HasPrefix(err, "engine: create run ") || strings.HasPrefix(err, "engine: start run ")
}

// readResults reads the sweep's results.json.
func readResults(t *testing.T, dir string) *results.File {
	t.Helper()
	f, err := results.Read(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatalf("results.json: %v", err)
	}
	return f
}

// figure records one case's outcome for docs/reliability.md (the test log
// and out/chaos.md).
type figure struct {
	Case     string
	InFlight int
	Tally    tally
	Exit     int
	Note     string
}

var (
	figuresMu sync.Mutex
	figures   []figure
)

func record(t *testing.T, f figure) {
	t.Helper()
	t.Logf("%s: %d runs in flight at the fault; %s; exit %d. %s", f.Case, f.InFlight, f.Tally, f.Exit, f.Note)
	figuresMu.Lock()
	defer figuresMu.Unlock()
	figures = append(figures, f)
	var b strings.Builder
	b.WriteString("| fault | runs | in flight at the fault | finished | late (stalls) | failed | unfinished | lost | world incidents | exit | notes |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, f := range figures {
		k := f.Tally
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", f.Case, k.Runs, f.InFlight,
			k.Finished, k.Stalls-k.Unfinished, k.Failed, k.Unfinished, k.Lost, k.Incidents, f.Exit, f.Note)
	}
	if err := os.MkdirAll("../../out", 0o755); err == nil {
		_ = os.WriteFile("../../out/chaos.md", []byte(b.String()), 0o644)
	}
}

// ctxT is a context ended with the test.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}
