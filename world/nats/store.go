package natsworld

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// storePattern names an embedded server's store directory in the temp
// directory (os.MkdirTemp pattern).
const storePattern = "durabench-nats-*"

// lockName is the file each store directory holds, locked (flock) by the
// process whose server uses the store for as long as it runs. The kernel
// releases the lock when the process dies, however it dies.
const lockName = ".owner.lock"

// store is an embedded server's store directory, locked by this process.
type store struct {
	dir  string
	lock *os.File
}

// newStore removes the stores of processes that are gone (a SIGKILLed
// sweep cannot remove its own; its JetStream files would pile up in the
// temp directory), then makes and locks a fresh one.
func newStore() (*store, error) {
	removeStaleStores(os.TempDir())
	dir, err := os.MkdirTemp("", storePattern)
	if err != nil {
		return nil, fmt.Errorf("natsworld: store dir: %w", err)
	}
	// The lock file appears under its name already locked (renamed after
	// flock), so a process cleaning up never takes a store being born for
	// a dead one's.
	f, err := os.CreateTemp(dir, lockName+".tmp-*")
	if err == nil {
		if err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			err = os.Rename(f.Name(), filepath.Join(dir, lockName))
		}
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("natsworld: lock store dir: %w", err)
	}
	return &store{dir: dir, lock: f}, nil
}

// remove deletes the store and lets go of its lock.
func (s *store) remove() {
	_ = os.RemoveAll(s.dir)
	_ = s.lock.Close()
}

// removeStaleStores deletes the store directories in tmp whose lock no
// process holds. A store without a lock file is left alone: it may be
// being made this instant, or belong to a durabench from before the locks.
func removeStaleStores(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, storePattern))
	for _, dir := range dirs {
		f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR, 0)
		if err != nil {
			continue
		}
		// Taken: its process is gone. EWOULDBLOCK: alive. Any other
		// error: cannot tell, leave it.
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.RemoveAll(dir)
		}
		f.Close()
	}
}
