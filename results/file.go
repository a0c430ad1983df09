package results

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/durabench/durabench/internal/failpoint"

	"github.com/durabench/durabench/metrics"
)

// ErrInvalid is wrapped by every error about a results file that cannot be
// used: missing or unreadable, not JSON, truncated, foreign (another
// schema), or inconsistent. The CLI maps it to exit code 2.
var ErrInvalid = errors.New("invalid results file")

// ErrSweepFailed is matched by every error saying a sweep itself failed, so
// its results file is partial or records an error (the CLI exits 3 on it):
// sweep.Run's, when a world could not be set up or died mid-sweep, and
// stats.GateReport.Err's, when the head sweep failed or is partial — its
// numbers are not a verdict.
var ErrSweepFailed = errors.New("sweep failed")

// InvalidError says which file and which field made it unusable.
type InvalidError struct {
	// File is the path (or name) of the file.
	File string
	// Field is the JSON path of the offending field, e.g.
	// "cells[2].metrics.ttls.hdr"; empty when the file as a whole is bad.
	Field string
	// Reason says what is wrong with it.
	Reason string
	// Err is the underlying error, if any (e.g. fs.ErrNotExist).
	Err error
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %v: %s", e.File, ErrInvalid, e.Reason)
	}
	return fmt.Sprintf("%s: %v: field %s: %s", e.File, ErrInvalid, e.Field, e.Reason)
}

// Unwrap makes errors.Is match ErrInvalid and the underlying error.
func (e *InvalidError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, e.Err}
}

// Version is durabench's version as written to results files. Release
// builds set it with -ldflags "-X github.com/durabench/durabench/results.Version=v1.2.3";
// when empty, the module version from the build info is used, else "devel".
var Version = ""

// NewFile returns a results document for a sweep started at started with
// plan: schema, methodology, durabench version, git commit (when it can be
// found: `git rev-parse HEAD` in the working directory, the repository
// under test, else the build's VCS stamp; never an error) and host. Cells
// start empty.
func NewFile(ctx context.Context, plan PlanRecord, started time.Time) *File {
	host, _ := os.Hostname()
	return &File{
		Schema:           Schema,
		Methodology:      Methodology,
		DurabenchVersion: durabenchVersion(),
		GitCommit:        gitCommit(ctx),
		StartedAt:        started.UTC(),
		Host: Host{CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH,
			Go: runtime.Version(), Hostname: host},
		Plan:  plan,
		Cells: []Cell{},
	}
}

func durabenchVersion() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

func gitCommit(ctx context.Context) string {
	var stamp string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				stamp = s.Value
			}
		}
	}
	return commitIn(ctx, "", stamp)
}

// commitIn is the commit a sweep run in dir ("": the working directory)
// measures: the HEAD of the repository dir is in — the engine or adapter
// under test, which durabench runs from its checkout (the action sweeps the
// baseline from a worktree of its ref) — else stamp, the commit durabench
// was built from (its own reference engine's), when it is one. The order
// matters: a durabench built in its own clone carries that clone's commit,
// and a sweep of another repository must not be labelled with it (both
// sides of a comparison would then show the same commit).
func commitIn(ctx context.Context, dir, stamp string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "HEAD")
	cmd.Dir = dir
	out, err := cmd.Output()
	if c := strings.TrimSpace(string(out)); err == nil && isHex(c) {
		return c
	}
	if isHex(stamp) {
		return stamp
	}
	return ""
}

func isHex(s string) bool {
	if len(s) < 7 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// Write writes f to path atomically: the JSON goes to a temporary file in
// the same directory, is synced, then renamed over path, so a reader (or a
// crash) sees either the old file or the whole new one. The directory is
// created when missing. f is validated first: Write never produces a file
// that Read would reject.
func Write(path string, f *File) error {
	g := *f
	if g.Cells == nil {
		g.Cells = []Cell{}
	}
	if err := validate(path, &g); err != nil {
		return err
	}
	data, err := json.MarshalIndent(&g, "", "  ")
	if err != nil {
		return fmt.Errorf("results: encode %s: %w", path, err)
	}
	return writeAtomic(path, append(data, '\n'))
}

// RemoveTemp removes what an interrupted Write of path left: its
// temporary files (a process killed mid-write cannot remove its own).
func RemoveTemp(path string) error {
	tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*"))
	for _, t := range tmps {
		if err := os.Remove(t); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("results: %w", err)
		}
	}
	return nil
}

