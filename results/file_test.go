package results

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sampleFile is a small valid results document.
func sampleFile() *File {
	f := NewFile(context.Background(), PlanRecord{Scenarios: []string{"fanout"}, Branches: []int{20},
		Versions: []VersionSpec{{Name: "baseline", Features: map[string]any{"dispatch": "sequential"}}},
		Switches: []string{"none"}, Worlds: []string{"mem"}, Profiles: []string{"none"}, Reps: 3, Pace: "burst",
		CellTimeoutMS: 60000, Seed: 1, WorldOptions: WorldOptions{RetryStyle: "redeliver", VisibilityTimeoutMS: 30000}},
		time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC))
	f.Cells = []Cell{{Scenario: "fanout", Branches: 20, Version: "baseline", Switches: []string{}, World: "mem",
		Profile: "none", Runs: 3, ElapsedMS: 12.5,
		Metrics: map[string]Metric{
			"ttls": NewMetric([]int64{1200, 900, 1500}, 0),
			"ttfs": NewMetric([]int64{100, 0, 120}, 1),
		}}}
	return f
}

func TestNewFile(t *testing.T) {
	f := sampleFile()
	if f.Schema != Schema || f.Methodology != Methodology || f.DurabenchVersion == "" {
		t.Errorf("header = %+v", f)
	}
	if f.Host.CPUs <= 0 || f.Host.OS == "" || f.Host.Go == "" {
		t.Errorf("host = %+v", f.Host)
	}
	// Tests run inside the repository: the commit is found.
	if len(f.GitCommit) != 40 {
		t.Logf("git commit not found (%q): fine outside a checkout", f.GitCommit)
	}
}

// The commit a results file carries is the repository's under test (the
// directory durabench runs in), not the one durabench was built from: a
// durabench built in its own clone, sweeping another repository's engine,
// must label its results with that repository's commit, or a comparison's
// two sides would show the same commit. Outside a repository, the build's.
func TestCommitIsTheRepositoryUnderTest(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := t.TempDir()
	// No repository above the test's directories counts.
	t.Setenv("GIT_CEILING_DIRECTORIES", root)
	repo := filepath.Join(root, "engine")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", ".")
	git("commit", "-q", "--allow-empty", "-m", "engine")
	head := git("rev-parse", "HEAD")
	stamp := strings.Repeat("ab", 20) // the commit durabench was built from
	ctx := context.Background()
	if got := commitIn(ctx, repo, stamp); got != head {
		t.Errorf("in the repository under test: commit %q, want its HEAD %q (not the build's %q)", got, head, stamp)
	}
	outside := filepath.Join(root, "plain")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := commitIn(ctx, outside, stamp); got != stamp {
		t.Errorf("outside a repository: commit %q, want the build's %q", got, stamp)
	}
	if got := commitIn(ctx, outside, ""); got != "" {
		t.Errorf("outside a repository, an unstamped build: commit %q, want none", got)
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "results.json")
	f := sampleFile()
	if err := Write(path, f); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, f) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", got, f)
	}
	// No temporary file is left behind.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries; want only results.json", len(entries))
	}
	// Overwrite in place.
	f.Partial = true
	if err := Write(path, f); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(path); err != nil || !got.Partial {
		t.Fatalf("rewrite: %v, %+v", err, got)
	}
}

func TestWriteRefusesInvalid(t *testing.T) {
	f := sampleFile()
	f.Cells[0].Scenario = ""
	path := filepath.Join(t.TempDir(), "results.json")
	if err := Write(path, f); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Write invalid: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Error("an invalid file was written")
	}
}

func TestReadInvalid(t *testing.T) {
	valid, err := validText(t)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		content string
		field   string // "" when the whole file is at fault
		reason  string
	}{
		{"empty", "", "", "empty file"},
		{"not JSON", "schema: durabench\n", "", "not a JSON object"},
		{"binary", "\x89PNG\r\n", "", "not a JSON object"},
		{"truncated", valid[:len(valid)/2], "", "truncated JSON"},
		{"syntax", `{"schema": "durabench/results/v1",, }`, "", "line 1, column"},
		{"foreign JSON", `{"name": "left-pad", "version": "1.0.0"}`, "schema", "missing (not a durabench results file)"},
		{"other schema", strings.Replace(valid, Schema, "durabench/results/v0", 1), "schema", `"durabench/results/v0", want`},
		{"wrong type", strings.Replace(valid, `"runs": 3`, `"runs": "3"`, 1), "cells.runs", "want int"},
		{"missing started_at", strings.Replace(valid, `"started_at": "2026-11-29T09:30:00Z",`, "", 1), "started_at", "missing"},
		{"missing cells", strings.Replace(valid, `"cells": [`, `"cellz": [`, 1), "cells", "missing"},
		{"missing scenario", strings.Replace(valid, `"scenario": "fanout",`, "", 1), "cells[0].scenario", "missing"},
		{"count mismatch", strings.Replace(valid, `"count": 3,`, `"count": 4,`, 1), "cells[0].metrics.ttfs.count", "4, but 3 values"},
		{"bad hdr", replaceHDR(t, valid, "not-base64!"), "cells[0].metrics.ttfs.hdr", "undecodable"},
		{"hdr disagrees", replaceHDR(t, valid, NewMetric([]int64{1}, 0).HDR), "cells[0].metrics.ttfs.hdr", "holds 1 samples, count is 3"},
		{"negative cores", strings.Replace(valid, `"runs": 3`, `"runs": 3, "cpu": {"durabench_cores": 0.5, "target_cores": -1}`, 1),
			"cells[0].cpu.target_cores", "-1, want a number of cores >= 0"},
		{"negative steal", strings.Replace(valid, `"runs": 3`, `"runs": 3, "cpu": {"durabench_cores": 0.5, "steal_cores": -0.1}`, 1),
			"cells[0].cpu.steal_cores", "-0.1, want a number of cores >= 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "results.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Read(path)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Read: %v; want ErrInvalid", err)
			}
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.File != path || ie.Field != tc.field || !strings.Contains(ie.Reason, tc.reason) {
				t.Errorf("error %q (field %q); want field %q, reason containing %q", err, ie.Field, tc.field, tc.reason)
			}
			if !strings.HasPrefix(err.Error(), path+": invalid results file") {
				t.Errorf("error %q does not start with the file", err)
			}
		})
	}
}

func TestReadMissing(t *testing.T) {
	_, err := Read(filepath.Join(t.TempDir(), "nope.json"))
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read missing: %v", err)
	}
}

// validText writes sampleFile and returns its text.
func validText(t *testing.T) (string, error) {
	path := filepath.Join(t.TempDir(), "valid.json")
	if err := Write(path, sampleFile()); err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	return string(b), err
}

// replaceHDR swaps the ttfs histogram (the first metric in key order) for hdr.
func replaceHDR(t *testing.T, text, hdr string) string {
	t.Helper()
	old := NewMetric([]int64{100, 0, 120}, 1).HDR
	if !strings.Contains(text, old) {
		t.Fatal("sample ttfs hdr not found")
	}
	return strings.Replace(text, old, hdr, 1)
}
