package reporters

import (
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPNG renders every chart of the fixture with its baseline, decodes each
// file and checks its size and that it is a chart, not a blank canvas. Set
// DURABENCH_PNG_DIR to keep the files for a look.
func TestPNG(t *testing.T) {
	dir := os.Getenv("DURABENCH_PNG_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	files, err := PNG(dir, fixtureHead(), fixtureBase())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"cdf-fanout-256-branches-mem-none.png": false, "ttls-vs-branches.png": false,
		"stso-sequential-50-steps-baseline.png": false, "skew-fanout-256-branches-mem-none.png": false,
		"critical-path-fanout.png": false}
	for _, path := range files {
		name := filepath.Base(path)
		if _, ok := want[name]; ok {
			want[name] = true
		}
		checkChart(t, path)
	}
	for name, seen := range want {
		if !seen {
			t.Errorf("no %s among %v", name, files)
		}
	}
	// 4 CDFs (3 fan-out widths, 1 sequence), the cliff, 2 STSO histograms,
	// 3 skew charts, the fan-out's critical path.
	if len(files) != 11 {
		t.Errorf("%d charts: %v", len(files), files)
	}
}

func checkChart(t *testing.T, path string) {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	img, err := png.Decode(fh)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != chartWidthPx || b.Dy() != chartHeightPx {
		t.Errorf("%s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), chartWidthPx, chartHeightPx)
	}
	colours, inked := inkStats(img)
	// Lines, text and fills in several colours: a blank or one-colour
	// canvas has a handful of colours and almost no ink.
	if colours < 20 || inked < 0.01 {
		t.Errorf("%s looks blank: %d colours, %.2f%% non-white pixels", path, colours, inked*100)
	}
}

func inkStats(img image.Image) (colours int, inked float64) {
	// Every other pixel of every other row: enough to see lines and text,
	// a quarter of the work under -race.
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	n, total := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			total++
			r, g, bb, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bb, a}] = true
			if r < 0xf000 || g < 0xf000 || bb < 0xf000 {
				n++
			}
		}
	}
	return len(seen), float64(n) / float64(total)
}

func TestPNGWithoutBaseline(t *testing.T) {
	// A partial sweep on the sim world: fewer cells (charts render slowly
	// under -race), titles marked.
	f := variant("", true, true)
	files, err := PNG(t.TempDir(), f, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range files {
		checkChart(t, p)
	}
	if len(files) == 0 || !strings.HasSuffix(files[0], ".png") {
		t.Errorf("charts: %v", files)
	}
}
