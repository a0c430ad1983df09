package natsworld_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// childEnv holds a JSON childSpec when the test binary runs as a
// stand-alone nats-server: the external-server tests start the server in a
// separate process (this binary re-executed), so the world reaches it over
// TCP loopback, and a test can kill it.
const childEnv = "DURABENCH_NATS_CHILD"

type childSpec struct {
	Name        string `json:"name"`
	StoreDir    string `json:"store_dir"`
	ClusterPort int    `json:"cluster_port,omitempty"`
	Routes      string `json:"routes,omitempty"`
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	os.Exit(m.Run())
}

// runChild runs a nats-server until stdin closes, after printing its client
// URL on stdout.
func runChild(specJSON string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "child spec:", err)
		return 2
	}
	opts := &server.Options{
		ServerName: spec.Name,
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   spec.StoreDir,
		NoSigs:     true,
		NoLog:      true,
	}
	if spec.ClusterPort > 0 {
		opts.Cluster = server.ClusterOpts{Name: "durabench", Host: "127.0.0.1", Port: spec.ClusterPort}
		opts.Routes = server.RoutesFromStr(spec.Routes)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 2
	}
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		fmt.Fprintln(os.Stderr, "server not ready")
		return 2
	}
	fmt.Println(s.ClientURL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	s.Shutdown()
	s.WaitForShutdown()
	return 0
}

// serverProc is a nats-server in a child process.
type serverProc struct {
	URL   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// Kill ends the server abruptly, as a crash would.
func (p *serverProc) Kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// startServer starts one server process; the test's cleanup stops it.
func startServer(t *testing.T, spec childSpec) *serverProc {
	t.Helper()
	if spec.StoreDir == "" {
		spec.StoreDir = t.TempDir()
	}
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nats-server process: %v", err)
	}
	p := &serverProc{cmd: cmd, stdin: stdin}
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- strings.TrimSpace(sc.Text())
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case u, ok := <-line:
		if !ok || u == "" {
			t.Fatalf("nats-server process %s exited before it was ready", spec.Name)
		}
		p.URL = u
	case <-time.After(30 * time.Second):
		t.Fatalf("nats-server process %s not ready within 30s", spec.Name)
	}
	return p
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// startCluster starts a three-node JetStream cluster, one process per node,
// and returns the comma-separated client URLs.
func startCluster(t *testing.T) string {
	t.Helper()
	ports := freePorts(t, 3)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	urls := make([]string, 3)
	for i := range 3 {
		spec := childSpec{Name: fmt.Sprintf("n%d", i+1), StoreDir: t.TempDir(), ClusterPort: ports[i], Routes: strings.Join(routes, ",")}
		urls[i] = startServer(t, spec).URL
	}
	joined := strings.Join(urls, ",")
	waitJetStream(t, joined, 90*time.Second)
	return joined
}

// waitJetStream waits until the cluster at url answers JetStream API calls
// (its meta leader is elected).
func waitJetStream(t *testing.T, url string, limit time.Duration) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("JetStream cluster not ready within %v: %v", limit, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
