package chaos

import (
	"bufio"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/world/postgres/pgserver"
)

// netFault is one way the proxy breaks the network mid-cell.
type netFault struct {
	name   string
	inject func(p *Proxy)
	// clean: the fault costs time, never a run (every run finishes).
	clean bool
	// stalls: the fault shows as stalls (runs late past the threshold),
	// not as incidents: no call failed, each only waited.
	stalls bool
}

var netFaults = []netFault{
	{"latency 20 ms each way", func(p *Proxy) { p.SetLatency(20 * time.Millisecond) }, true, false},
	{"connection resets (3, 1 s apart)", func(p *Proxy) {
		for i := range 3 {
			if i > 0 {
				time.Sleep(time.Second)
			}
			p.Reset()
		}
	}, false, false},
	{"5 s blackhole", func(p *Proxy) { p.Blackhole(5 * time.Second) }, false, true},
}

// backend is what the proxy stands in front of: the sweep's flags given the
// proxy's address.
type backend struct {
	name     string
	upstream string
	args     func(proxy string) []string
	// incidents: the world counts a reset as incidents.
	incidents bool
}

// TestNetworkFaults: a TCP proxy between durabench and NATS, PostgreSQL or
// a target adds 20 ms of latency each way, resets every connection three
// times, or holds every byte for 5 s, mid-cell. Every run finishes or is
// counted with its reason, none lost; the worlds count the resets as
// incidents, the blackhole shows as stalls; the sweep exits 0.
func TestNetworkFaults(t *testing.T) {
	needChaos(t)
	nats := &natsNode{name: "single", store: t.TempDir(), port: freePort(t)}
	nats.start(t)
	t.Cleanup(nats.stop)
	pg, err := pgserver.Start(ctxT(t), pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	ref := serveReference(t)

	engine := []string{"--versions", "pending-count", "--switches", "none"}
	backends := []backend{
		{"NATS", strings.TrimPrefix(nats.url(), "nats://"), func(a string) []string {
			return append([]string{"--world", "nats", "--nats-url", "nats://" + a}, engine...)
		}, true},
		{"PostgreSQL", fmt.Sprintf("127.0.0.1:%d", pg.Port()), func(a string) []string {
			return append([]string{"--world", "postgres", "--postgres-url",
				fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", pgserver.User, a, pgserver.Database)}, engine...)
		}, true},
		{"target", strings.TrimPrefix(ref, "http://"), func(a string) []string {
			return []string{"--targets", "http://" + a}
		}, false},
	}
	const reps = 50
	for _, b := range backends {
		for _, nf := range netFaults {
			t.Run(b.name+"/"+nf.name, func(t *testing.T) {
				p, err := Listen(b.upstream)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				args := append(b.args(p.Addr()), "--branches", "16", "--option", "body=300ms",
					"--reps", fmt.Sprint(reps), "--warmup", "0", "--pace", "open", "--rate", "10",
					"--visibility-timeout", "5s", "--cell-timeout", "1m")
				s := startSweep(t, t.TempDir(), nil, args...)
				inFlight := s.waitStarted(t, 15, 2*time.Minute)
				nf.inject(p)
				code := s.wait(t, 3*time.Minute)
				if code != 0 {
					t.Fatalf("exit %d; stderr:\n%s", code, s.stderr.String())
				}
				f := readResults(t, s.out)
				c := f.Cells[0]
				k := account(c, reps)
				note := fmt.Sprintf("proxy: %d connections, %d reset", p.Accepted(), p.Resets())
				if c.WorldIncidents != nil {
					note += fmt.Sprintf("; last incident: %.100s", c.WorldIncidents.Last)
				}
				if len(c.FailedRuns) > 0 {
					note += fmt.Sprintf("; a failed run: %.120s", c.FailedRuns[0].Error)
				}
				record(t, figure{Case: b.name + " through a proxy: " + nf.name, InFlight: inFlight, Tally: k, Exit: code, Note: note})
				for _, st := range c.StalledRuns {
					if !st.Finished {
						t.Logf("unfinished: %s (not started: %v)", st.Run, st.NotStarted)
					}
				}
				// Every run the backend accepted finishes; the ones that
				// fail are starts refused while the connection was down.
				if k.Lost != 0 || k.Runs != reps || k.Unfinished != 0 {
					t.Errorf("%s: want every run finished or failed", k)
				}
				for _, fr := range c.FailedRuns {
					if b.incidents && !refusedStart(fr.Error) {
						t.Errorf("run %s failed after it was accepted: %s", fr.Run, fr.Error)
					}
				}
				if nf.clean && (k.Failed != 0 || k.Unfinished != 0) {
					t.Errorf("%s: want every run finished", k)
				}
				switch {
				case nf.stalls && k.Stalls == 0:
					t.Errorf("%s: no run counted late", k)
				case !nf.clean && !nf.stalls && b.incidents && k.Incidents == 0:
					t.Errorf("%s: the world counted no incident", k)
				}
			})
		}
	}
}

// serveReference runs `durabench target serve reference` (the built-in
// engine on the mem world over the target protocol) and returns its URL.
func serveReference(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(bin, "target", "serve", "reference")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		t.Fatalf("target serve printed %q, %v", line, err)
	}
	return strings.TrimSpace(line)
}
