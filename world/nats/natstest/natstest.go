// Package natstest starts real nats-server processes on loopback for tests:
// one server, or a three-node JetStream cluster with routes. Each server
// runs in a child process — the test binary re-executed — so the code under
// test reaches it over TCP, as it would a remote server, and a test can kill
// it as a crash would.
//
// A test binary that uses it calls Main first in its TestMain.
package natstest

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

// childEnv holds a JSON Spec when the test binary runs as a server.
const childEnv = "DURABENCH_NATS_CHILD"

// Spec describes one server.
type Spec struct {
	Name string `json:"name"`
	// StoreDir is the JetStream store (default: a test temp dir).
	StoreDir string `json:"store_dir"`
	// ClusterPort and Routes make the server a cluster node.
	ClusterPort int    `json:"cluster_port,omitempty"`
	Routes      string `json:"routes,omitempty"`
	// Security secures and authenticates the server's clients.
	Security Security `json:"security,omitzero"`
}

// Main runs the test binary as a nats-server when it was re-executed as
// one (it then exits); otherwise it returns at once. Call it first in
// TestMain.
func Main() {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
}

// runChild runs a nats-server until stdin closes, after printing its client
// URL on stdout.
func runChild(specJSON string) int {
	var spec Spec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "child spec:", err)
		return 2
	}
	opts := &server.Options{ServerName: spec.Name, Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: spec.StoreDir, NoSigs: true, NoLog: true}
	if spec.ClusterPort > 0 {
		opts.Cluster = server.ClusterOpts{Name: "durabench", Host: "127.0.0.1", Port: spec.ClusterPort}
		opts.Routes = server.RoutesFromStr(spec.Routes)
	}
	if err := spec.Security.apply(opts); err != nil {
		fmt.Fprintln(os.Stderr, "security:", err)
		return 2
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

// Server is a nats-server in a child process.
type Server struct {
	URL   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// Kill ends the server abruptly, as a crash would.
func (p *Server) Kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// Start starts one server process and waits until it accepts clients; the
// test's cleanup stops it.
func Start(t testing.TB, spec Spec) *Server {
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
	p := &Server{cmd: cmd, stdin: stdin}
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

// FreePorts returns n loopback ports that were free a moment ago.
func FreePorts(t testing.TB, n int) []int {
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

// StartCluster starts a three-node JetStream cluster, one process per node,
// and returns the comma-separated client URLs once its meta leader answers.
func StartCluster(t testing.TB) string {
	t.Helper()
	ports := FreePorts(t, 3)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	urls := make([]string, 3)
	for i := range 3 {
		urls[i] = Start(t, Spec{Name: fmt.Sprintf("n%d", i+1), ClusterPort: ports[i], Routes: strings.Join(routes, ",")}).URL
	}
	joined := strings.Join(urls, ",")
	WaitJetStream(t, joined, 90*time.Second)
	return joined
}

// WaitJetStream waits until the server or cluster at url answers JetStream
// API calls (a cluster's meta leader is elected).
func WaitJetStream(t testing.TB, url string, limit time.Duration) {
	t.Helper()
	nc, js := connect(t, url)
	defer nc.Close()
	end := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("JetStream not ready within %v: %v", limit, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Streams lists the streams on the server at url whose names start with
// prefix.
func Streams(t testing.TB, url, prefix string) []string {
	t.Helper()
	nc, js := connect(t, url)
	defer nc.Close()
	var names []string
	l := js.StreamNames(context.Background())
	for n := range l.Name() {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatalf("stream names: %v", err)
	}
	return names
}

// connect opens a connection and a JetStream context on it.
func connect(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	return nc, js
}
