//go:build scale

package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// The scale ladder (make scale): wide fan-outs on every NATS deployment
// durabench supports, each cell with 0 stalls, 0 errors and 0 world
// incidents. It writes the table the docs quote to out/scale.md.
//
//	pending-count     1,024 / 4,096 / 10,000 branches × 10 runs
//	resilient-inband  1,024 branches × 10 runs, 4,096 × 1 (embedded file only)
//
// on embedded NATS (file and memory storage) and on a separate nats-server
// process over TCP; 1,024 branches (both versions, 10 runs each) on a
// three-node R3 cluster of nats-server processes. resilient-inband's
// completers each load the whole log, so a run costs O(branches²) log
// reads: ~2 s at 1,024 branches and ~32 s at 4,096 on 2 cores; 10,000
// takes ~166 s a run, which is why the ladder stops it at 4,096 (run it by
// hand: docs/worlds.md). DURABENCH_SCALE_ONLY=R3 (a substring of
// a deployment's name) runs one deployment.
func TestScaleLadder(t *testing.T) {
	only := os.Getenv("DURABENCH_SCALE_ONLY") // a substring of the deployments to run, e.g. "R3"
	natsBin := buildNATSServer(t)
	var single, cluster string
	if only == "" || strings.Contains("nats-server over TCP", only) {
		single = startNATSProcess(t, natsBin, "single", 0, nil)
	}
	if only == "" || strings.Contains("R3 cluster (3 processes)", only) {
		cluster = startNATSCluster(t, natsBin)
	}

	type step struct {
		version  string
		branches string
		reps     int
	}
	ladder := []step{{"pending-count", "1024,4096,10000", 10}, {"resilient-inband", "1024", 10}}
	deployments := []struct {
		name  string
		args  []string
		steps []step
	}{
		{"embedded, file", []string{"--world", "nats"}, append(ladder, step{"resilient-inband", "4096", 1})},
		{"embedded, memory", []string{"--world", "nats", "--nats-storage", "memory"}, ladder},
		{"nats-server over TCP", []string{"--world", "nats", "--nats-url", single}, ladder},
		{"R3 cluster (3 processes)", []string{"--world", "nats", "--nats-url", cluster, "--nats-replicas", "3"},
			[]step{{"pending-count", "1024", 10}, {"resilient-inband", "1024", 10}}},
	}
	var table strings.Builder
	table.WriteString("| world | version | branches | runs | TTLS p50 | p99 | max | stalls | errors | world incidents | cell wall time |\n")
	table.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	dir := t.TempDir()
	for di, d := range deployments {
		if only != "" && !strings.Contains(d.name, only) {
			continue
		}
		for si, s := range d.steps {
			out := filepath.Join(dir, fmt.Sprintf("d%d-s%d", di, si))
			args := append([]string{"sweep"}, d.args...)
			args = append(args, "--branches", s.branches, "--versions", s.version, "--switches", "none",
				"--reps", fmt.Sprint(s.reps), "--warmup", "0", "--cell-timeout", "15m", "--quiet", "--out", out)
			began := time.Now()
			r := durabench(t, dir, args...)
			t.Logf("%s · %s · %s branches × %d: exit %d in %s", d.name, s.version, s.branches, s.reps, r.code, time.Since(began).Round(time.Second))
			if r.code != 0 {
				t.Errorf("%s: sweep exit %d: %s", d.name, r.code, r.stderr)
				continue
			}
			if strings.TrimSpace(r.stderr) != "" {
				t.Errorf("%s: stderr is not empty: %.300s", d.name, r.stderr)
			}
			f, err := results.Read(filepath.Join(out, "results.json"))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range f.Cells {
				inc := int64(0)
				if c.WorldIncidents != nil {
					inc = c.WorldIncidents.Total()
				}
				ttls := c.Metrics["ttls"]
				fmt.Fprintf(&table, "| %s | %s | %d | %d | %s | %s | %s | %d | %d | %d | %s |\n", d.name, c.Version, c.Branches,
					c.Runs, metrics.FormatMicros(float64(ttls.P50)), metrics.FormatMicros(float64(ttls.P99)),
					metrics.FormatMicros(float64(ttls.Max)), c.Stalls, c.Errors, inc,
					(time.Duration(c.ElapsedMS) * time.Millisecond).Round(100*time.Millisecond))
				if c.Runs != s.reps || c.Stalls != 0 || c.Errors != 0 || inc != 0 || ttls.Count != c.Runs {
					t.Errorf("%s · %d br · %s: runs %d (want %d), stalls %d, errors %d, world incidents %d (%v), %d TTLS values",
						d.name, c.Branches, c.Version, c.Runs, s.reps, c.Stalls, c.Errors, inc, c.WorldIncidents, ttls.Count)
					if c.WorldIncidents != nil {
						t.Logf("last incident: %s", c.WorldIncidents.Last)
					}
				}
			}
		}
	}
	t.Logf("scale ladder:\n%s", table.String())
	if err := os.MkdirAll("../../out", 0o755); err == nil {
		_ = os.WriteFile("../../out/scale.md", []byte(table.String()), 0o644)
	}
}

// buildNATSServer builds the real nats-server binary, at the version
// durabench's go.mod pins, into a temp dir.
func buildNATSServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nats-server")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput(); err != nil {
		t.Fatalf("go build nats-server: %v\n%s", err, out)
	}
	return bin
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

// startNATSProcess runs nats-server with JetStream on loopback (a cluster
// node when clusterPort > 0) and returns its client URL once it listens.
func startNATSProcess(t *testing.T, bin, name string, clusterPort int, routes []string) string {
	t.Helper()
	port := freePort(t)
	args := []string{"-js", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-sd", t.TempDir(), "-n", name}
	if clusterPort > 0 {
		args = append(args, "--cluster_name", "durabench", "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", clusterPort),
			"--routes", strings.Join(routes, ","))
	}
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "Server is ready") {
				once = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("nats-server %s not ready within 30 s", name)
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", port)
}

// startNATSCluster runs a three-node JetStream cluster of nats-server
// processes and returns the comma-separated client URLs once a sweep's
// probe can create streams on it (its meta leader is elected).
func startNATSCluster(t *testing.T, bin string) string {
	t.Helper()
	cports := []int{freePort(t), freePort(t), freePort(t)}
	var routes []string
	for _, p := range cports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	var urls []string
	for i, p := range cports {
		urls = append(urls, startNATSProcess(t, bin, fmt.Sprintf("n%d", i+1), p, routes))
	}
	joined := strings.Join(urls, ",")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		r := durabench(t, t.TempDir(), "sweep", "--world", "nats", "--nats-url", joined, "--nats-replicas", "3",
			"--branches", "1", "--versions", "baseline", "--switches", "none", "--reps", "1", "--warmup", "0", "--quiet",
			"--out", filepath.Join(t.TempDir(), "probe"))
		if r.code == 0 {
			return joined
		}
		time.Sleep(time.Second)
	}
	t.Fatal("the R3 cluster did not take a sweep within 90 s")
	return ""
}
