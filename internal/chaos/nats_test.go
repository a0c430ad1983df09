package chaos

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsNode is one nats-server process of a test cluster. Its ports and
// store directory stay the same across a kill and a restart, as a real
// node's do.
type natsNode struct {
	name, store       string
	port, clusterPort int
	routes            []string
	cmd               *exec.Cmd
	exited            chan struct{}
	mu                sync.Mutex
	log               []string // the last lines the node logged
}

// tail is the node's last log lines.
func (n *natsNode) tail() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.log, "\n")
}

func (n *natsNode) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// start runs the node and waits until it is ready for clients.
func (n *natsNode) start(t *testing.T) {
	t.Helper()
	args := []string{"-js", "-a", "127.0.0.1", "-p", fmt.Sprint(n.port), "-sd", n.store, "-n", n.name}
	if n.clusterPort > 0 {
		args = append(args, "--cluster_name", "chaos", "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", n.clusterPort),
			"--routes", strings.Join(n.routes, ","))
	}
	cmd := exec.Command(natsBin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	exited := n.exited
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			n.mu.Lock()
			n.log = append(n.log, sc.Text())
			if len(n.log) > 20 {
				n.log = n.log[len(n.log)-20:]
			}
			n.mu.Unlock()
			if !once && strings.Contains(sc.Text(), "Server is ready") {
				once = true
				close(ready)
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case <-ready:
	case <-exited:
		t.Fatalf("nats-server %s exited while starting", n.name)
	case <-time.After(30 * time.Second):
		t.Fatalf("nats-server %s not ready within 30 s", n.name)
	}
}

// kill ends the node with SIGKILL, as a crash would.
func (n *natsNode) kill() {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// stop ends the node cleanly (the test's cleanup).
func (n *natsNode) stop() {
	select {
	case <-n.exited:
		return
	default:
	}
	_ = n.cmd.Process.Signal(os.Interrupt)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
		n.kill()
	}
}

// natsCluster is three nats-server processes with JetStream and routes.
type natsCluster struct {
	nodes []*natsNode
}

// startNATSCluster starts a three-node cluster and waits until it is
// healthy. A cluster that forms no JetStream meta group in 90 s (seen once
// in CI: "JetStream system temporarily unavailable" for the whole wait) is
// stopped, its nodes' last log lines logged, and started again on new
// ports and stores once: the start, not the case under test, failed.
func startNATSCluster(t *testing.T) *natsCluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c := newNATSCluster(t)
		err := c.waitHealthy(90 * time.Second)
		if err == nil {
			return c
		}
		for _, n := range c.nodes {
			t.Logf("cluster start %d: node %s's last log lines:\n%s", attempt, n.name, n.tail())
			n.stop()
		}
		if attempt == 2 {
			t.Fatalf("cluster not healthy within 90 s, twice: %v", err)
		}
		t.Logf("cluster start %d not healthy within 90 s (%v): starting a new one", attempt, err)
	}
}

func newNATSCluster(t *testing.T) *natsCluster {
	t.Helper()
	c := &natsCluster{}
	var routes []string
	for i := range 3 {
		n := &natsNode{name: fmt.Sprintf("n%d", i+1), store: t.TempDir(), port: freePort(t), clusterPort: freePort(t)}
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", n.clusterPort))
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		n.routes = routes
		n.start(t)
		t.Cleanup(n.stop)
	}
	return c
}

// urls is the cluster's client URLs, comma-separated.
func (c *natsCluster) urls() string {
	var u []string
	for _, n := range c.nodes {
		u = append(u, n.url())
	}
	return strings.Join(u, ",")
}

