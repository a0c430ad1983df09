package natsworld

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStaleStoresRemoved: a store whose lock no process holds (its process
// was SIGKILLed) is removed when the next embedded server starts; a live
// store, and a directory without a lock file, are left alone.
func TestStaleStoresRemoved(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	live, err := newStore()
	if err != nil {
		t.Fatal(err)
	}
	defer live.remove()
	stale := filepath.Join(tmp, "durabench-nats-123")
	if err := os.MkdirAll(filepath.Join(stale, "jetstream"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, lockName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	unlocked := filepath.Join(tmp, "durabench-nats-456")
	if err := os.Mkdir(unlocked, 0o755); err != nil {
		t.Fatal(err)
	}
	next, err := newStore()
	if err != nil {
		t.Fatal(err)
	}
	defer next.remove()
	for dir, want := range map[string]bool{stale: false, unlocked: true, live.dir: true, next.dir: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(dir), err == nil, want)
		}
	}
}
