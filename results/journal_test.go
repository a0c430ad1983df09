package results

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestJournal(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := sampleFile().Cells[0]
	b := a
	b.Branches = 64
	for _, c := range []Cell{a, b} {
		if err := j.Append(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(a); err == nil {
		t.Error("Append after Close succeeded")
	}
	cells, err := ReadJournal(j.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cells, []Cell{a, b}) {
		t.Errorf("journal = %+v", cells)
	}
}

func TestJournalTornLine(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := sampleFile().Cells[0]
	if err := j.Append(a); err != nil {
		t.Fatal(err)
	}
	j.Close()
	// A crash mid-write: half of the next line, no newline.
	path := filepath.Join(dir, JournalName)
	data, _ := os.ReadFile(path)
	torn := append(data, data[:len(data)/2]...)
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	cells, err := ReadJournal(path)
	if err != nil || len(cells) != 1 {
		t.Fatalf("ReadJournal torn: %d cells, %v", len(cells), err)
	}
	// A torn last line that does end in a newline (zero-filled block) is
	// also ignored.
	if err := os.WriteFile(path, append(append([]byte{}, data...), "{\"scen\x00\x00\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if cells, err := ReadJournal(path); err != nil || len(cells) != 1 {
		t.Fatalf("ReadJournal torn with newline: %d cells, %v", len(cells), err)
	}

	// Resuming cuts the torn tail, so the next cell starts on its own line.
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	j, err = OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := a
	b.Branches = 256
	if err := j.Append(b); err != nil {
		t.Fatal(err)
	}
	j.Close()
	cells, err = ReadJournal(path)
	if err != nil || len(cells) != 2 || cells[1].Branches != 256 {
		t.Fatalf("after resume: %d cells, %v", len(cells), err)
	}
}

func TestJournalCorruptMiddleLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, JournalName)
	j, _ := OpenJournal(dir)
	a := sampleFile().Cells[0]
	j.Append(a)
	j.Close()
	data, _ := os.ReadFile(path)
	bad := string(data) + "{\"scenario\": 7}\n" + string(data)
	os.WriteFile(path, []byte(bad), 0o644)
	_, err := ReadJournal(path)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), JournalName+":2") {
		t.Fatalf("corrupt middle line: %v", err)
	}
	missing := a
	missing.World = ""
	j, _ = OpenJournal(t.TempDir())
	j.Append(missing)
	j.Append(a)
	j.Close()
	if _, err := ReadJournal(j.Path()); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "cell.world") {
		t.Fatalf("invalid cell: %v", err)
	}
}