func (c *natsCluster) node(name string) *natsNode {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

func (c *natsCluster) connect(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(c.urls(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connect %s: %v", c.urls(), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// waitHealthy waits until the meta leader answers and every node is a
// current member of the meta group (a restarted node has caught up).
func (c *natsCluster) waitHealthy(limit time.Duration) error {
	nc, err := nats.Connect(c.urls(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("connect %s: %w", c.urls(), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	end := time.Now().Add(limit)
	var last error
	for time.Now().Before(end) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			if err = c.metaCurrent(); err == nil {
				return nil
			}
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("not healthy within %v: %w", limit, last)
}

// metaCurrent checks that every node answers JetStream API calls through
// its own client port (a restarted node has rejoined the meta group).
func (c *natsCluster) metaCurrent() error {
	for _, n := range c.nodes {
		one, err := nats.Connect(n.url(), nats.Timeout(time.Second))
		if err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
		js, err := jetstream.New(one)
		if err != nil {
			one.Close()
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = js.AccountInfo(ctx)
		cancel()
		one.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
	}
	return nil
}

// streamLeader returns the leader and the followers of the first stream
// whose name ends with suffix, waiting until it exists (the sweep's cell
// created it).
func (c *natsCluster) streamLeader(t *testing.T, suffix string, limit time.Duration) (stream, leader string, followers []string) {
	t.Helper()
	nc, js := c.connect(t)
	defer nc.Close()
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		l := js.ListStreams(ctx)
		for si := range l.Info() {
			if !strings.HasPrefix(si.Config.Name, "durabench_") || !strings.HasSuffix(si.Config.Name, suffix) {
				continue
			}
			if si.Cluster == nil || si.Cluster.Leader == "" {
				continue
			}
			cancel()
			for _, r := range si.Cluster.Replicas {
				followers = append(followers, r.Name)
			}
			return si.Config.Name, si.Cluster.Leader, followers
		}
		cancel()
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no stream *%s with a leader within %v", suffix, limit)
	return "", "", nil
}

// TestNATSClusterNodeKilled: a sweep on a three-node cluster with R3
// streams; mid-cell the leader of the cell's log stream (then, in a second
// sweep, a follower) is SIGKILLed and restarted 3 s later. Every run of the
// cell finishes or is counted with its reason, none is lost or counted
// twice, and the sweep exits 0 with the cell in results.json.
func TestNATSClusterNodeKilled(t *testing.T) {
	needChaos(t)
	c := startNATSCluster(t)
	const reps = 60
	for _, role := range []string{"leader", "follower"} {
		t.Run(role, func(t *testing.T) {
			dir := t.TempDir()
			s := startSweep(t, dir, nil, "--world", "nats", "--nats-url", c.urls(), "--nats-replicas", "3",
				"--branches", "16", "--option", "body=300ms", "--versions", "pending-count", "--switches", "none",
				"--reps", fmt.Sprint(reps), "--warmup", "0", "--pace", "open", "--rate", "10",
				"--visibility-timeout", "5s", "--cell-timeout", "2m")
			inFlight := s.waitStarted(t, 20, 2*time.Minute)
			stream, leader, followers := c.streamLeader(t, "_log", 10*time.Second)
			victim := leader
			if role == "follower" {
				victim = followers[0]
			}
			n := c.node(victim)
			t.Logf("SIGKILL %s (%s of %s), %d runs in flight", victim, role, stream, inFlight)
			n.kill()
			time.Sleep(3 * time.Second)
			n.start(t)
			code := s.wait(t, 4*time.Minute)
			f := readResults(t, s.out)
			if code != 0 || len(f.Cells) != 1 {
				t.Fatalf("exit %d, %d cells; stderr:\n%s", code, len(f.Cells), s.stderr.String())
			}
			k := account(f.Cells[0], reps)
			last := ""
			if f.Cells[0].WorldIncidents != nil {
				last = f.Cells[0].WorldIncidents.Last
			}
			record(t, figure{Case: "NATS R3: SIGKILL the stream " + role + ", restart after 3 s", InFlight: inFlight, Tally: k, Exit: code,
				Note: fmt.Sprintf("last incident: %.120s", last)})
			// R3 keeps every acknowledged write and elects a new leader:
			// every run the world accepted finishes (late ones are
			// stalls). A start in the instant the client reconnects to
			// another node is refused, and counted failed with that reason.
			if k.Lost != 0 || k.Runs != reps || k.Unfinished != 0 {
				t.Errorf("%s: want every run finished or refused at its start", k)
			}
			for _, fr := range f.Cells[0].FailedRuns {
				if !refusedStart(fr.Error) {
					t.Errorf("run %s failed after it was accepted: %s", fr.Run, fr.Error)
				}
			}
			if err := c.waitHealthy(time.Minute); err != nil {
				t.Fatalf("cluster after the %s's restart: %v", role, err)
			}
		})
	}
}
