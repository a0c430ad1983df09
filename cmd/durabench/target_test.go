package main

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestTargetServeAndCheck: `durabench target serve reference` prints its
// URL and serves the built-in engine over the target protocol; `durabench
// target check URL` passes it (exit 0, PASS); a URL where no target answers
// is one line, exit 2.
func TestTargetServeAndCheck(t *testing.T) {
	cmd := exec.Command(bin, "target", "serve", "reference", "--world", "nats")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			urls <- strings.TrimSpace(sc.Text())
		}
	}()
	var url string
	select {
	case url = <-urls:
	case <-time.After(30 * time.Second):
		t.Fatal("target serve printed no URL within 30 s")
	}
	dir := t.TempDir()
	r := durabench(t, dir, "target", "check", url, "--runs", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "PASS") || !strings.Contains(r.stdout, "every step exactly once") {
		t.Fatalf("check of the reference: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = durabench(t, dir, "target", "check", "http://127.0.0.1:1")
	if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Fatalf("check of nothing: exit %d, stderr %q; want one line naming the URL, exit 2", r.code, r.stderr)
	}
}
