package results

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestHistory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "history")
	if files, err := LoadHistory(dir, 10); err != nil || len(files) != 0 {
		t.Fatalf("empty history: %v, %v", files, err)
	}
	base := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	for i, commit := range []string{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "", "cccccccccccccccccccccccccccccccccccccccc"} {
		f := sampleFile()
		f.GitCommit = commit
		f.StartedAt = base.Add(time.Duration(i) * time.Hour)
		path, err := AddHistory(dir, f)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && filepath.Base(path) != "20261129T090000Z-aaaaaaaaaaaa.json" {
			t.Errorf("history name %s", filepath.Base(path))
		}
		if i == 1 && filepath.Base(path) != "20261129T100000Z-nocommit.json" {
			t.Errorf("history name %s", filepath.Base(path))
		}
	}
	files, err := LoadHistory(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].GitCommit[:1] != "c" || files[1].GitCommit != "" {
		t.Fatalf("LoadHistory(2) = %d files, newest %q", len(files), files[0].GitCommit)
	}
	all, err := LoadHistory(dir, 0)
	if err != nil || len(all) != 3 || all[2].GitCommit[:1] != "a" {
		t.Fatalf("LoadHistory(0) = %d files, %v", len(all), err)
	}
	// A corrupt entry is an error naming it.
	os.WriteFile(filepath.Join(dir, "20261129T110000Z-dddddddddddd.json"), []byte("{"), 0o644)
	if _, err := LoadHistory(dir, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("corrupt history entry: %v", err)
	}
}
