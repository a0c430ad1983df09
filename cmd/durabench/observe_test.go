package main

import (
	"net"
	"strings"
	"testing"
)

// TestMetricsAddr: --metrics-addr serves while the sweep runs and says
// where; a port already in use is exit 2 naming the flag, before any cell
// runs (the live package scrapes a real sweep).
func TestMetricsAddr(t *testing.T) {
	dir := t.TempDir()
	r := durabench(t, dir, append(smallSweep, "--quiet", "--metrics-addr", "127.0.0.1:0", "--out", "ok")...)
	if r.code != 0 || !strings.Contains(r.stderr, "durabench: metrics at http://127.0.0.1:") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r = durabench(t, dir, append(smallSweep, "--quiet", "--metrics-addr", ln.Addr().String(), "--out", "busy")...)
	if r.code != 2 || !strings.Contains(r.stderr, "--metrics-addr "+ln.Addr().String()) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("port in use: exit %d, stderr %q", r.code, r.stderr)
	}
}
