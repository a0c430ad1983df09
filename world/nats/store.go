package natsworld

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/durabench/durabench/internal/failpoint"
)

// storePattern names an embedded server's store directory in the temp
// directory (os.MkdirTemp pattern).
const storePattern = "durabench-nats-*"

// birthPattern names a store directory while it is made: it takes a name
// of storePattern only once its lock is in it (a rename), so every store
// a cleaner can see tells whether its process lives. A process killed in
// the microseconds before leaves a birth directory, empty or holding an
// unheld lock; the next start removes it (birthAge).
const birthPattern = ".durabench-nats-birth-*"

// birthAge is how old a birth directory with no lock in it must be before
// a start removes it: a process that is alive locks its birth directory
// within microseconds of making it.
const birthAge = time.Minute

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
	tmp := os.TempDir()
	removeStaleStores(tmp)
	var err error
	for range 3 { // a store of the same name appeared meanwhile: another name
		var s *store
		if s, err = makeStore(tmp); err == nil {
			return s, nil
		}
	}
	return nil, err
}

// makeStore makes a birth directory in tmp, locks it, and renames it to
// its store name.
func makeStore(tmp string) (*store, error) {
	birth, err := os.MkdirTemp(tmp, birthPattern)
	if err != nil {
		return nil, fmt.Errorf("natsworld: store dir: %w", err)
	}
	failpoint.At("nats-store-birth", nil)
	// The lock file appears under its name already locked (renamed after
	// flock), so a process cleaning up never takes a birth directory that
	// is being locked for a dead one's.
	f, err := os.CreateTemp(birth, lockName+".tmp-*")
	if err == nil {
		if err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			err = os.Rename(f.Name(), filepath.Join(birth, lockName))
		}
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.RemoveAll(birth)
		return nil, fmt.Errorf("natsworld: lock store dir: %w", err)
	}
	// The lock stays held across the rename (it is the file's, not its
	// path's). A directory of that name that is not empty is a store of
	// another process: rename fails, and the caller tries another name.
	suffix := strings.TrimPrefix(filepath.Base(birth), strings.TrimSuffix(birthPattern, "*"))
	dir := filepath.Join(tmp, strings.TrimSuffix(storePattern, "*")+suffix)
	if err := os.Rename(birth, dir); err != nil {
		f.Close()
		os.RemoveAll(birth)
		return nil, fmt.Errorf("natsworld: store dir: %w", err)
	}
	return &store{dir: dir, lock: f}, nil
}

// remove deletes the store and lets go of its lock.
func (s *store) remove() {
	_ = os.RemoveAll(s.dir)
	_ = s.lock.Close()
}

// removeStaleStores deletes the store directories in tmp whose lock no
// process holds, and the birth directories (birthPattern) of processes
// that died making one. A store without a lock file is left alone: it
// belongs to a durabench from before the locks.
func removeStaleStores(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, storePattern))
	for _, dir := range dirs {
		removeIfUnlocked(dir)
	}
	births, _ := filepath.Glob(filepath.Join(tmp, birthPattern))
	for _, dir := range births {
		if removeIfUnlocked(dir) {
			continue
		}
		// No lock yet: being made this instant, or its maker died
		// before it locked it.
		if _, err := os.Stat(filepath.Join(dir, lockName)); os.IsNotExist(err) {
			if fi, err := os.Stat(dir); err == nil && time.Since(fi.ModTime()) > birthAge {
				_ = os.RemoveAll(dir)
			}
		}
	}
}

// removeIfUnlocked deletes dir when its lock file exists and no process
// holds it, and reports whether it did.
func removeIfUnlocked(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	// Taken: its process is gone. EWOULDBLOCK: alive. Any other error:
	// cannot tell, leave it.
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false
	}
	_ = os.RemoveAll(dir)
	return true
}
