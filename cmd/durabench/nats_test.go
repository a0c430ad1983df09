package main

import (
	"bufio"
	"bytes"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/durabench/durabench/results"
)

// TestNATSDiesMidSweep: a NATS server that dies mid-sweep stops the sweep
// with exit 3, and every finished cell is kept in a partial results file.
func TestNATSDiesMidSweep(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats server not ready")
	}
	defer srv.Shutdown()

	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	cmd := exec.Command(bin, "sweep", "--world", "nats", "--nats-url", srv.ClientURL(), "--branches", "4",
		"--versions", "all", "--switches", "none", "--reps", "5", "--warmup", "0", "--option", "body=30ms",
		"--cell-timeout", "5s", "--progress", "lines", "--out", out)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "[1/5]") {
			srv.Shutdown()
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the sweep did not stop after the server died; stderr %q", stderr.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 3 {
		t.Fatalf("exit %d, want 3; stderr %q", code, stderr.String())
	}
	f, err := results.Read(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Partial || f.Error == "" || len(f.Cells) < 1 || len(f.Cells) >= 5 {
		t.Errorf("results: partial %v error %q with %d cells", f.Partial, f.Error, len(f.Cells))
	}
	if !strings.Contains(stderr.String(), "kept in") {
		t.Errorf("stderr does not say where the finished cells are: %q", stderr.String())
	}
}
