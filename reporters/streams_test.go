package reporters

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/results"
)

// streamFile is a results file with two stream-replay cells of 4 runs of 40
// chunks: chunk round trips of 1 ms, rising along the stream in the second
// cell, and one 500 ms chunk in one run of the first.
func streamFile() *results.File {
	cell := func(opts map[string]string, rise bool) results.Cell {
		var tls []metrics.RunTimeline
		for r := range 4 {
			tl := metrics.RunTimeline{ID: "r" + string(rune('0'+r)), Finished: true, Done: time.Second,
				Steps: []engine.StepSpan{{Stage: 0, Index: 0, Start: 0, End: time.Second}, {Stage: 0, Index: 1, Seq: 1, Start: 0, End: time.Second}}}
			for i := range 40 {
				w := time.Duration(i) * 10 * time.Millisecond
				rtt := time.Millisecond
				if rise {
					rtt += time.Duration(i) * 100 * time.Microsecond
				}
				if !rise && r == 2 && i == 30 {
					rtt = 500 * time.Millisecond
				}
				tl.Chunks = append(tl.Chunks, engine.ChunkSpan{Index: i, Written: w, Read: w + rtt, Bytes: 100})
			}
			tls = append(tls, tl)
		}
		c := results.BuildCell(results.Cell{Scenario: "stream-replay", Options: opts, Version: "pending-count", World: "sim", Profile: "cloud"},
			tls, results.BuildOptions{Metrics: metrics.Config{Stream: &engine.StreamSpec{Chunks: 40, Interval: 10 * time.Millisecond}}})
		c.CadenceSHA256 = "6eb911f5c28f9fa9de3cf4e7ca40eba70537f704a991954d323d5ad80ac7ed0d"
		return c
	}
	f := &results.File{Schema: results.Schema, Methodology: results.Methodology, VirtualTime: true,
		Cells: []results.Cell{cell(nil, false), cell(map[string]string{"speed": "2"}, true)}}
	f.Plan.Scenarios = []string{"stream-replay"}
	return f
}

// TestStreamReports: a stream cell's text and markdown reports carry the
// CRTT-by-bucket table, where the one stalled chunk is the first cell's
// CDV max, and the cadence's SHA-256; the PNG charts include mean CRTT over
// stream progress.
func TestStreamReports(t *testing.T) {
	f := streamFile()
	var text bytes.Buffer
	if err := Text(&text, f, Options{}); err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := Markdown(&md, f, Options{Now: fixedNow}); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text.String(), "markdown": md.String()} {
		for _, want := range []string{"CRTT 0 p50", "CRTT 1–20 p50", "CRTT 21+ p99", "CDV max", "499.0ms", "write slip max",
			"read µs/KiB p50", "sha256 6eb911f5c28f9fa9de3cf4e7ca40eba70537f704a991954d323d5ad80ac7ed0d"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s report has no %q:\n%s", name, want, out)
			}
		}
	}
	dir := t.TempDir()
	files, err := PNG(dir, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "crtt-progress-stream-replay.png")
	found := false
	for _, p := range files {
		found = found || p == path
	}
	if !found {
		t.Fatalf("no %s among %v", path, files)
	}
	checkChart(t, path)

	// A size sweep also gets mean CRTT by chunk size.
	sizes := streamFile()
	sizes.Cells[1].Scenario = "stream-sizes"
	sizes.Cells[1].CRTTBySize = []results.CRTTBin{{Key: 64, Count: 80, MeanUS: 900}, {Key: 64 << 10, Count: 80, MeanUS: 1500}}
	files, err = PNG(dir, sizes, nil)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "crtt-by-size-stream-sizes.png")
	if !slices.Contains(files, path) {
		t.Fatalf("no %s among %v", path, files)
	}
	checkChart(t, path)
	var sizeText bytes.Buffer
	if err := Text(&sizeText, sizes, Options{}); err != nil {
		t.Fatal(err)
	}
	if want := "64B 900.0µs (n=80) · 64KB 1.500ms (n=80)"; !strings.Contains(sizeText.String(), want) {
		t.Errorf("the size sweep's text report has no %q:\n%s", want, sizeText.String())
	}
}
