package natsworld

import (
	"os"
	"path/filepath"
	"testing"
	"time"
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
	// Birth directories of processes killed while making a store: one
	// whose lock no process holds, one that never got its lock (a minute
	// old), and one that is being made this instant (no lock yet).
	deadBirth := filepath.Join(tmp, ".durabench-nats-birth-1")
	oldBirth := filepath.Join(tmp, ".durabench-nats-birth-2")
	newBirth := filepath.Join(tmp, ".durabench-nats-birth-3")
	for _, d := range []string{deadBirth, oldBirth, newBirth} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(deadBirth, lockName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-2 * birthAge)
	if err := os.Chtimes(oldBirth, long, long); err != nil {
		t.Fatal(err)
	}
	next, err := newStore()
	if err != nil {
		t.Fatal(err)
	}
	defer next.remove()
	for dir, want := range map[string]bool{stale: false, unlocked: true, live.dir: true, next.dir: true,
		deadBirth: false, oldBirth: false, newBirth: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(dir), err == nil, want)
		}
	}
	// A store is seen under its name only with its lock held in it.
	for _, s := range []*store{live, next} {
		if ok, _ := filepath.Match(storePattern, filepath.Base(s.dir)); !ok {
			t.Errorf("store %s is not named %s", s.dir, storePattern)
		}
		if removeIfUnlocked(s.dir) {
			t.Errorf("store %s: its lock was not held", s.dir)
		}
	}
}
