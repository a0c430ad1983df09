package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/durabench/durabench/internal/failpoint"
)

// JournalName is the journal's file name inside a sweep's output directory.
const JournalName = "results.partial.jsonl"

// Journal appends each finished cell to DIR/results.partial.jsonl, one JSON
// line per cell, synced before Append returns: an interrupted or crashed
// sweep loses no finished cell, and --resume skips the cells it holds. It is
// safe for concurrent use.
type Journal struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

// OpenJournal opens (creating when missing) the journal in dir for
// appending. A torn last line left by a crash mid-write is cut off first, so
// the next line starts on a line of its own.
func OpenJournal(dir string) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("results: journal: %w", err)
	}
	path := filepath.Join(dir, JournalName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("results: journal: %w", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("results: journal: %w", err)
	}
	// Keep the complete lines: a torn last line (a crash mid-write, with
	// or without its newline) is cut, so the next cell starts a line of its
	// own and the torn one is never read as a cell.
	j, keep := decodeJournal(path, data)
	if j.err != nil {
		// A bad line mid-file is not a crash's: keep every line for
		// ReadJournal to name it, only an unfinished one is cut.
		keep = int64(bytes.LastIndexByte(data, '\n') + 1)
	}
	if keep < int64(len(data)) {
		if err := f.Truncate(keep); err != nil {
			f.Close()
			return nil, fmt.Errorf("results: journal: cut torn line: %w", err)
		}
	}
	if _, err := f.Seek(keep, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("results: journal: %w", err)
	}
	return &Journal{f: f, path: path}, nil
}

// Append writes cell as one line and syncs it to disk.
func (j *Journal) Append(cell Cell) error {
	line, err := json.Marshal(&cell)
	if err != nil {
		return fmt.Errorf("results: journal: encode cell: %w", err)
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return fmt.Errorf("results: journal %s: closed", j.path)
	}
	// One write per line: a crash leaves at most one torn line, at the end.
	if failpoint.Armed() {
		half := len(line) / 2
		if _, err := j.f.Write(line[:half]); err != nil {
			return fmt.Errorf("results: journal %s: %w", j.path, err)
		}
		failpoint.At("journal-append", j.f)
		line = line[half:]
	}
	if _, err := j.f.Write(line); err != nil {
		return fmt.Errorf("results: journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("results: journal %s: sync: %w", j.path, err)
	}
	return nil
}

// Close closes the journal file.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// Discard closes and deletes the journal: the sweep it protected wrote its
// complete results, which hold every cell it had.
func (j *Journal) Discard() error {
	if err := j.Close(); err != nil {
		return err
	}
	if err := os.Remove(j.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("results: journal %s: %w", j.path, err)
	}
	return nil
}

// ReadJournal returns the cells in the journal at path, in the order they
// were appended (see DecodeJournal). A missing journal is an error wrapping
// fs.ErrNotExist (and ErrInvalid).
func ReadJournal(path string) ([]Cell, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &InvalidError{File: path, Reason: "cannot read: " + unwrapPath(err), Err: err}
	}
	return DecodeJournal(path, data)
}

// DecodeJournal returns the cells of a journal's contents; name identifies
// it in errors. A torn last line (no newline, or not decodable: a crash
// mid-write) is dropped; any other bad line is an *InvalidError naming it.
func DecodeJournal(name string, data []byte) ([]Cell, error) {
	j, _ := decodeJournal(name, data)
	return j.cells, j.err
}

type journalContents struct {
	cells []Cell
	err   error
}

// decodeJournal decodes data and returns, as keep, the length of its
// complete, decodable lines: what is past it is a torn last line.
func decodeJournal(name string, data []byte) (j journalContents, keep int64) {
	rest := data
	for n := 1; len(rest) > 0; n++ {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break // torn: the write of the last line never finished
		}
		line := bytes.TrimSpace(rest[:i])
		rest = rest[i+1:]
		if len(line) > 0 {
			var c Cell
			at := fmt.Sprintf("%s:%d", name, n)
			if err := decodeJSON(at, line, &c); err != nil {
				if len(bytes.TrimSpace(rest)) == 0 {
					break // the last line: torn
				}
				j.err = err
				return j, keep
			}
			// A line that decodes was written whole: if it is not a
			// cell, the journal is not one.
			if err := validateCell(at, "cell", &c); err != nil {
				j.err = err
				return j, keep
			}
			j.cells = append(j.cells, c)
		}
		keep = int64(len(data) - len(rest))
	}
	return j, keep
}
