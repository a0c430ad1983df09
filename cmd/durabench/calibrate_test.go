package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durabench/durabench/world/profile"
)

// TestCalibrate: a fit of a small table prints the profile, the parameters
// and the residuals, and writes a profile file that a sweep runs on; its
// header names the command.
func TestCalibrate(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "observed.yaml", `profile: small
reps: 5
warmup: 1
cells:
  - version: baseline
    branches: 8
    metrics:
      ttls: {p50: 400ms}
      dispatch.publish: {p50: 150ms}
`)
	r := durabench(t, dir, "calibrate", "observed.yaml", "--base", "cloud-v1", "--max-evals", "12", "-q")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, w := range []string{"fitted small to observed.yaml", "name: small", "publish.latency", "observed", "ttls p50", "profile: small.yaml"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("output does not show %q:\n%s", w, r.stdout)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "# small: fitted on the sim world by\n#\n#     durabench calibrate observed.yaml --base cloud-v1\n") {
		t.Errorf("header:\n%s", data)
	}
	if _, err := profile.Load(filepath.Join(dir, "small.yaml")); err != nil {
		t.Fatal(err)
	}
	r = durabench(t, dir, "sweep", "--world", "sim", "--profile", "small.yaml", "--branches", "8", "--versions", "baseline",
		"--switches", "none", "--reps", "2", "--out", "sweep")
	if r.code != 0 {
		t.Fatalf("sweep on the fitted profile: exit %d: %s", r.code, r.stderr)
	}

	// The table is never overwritten by the default output file.
	write(t, dir, "clash.yaml", strings.Replace(string(must(os.ReadFile(filepath.Join(dir, "observed.yaml")))), "profile: small", "profile: clash", 1))
	r = durabench(t, dir, "calibrate", "clash.yaml", "-q")
	if r.code != 2 || !strings.Contains(r.stderr, "--out") {
		t.Errorf("a fit written over its own table: exit %d, stderr %q", r.code, r.stderr)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestCalibrateCheckPublished: `durabench calibrate examples/published.yaml
// --check` prints the fidelity table: the shipped cloud against the
// published figures, every fitted one within ±20%.
func TestCalibrateCheckPublished(t *testing.T) {
	r := durabench(t, "../..", "calibrate", "examples/published.yaml", "--check")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "cloud against examples/published.yaml (sim, seed 1): 14 of 14 fitted figures within ±20%") {
		t.Errorf("output:\n%s", r.stdout)
	}
}

// TestCalibratePublishedWritesCloud: `durabench calibrate
// examples/published.yaml` writes the profile shipped as cloud, byte for
// byte (cloud is the fit's fixed point). About a minute on two cores: make
// calibrate runs it.
func TestCalibratePublishedWritesCloud(t *testing.T) {
	if os.Getenv("DURABENCH_CALIBRATE") == "" {
		t.Skip("about a minute: make calibrate runs it (DURABENCH_CALIBRATE=1)")
	}
	out := filepath.Join(t.TempDir(), "cloud.yaml")
	r := durabench(t, "../..", "calibrate", "examples/published.yaml", "--out", out)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	t.Log(r.stdout)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../world/profile/builtin/cloud.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("durabench calibrate examples/published.yaml wrote a profile other than the shipped cloud:\n%s", got)
	}
}

// TestListProfile: `durabench list --profile NAME` prints every number of the
// profile, deliver's concurrency and the shared pool included; a bad name or
// override is one usage error.
func TestListProfile(t *testing.T) {
	r := durabench(t, t.TempDir(), "list", "--profile", "cloud", "--faults", "deliver.concurrency=32")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"cloud[deliver.concurrency=32] (builtin)", "log_load", "1.44ms",
		"deliveries: at most 32 handlers of a consumer at once", "group backend: at most 15 in flight"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in\n%s", want, r.stdout)
		}
	}
	for _, args := range [][]string{{"--profile", "nope"}, {"--profile", "cloud", "--faults", "deliver.concurrency=0"}} {
		r := durabench(t, t.TempDir(), append([]string{"list"}, args...)...)
		if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || r.stdout != "" {
			t.Errorf("list %v: exit %d, stdout %q, stderr %q; want one line and exit 2", args, r.code, r.stdout, r.stderr)
		}
	}
}
