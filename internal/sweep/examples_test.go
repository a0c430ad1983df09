package sweep

import (
	"path/filepath"
	"testing"
)

// TestExampleSweepFiles: every sweep file under examples/ loads and
// validates (published.yaml is a calibrate table, not a sweep file).
func TestExampleSweepFiles(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if filepath.Base(f) == "published.yaml" {
			continue
		}
		n++
		p := DefaultPlan()
		if err := p.LoadFile(f); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if n < 5 {
		t.Fatalf("%d example sweep files, want at least 5", n)
	}
	p := DefaultPlan()
	if err := p.LoadFile("../../examples/engines.yaml"); err != nil {
		t.Fatal(err)
	}
	if len(p.Targets) != 4 || p.Targets[1].Name != "goworkflows" {
		t.Errorf("engines.yaml targets %v", p.Targets)
	}
	cells, err := p.Cells()
	if err != nil {
		t.Fatal(err)
	}
	// fanout 3 sizes + sequential 1, for 4 engines.
	if len(cells) != 16 {
		t.Errorf("engines.yaml: %d cells, want 16", len(cells))
	}
}