func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if failpoint.Armed() {
		half := len(data) / 2
		if _, err = tmp.Write(data[:half]); err != nil {
			return fmt.Errorf("results: write %s: %w", tmp.Name(), err)
		}
		failpoint.At("results-write", tmp)
		data = data[half:]
	}
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("results: write %s: %w", tmp.Name(), err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("results: sync %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("results: close %s: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	// Sync the directory so the rename itself survives a crash.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Read reads and validates the results file at path. Every failure is an
// *InvalidError wrapping ErrInvalid that names the file and, where one is
// at fault, the field.
func Read(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &InvalidError{File: path, Reason: "cannot read: " + unwrapPath(err), Err: err}
	}
	return Decode(path, data)
}

func unwrapPath(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Decode parses and validates a results document; name identifies it in
// errors.
func Decode(name string, data []byte) (*File, error) {
	var f File
	if err := decodeJSON(name, data, &f); err != nil {
		return nil, err
	}
	if err := validate(name, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// decodeJSON unmarshals data into v, turning JSON errors into an
// InvalidError that names the field or the position.
func decodeJSON(name string, data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return &InvalidError{File: name, Reason: "empty file"}
	}
	if trimmed[0] != '{' {
		return &InvalidError{File: name, Reason: "not a JSON object"}
	}
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		if int(syn.Offset) >= len(data) || strings.Contains(syn.Error(), "unexpected end") {
			return &InvalidError{File: name, Reason: fmt.Sprintf("truncated JSON (ends after %d bytes)", len(data)), Err: err}
		}
		line, col := position(data, syn.Offset)
		return &InvalidError{File: name, Reason: fmt.Sprintf("not valid JSON at line %d, column %d: %v", line, col, syn), Err: err}
	case errors.As(err, &typ):
		return &InvalidError{File: name, Field: typ.Field,
			Reason: fmt.Sprintf("want %s, got JSON %s", typ.Type, typ.Value), Err: err}
	}
	return &InvalidError{File: name, Reason: err.Error(), Err: err}
}

func position(data []byte, off int64) (line, col int) {
	line, col = 1, 1
	for _, b := range data[:min(int(off), len(data))] {
		if b == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// validate checks what a reader relies on: the schema, the required
// fields, and that every metric's count, values and histogram agree.
func validate(name string, f *File) error {
	bad := func(field, format string, args ...any) error {
		return &InvalidError{File: name, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case f.Schema == "":
		return bad("schema", "missing (not a durabench results file)")
	case f.Schema != Schema:
		return bad("schema", "%q, want %q", f.Schema, Schema)
	case f.Methodology <= 0:
		return bad("methodology", "missing")
	case f.DurabenchVersion == "":
		return bad("durabench_version", "missing")
	case f.StartedAt.IsZero():
		return bad("started_at", "missing")
	case f.Host.CPUs <= 0:
		return bad("host.cpus", "missing")
	case f.Host.OS == "":
		return bad("host.os", "missing")
	case f.Host.Go == "":
		return bad("host.go", "missing")
	case f.Cells == nil:
		return bad("cells", "missing")
	}
	for i := range f.Cells {
		if err := validateCell(name, fmt.Sprintf("cells[%d]", i), &f.Cells[i]); err != nil {
			return err
		}
	}
	return nil
}

func validateCell(name, at string, c *Cell) error {
	bad := func(field, format string, args ...any) error {
		return &InvalidError{File: name, Field: at + "." + field, Reason: fmt.Sprintf(format, args...)}
	}
	required := []struct{ name, v string }{{"scenario", c.Scenario}, {"profile", c.Profile}}
	if c.Target == "" {
		// A foreign target's cell has no version or world of durabench's.
		required = append(required, struct{ name, v string }{"version", c.Version}, struct{ name, v string }{"world", c.World})
	}
	for _, f := range required {
		if f.v == "" {
			return bad(f.name, "missing")
		}
	}
	switch {
	case c.Runs < 0:
		return bad("runs", "negative (%d)", c.Runs)
	case c.Errors < 0 || c.Errors > c.Runs:
		return bad("errors", "%d of %d runs", c.Errors, c.Runs)
	case c.Stalls < 0 || c.Stalls > c.Runs:
		return bad("stalls", "%d of %d runs", c.Stalls, c.Runs)
	case c.Anomalies < 0 || c.Anomalies > c.Runs:
		return bad("anomalies", "%d of %d runs", c.Anomalies, c.Runs)
	case c.CPU != nil && !(c.CPU.DurabenchCores >= 0):
		return bad("cpu.durabench_cores", "%g, want a number of cores >= 0", c.CPU.DurabenchCores)
	case c.CPU != nil && c.CPU.TargetCores != nil && !(*c.CPU.TargetCores >= 0):
		return bad("cpu.target_cores", "%g, want a number of cores >= 0", *c.CPU.TargetCores)
	case c.CPU != nil && c.CPU.StealCores != nil && !(*c.CPU.StealCores >= 0):
		return bad("cpu.steal_cores", "%g, want a number of cores >= 0", *c.CPU.StealCores)
	case c.Metrics == nil:
		return bad("metrics", "missing")
	}
	// Sorted, so the first bad metric reported is always the same one.
	for _, k := range slices.Sorted(maps.Keys(c.Metrics)) {
		m := c.Metrics[k]
		if err := validateMetric(name, at+".metrics."+k, &m); err != nil {
			return err
		}
	}
	if c.DriverLag != nil {
		if err := validateMetric(name, at+".driver_lag", c.DriverLag); err != nil {
			return err
		}
	}
	if c.Pairing != nil {
		if err := validatePairing(name, at, c.Pairing); err != nil {
			return err
		}
	}
	if err := validatePath(name, at+".critical_path", c.CriticalPath); err != nil {
		return err
	}
	return validatePath(name, at+".critical_path_ttc", c.CompletionPath)
}

func knownRunStat(s string) bool {
	return s == string(metrics.RunMedian) || s == string(metrics.RunMean)
}

func validateMetric(name, at string, m *Metric) error {
	bad := func(field, format string, args ...any) error {
		return &InvalidError{File: name, Field: at + "." + field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case m.Unit == "":
		return bad("unit", "missing")
	case m.Values == nil && m.Count > 0:
		return bad("values", "missing")
	case m.Count != len(m.Values):
		return bad("count", "%d, but %d values", m.Count, len(m.Values))
	case m.Negative < 0 || m.Negative > m.Count:
		return bad("negative", "%d of %d samples", m.Negative, m.Count)
	case m.HDR == "":
		return bad("hdr", "missing")
	case len(m.PerRun) > m.Count:
		return bad("per_run", "%d runs, but %d samples", len(m.PerRun), m.Count)
	case len(m.PerRun) > 0 && m.PerRunStat == "":
		return bad("per_run_stat", "missing (per_run has %d values)", len(m.PerRun))
	case m.PerRunStat != "" && !knownRunStat(m.PerRunStat):
		return bad("per_run_stat", "%q, want %q or %q", m.PerRunStat, metrics.RunMedian, metrics.RunMean)
	}
	h, err := metrics.DecodeHistogram(m.HDR)
	if err != nil {
		return &InvalidError{File: name, Field: at + ".hdr", Reason: "undecodable: " + err.Error(), Err: err}
	}
	if h.Count() != int64(m.Count) {
		return bad("hdr", "holds %d samples, count is %d", h.Count(), m.Count)
	}
	return nil
}
