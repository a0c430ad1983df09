package target

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An adapter that says what it is doing on stderr (the workflow adapter
// building an SDK) is given StartTimeout again from each line; one that
// stays silent past it is stopped.
func TestLaunchWaitsWhileTheAdapterTalks(t *testing.T) {
	old := StartTimeout
	StartTimeout = 400 * time.Millisecond
	defer func() { StartTimeout = old }()
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	talks := script("talks", "for i in 1 2 3 4 5 6 7 8; do echo building >&2; sleep 0.1; done\necho http://127.0.0.1:1\nexec sleep 30\n")
	p, err := Launch(context.Background(), "talks", talks, nil, nil)
	if err != nil {
		t.Fatalf("an adapter talking for 0.8 s, StartTimeout 0.4 s: %v", err)
	}
	if p.URL != "http://127.0.0.1:1" {
		t.Errorf("URL %q", p.URL)
	}
	_ = p.Stop()

	silent := script("silent", "sleep 1.2\necho http://127.0.0.1:1\nexec sleep 30\n")
	if p, err := Launch(context.Background(), "silent", silent, nil, nil); err == nil {
		_ = p.Stop()
		t.Fatal("a silent adapter past StartTimeout was taken")
	} else if !strings.Contains(err.Error(), "not ready: no URL and nothing on stderr for 400ms") {
		t.Errorf("error %v", err)
	}
}
