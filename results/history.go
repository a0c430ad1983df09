package results

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// historyTimeLayout names history files so that their names sort by start
// time (UTC, no characters a file system or a shell would trip on).
const historyTimeLayout = "20060102T150405Z"

// HistoryName is the file name a results file gets in a history store:
// "<started_at>-<commit12>.json", with "nocommit" when the commit is
// unknown.
func HistoryName(f *File) string {
	commit := f.GitCommit
	if commit == "" {
		commit = "nocommit"
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	return f.StartedAt.UTC().Format(historyTimeLayout) + "-" + commit + ".json"
}

// AddHistory stores f in the history directory dir (created when missing)
// under HistoryName(f), atomically, and returns the file's path. Adding the
// same sweep again replaces its file.
func AddHistory(dir string, f *File) (string, error) {
	path := filepath.Join(dir, HistoryName(f))
	if err := Write(path, f); err != nil {
		return "", err
	}
	return path, nil
}

// LoadHistory reads up to n results files from the history directory dir,
// newest first (by start time); n <= 0 reads them all. A missing directory
// is an empty history. A corrupt file is an error naming it: a history is
// only as good as every entry in it.
func LoadHistory(dir string, n int) ([]*File, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("results: history: %w", err)
	}
	var names []string
	for _, e := range entries {
		if name := e.Name(); !e.IsDir() && strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, ".") {
			names = append(names, name)
		}
	}
	// Names start with the UTC start time, so name order is time order.
	slices.Sort(names)
	slices.Reverse(names)
	if n > 0 && len(names) > n {
		names = names[:n]
	}
	files := make([]*File, 0, len(names))
	for _, name := range names {
		f, err := Read(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("results: history: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}
