package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// seedResults are results files as durabench writes them: the package's
// sample, and the report fixtures' head file when there is one.
func seedResults(f *testing.F) [][]byte {
	f.Helper()
	dir := f.TempDir()
	path := filepath.Join(dir, "results.json")
	if err := Write(path, sampleFile()); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return [][]byte{b}
}

// FuzzResultsFile: any results.json (a baseline from another run, a file
// from the history store) decodes into a file that re-encodes and decodes
// to the same, or is rejected with an *InvalidError (exit 2).
func FuzzResultsFile(f *testing.F) {
	for _, b := range seedResults(f) {
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	for _, s := range []string{"", "schema: durabench\n", `{"name": "left-pad"}`, `{"schema": "durabench/results/v1",, }`, "\x89PNG\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Decode("results.json", data)
		if err != nil {
			var ie *InvalidError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %T %v is not an *InvalidError", err, err)
			}
			return
		}
		again, err := json.Marshal(file)
		if err != nil {
			t.Fatalf("a decoded file does not encode: %v", err)
		}
		file2, err := Decode("again.json", again)
		if err != nil {
			t.Fatalf("a decoded file does not decode again: %v", err)
		}
		third, _ := json.Marshal(file2)
		if !bytes.Equal(again, third) {
			t.Fatalf("encoding is not stable:\n%s\n%s", again, third)
		}
	})
}

// FuzzJournal: any journal (a crash may tear its last line anywhere)
// yields its complete, valid cells; a torn last line is dropped, never read
// as a cell; a bad line before the last is an *InvalidError. Opening it for appending keeps
// exactly the lines DecodeJournal returned.
func FuzzJournal(f *testing.F) {
	a := sampleFile().Cells[0]
	line, _ := json.Marshal(&a)
	line = append(line, '\n')
	two := append(append([]byte{}, line...), line...)
	f.Add(two)
	f.Add(two[:len(two)-7])
	f.Add(append(append([]byte{}, line...), "{\"scen\x00\x00\n"...))
	f.Add(append(append([]byte{}, line...), "{\"scenario\": 7}\n"+string(line)...))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cells, err := DecodeJournal("j", data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		for _, c := range cells {
			if err := validateCell("j", "cell", &c); err != nil {
				t.Fatalf("a returned cell is invalid: %v", err)
			}
		}
		// What OpenJournal keeps decodes to the same cells, and a cell
		// appended after it reads back as the next one.
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, JournalName), data, 0o644); err != nil {
			t.Fatal(err)
		}
		j, err := OpenJournal(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Append(a); err != nil {
			t.Fatal(err)
		}
		j.Close()
		after, err := ReadJournal(j.Path())
		if err != nil || len(after) != len(cells)+1 {
			t.Fatalf("after an append: %d cells (want %d), %v", len(after), len(cells)+1, err)
		}
	})
}
