package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/world/nats/natstest"
)

// TestNATSDiesMidSweep: a NATS server that dies mid-sweep stops the sweep
// with exit 3, and every finished cell is kept in a partial results file.
func TestNATSDiesMidSweep(t *testing.T) {
	srv := startNATS(t)

	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	r := startUntil(t, dir, "[1/5]", "sweep", "--world", "nats", "--nats-url", srv.ClientURL(), "--branches", "4",
		"--switches", "none", "--reps", "5", "--warmup", "0", "--option", "body=30ms",
		"--cell-timeout", "5s", "--progress", "lines", "--out", out)
	srv.Shutdown()
	code, stderr, _ := r.finish(t, 60*time.Second, "the sweep did not stop after the server died")
	if code != 3 {
		t.Fatalf("exit %d, want 3; stderr %q", code, stderr)
	}
	f, err := results.Read(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Partial || f.Error == "" || len(f.Cells) < 1 || len(f.Cells) >= 5 {
		t.Errorf("results: partial %v error %q with %d cells", f.Partial, f.Error, len(f.Cells))
	}
	if !strings.Contains(stderr, "kept in") {
		t.Errorf("stderr does not say where the finished cells are: %q", stderr)
	}
}

// TestTwoSweepsShareAServer: two sweeps of the same plan against one NATS
// server at once both finish cleanly on their own streams; with --keep each
// names the prefix of the streams it left, and the two sets are disjoint.
func TestTwoSweepsShareAServer(t *testing.T) {
	srv := startNATS(t)

	dir := t.TempDir()
	type outcome struct {
		r   result
		out string
	}
	outs := make(chan outcome, 2)
	for i := range 2 {
		out := filepath.Join(dir, fmt.Sprintf("out%d", i))
		go func() {
			outs <- outcome{durabench(t, dir, "sweep", "--world", "nats", "--nats-url", srv.ClientURL(), "--keep",
				"--branches", "8", "--versions", "resilient", "--switches", "none", "--reps", "5", "--warmup", "1",
				// A lost message waits out the 30 s visibility timeout; the
				// default stall rule (10× an 8-branch run's few ms, at least
				// 100 ms) would also count a loaded machine's hiccup.
				"--stall-threshold", "5s", "--quiet", "--out", out), out}
		}()
	}
	prefixRE := regexp.MustCompile(`streams kept \(--keep\): (durabench_[0-9a-f]{8}_)<cell>`)
	var prefixes []string
	for range 2 {
		o := <-outs
		if o.r.code != 0 {
			t.Fatalf("sweep exit %d: %s", o.r.code, o.r.stderr)
		}
		m := prefixRE.FindStringSubmatch(o.r.stderr)
		if m == nil {
			t.Fatalf("stderr does not name the kept streams: %q", o.r.stderr)
		}
		prefixes = append(prefixes, m[1])
		f, err := results.Read(filepath.Join(o.out, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range f.Cells {
			if c.Runs != 5 || c.Errors != 0 || c.Stalls != 0 {
				t.Errorf("%v: runs %d errors %d stalls %d, want 5 clean runs", c.Version, c.Runs, c.Errors, c.Stalls)
			}
		}
	}
	if prefixes[0] == prefixes[1] {
		t.Fatalf("both sweeps used the streams %s*", prefixes[0])
	}
	count := map[string]int{}
	for _, p := range prefixes {
		count[p] = len(natstest.Streams(t, srv.ClientURL(), p))
	}
	for _, p := range prefixes {
		if count[p] != 3 {
			t.Errorf("%s*: %d streams kept, want 3 (log, queue, chunks)", p, count[p])
		}
	}
}

// startNATS starts a JetStream server in the test process on a loopback
// port; the sweeps under test reach it over TCP.
func startNATS(t *testing.T) *server.Server {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// TestWideFanOutOnEmbeddedNATS: the sweep that lost messages past 512
// branches (1,024 and 2,048 branches, pending-count and resilient-inband)
// finishes every run on the default world, with no stall, no error, no
// world incident in results.json, and nothing on stderr (nats.go's slow
// consumer reports used to flood it).
func TestWideFanOutOnEmbeddedNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("wide fan-outs: not in -short")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	r := durabench(t, dir, "sweep", "--world", "nats", "--branches", "1024,2048", "--versions", "pending-count",
		"--switches", "none", "--reps", "3", "--warmup", "0", "--cell-timeout", "2m", "--quiet", "--out", out)
	if r.code != 0 {
		t.Fatalf("sweep exit %d: %s", r.code, r.stderr)
	}
	if strings.TrimSpace(r.stderr) != "" {
		t.Errorf("stderr is not empty: %.500s", r.stderr)
	}
	f, err := results.Read(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	r2 := durabench(t, dir, "sweep", "--world", "nats", "--branches", "1024", "--versions", "resilient-inband",
		"--switches", "none", "--reps", "1", "--warmup", "0", "--cell-timeout", "2m", "--quiet", "--out", out+"2")
	if r2.code != 0 {
		t.Fatalf("sweep exit %d: %s", r2.code, r2.stderr)
	}
	f2, err := results.Read(filepath.Join(out+"2", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(f.Cells, f2.Cells...) {
		if c.Errors != 0 || c.Stalls != 0 || c.WorldIncidents != nil {
			t.Errorf("%d br · %s: errors %d stalls %d incidents %v, want clean runs", c.Branches, c.Version, c.Errors, c.Stalls, c.WorldIncidents)
		}
		if ttls, ok := c.Metrics["ttls"]; !ok || ttls.Count != c.Runs {
			t.Errorf("%d br · %s: %d TTLS values of %d runs", c.Branches, c.Version, ttls.Count, c.Runs)
		}
	}
}
