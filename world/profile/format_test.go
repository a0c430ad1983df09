package profile_test

import (
	"bytes"
	"testing"

	"github.com/durabench/durabench/world/profile"
)

// TestFormatRoundTrip: every shipped profile, and one with every kind of
// field, written by Format and read back by Parse is the same profile, and
// writing it again gives the same bytes.
func TestFormatRoundTrip(t *testing.T) {
	custom, err := profile.Parse("custom.yaml", []byte(`name: custom
description: "a: quoted, description"
ops:
  default: {latency: {dist: normal, mean: 20ms, stddev: 5ms}, transient: 0.125%, per_event: 3us}
  step_created: {latency: 25ms, transient: 2%}
  log_load: {latency: {dist: lognormal, median: 1.25ms, p99: 40ms}, per_event: 50us, capacity: 4}
  publish: {capacity: 3}
  deliver: {latency: 2ms, concurrency: 96}
groups:
  w: {ops: [run_get, appends], capacity: 16}
targets: {ttfs: [200ms, 300ms, 600ms]}
`))
	if err != nil {
		t.Fatal(err)
	}
	profiles := []*profile.Profile{custom}
	for _, name := range profile.Names() {
		p, err := profile.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		profiles = append(profiles, p)
	}
	for _, p := range profiles {
		out := profile.Format(p, "written by a test\n\nsecond paragraph")
		q, err := profile.Parse(p.Name+".yaml", out)
		if err != nil {
			t.Fatalf("%s: %v\n%s", p.Name, err, out)
		}
		if a, b := p.Describe(), q.Describe(); a[bytes.IndexByte([]byte(a), '\n'):] != b[bytes.IndexByte([]byte(b), '\n'):] {
			t.Errorf("%s: read back differently:\n%s\nvs\n%s\nfrom\n%s", p.Name, a, b, out)
		}
		if q.Description != p.Description {
			t.Errorf("%s: description %q, read back %q", p.Name, p.Description, q.Description)
		}
		if again := profile.Format(q, "written by a test\n\nsecond paragraph"); !bytes.Equal(again, out) {
			t.Errorf("%s: written twice differently:\n%s\nvs\n%s", p.Name, out, again)
		}
	}
}
