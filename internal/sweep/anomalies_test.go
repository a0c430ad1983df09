package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/target/reference"
	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/reporters"
	"github.com/durabench/durabench/results"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// duplicateTerminal is a target's own history check on the wire: the
// reference engine's answers, with an anomaly — run_completed written
// twice — on the timelines of the runs started in the positions of mark
// (1-based, in start order), as the Workflow SDK's adapter reports 4.8.9's
// duplicate terminal events on world-local. It answers both the per-run
// timeline poll and the batch poll, and counts starts sent alone and in
// batches (POST /v1/starts); it declares batch 2 (no session streams).
type duplicateTerminal struct {
	h    http.Handler
	mark []int

	mu     sync.Mutex
	starts int
	marked []string // run ids, in start order
}

const dupDetail = "run_completed written 2 times"

func (d *duplicateTerminal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && (r.URL.Path == "/v1/runs" || r.URL.Path == "/v1/starts"):
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var batch protocol.StartsRequest
		if r.URL.Path == "/v1/starts" {
			_ = json.Unmarshal(body, &batch)
		} else {
			var req protocol.StartRequest
			if json.Unmarshal(body, &req) == nil {
				batch.Runs = []protocol.StartRequest{req}
			}
		}
		for _, req := range batch.Runs {
			if req.Run == "" {
				continue
			}
			d.mu.Lock()
			d.starts++
			if slices.Contains(d.mark, d.starts) && !slices.Contains(d.marked, req.Run) {
				d.marked = append(d.marked, req.Run)
			}
			d.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		d.h.ServeHTTP(w, r)
	case strings.HasSuffix(r.URL.Path, "/timeline") || r.URL.Path == "/v1/timelines":
		rec := httptest.NewRecorder()
		d.h.ServeHTTP(rec, r)
		out := rec.Body.Bytes()
		if rec.Code == http.StatusOK {
			// The answer as JSON on the wire, edited by the protocol's field
			// names (docs/target-protocol.md), not through package target's
			// types: a renamed field must not go unnoticed.
			var m map[string]any
			if json.Unmarshal(out, &m) == nil {
				if tls, ok := m["timelines"].([]any); ok {
					for _, tl := range tls {
						if tl, ok := tl.(map[string]any); ok {
							d.annotate(tl)
						}
					}
				} else {
					d.annotate(m)
				}
				out, _ = json.Marshal(m)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(out)
	case r.URL.Path == "/v1/info":
		// Batch 2 at most: this wrapper edits requests and answers, not
		// a session stream's lines.
		rec := httptest.NewRecorder()
		d.h.ServeHTTP(rec, r)
		var m map[string]any
		out := rec.Body.Bytes()
		if json.Unmarshal(out, &m) == nil {
			m["batch"] = protocol.BatchStarts
			out, _ = json.Marshal(m)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(out)
	default:
		d.h.ServeHTTP(w, r)
	}
}

// annotate adds the anomaly to a marked run's answer once the run is over
// (the whole history is known then; the list replaces earlier ones): its
// status is terminal, or its terminal event is in the answer — a session
// stops following a run at that event, and the reference server may
// answer it a moment before its status says so (CI saw that answer).
func (d *duplicateTerminal) annotate(tl map[string]any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	run, _ := tl["run"].(string)
	status, _ := tl["status"].(string)
	over := status == protocol.StatusCompleted || status == protocol.StatusFailed
	evs, _ := tl["events"].([]any)
	for _, ev := range evs {
		if ev, ok := ev.(map[string]any); ok && (ev["kind"] == protocol.EventRunCompleted || ev["kind"] == protocol.EventRunFailed) {
			over = true
		}
	}
	if over && slices.Contains(d.marked, run) {
		tl["anomalies"] = []map[string]string{{"kind": "duplicate_terminal_event", "detail": dupDetail}}
	}
}

func (d *duplicateTerminal) runs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.marked)
}

// TestTargetAnomaliesReported: what a target finds wrong in its runs'
// histories — a duplicate terminal event on 2 of 5 runs — reaches
// results.json (the cell's anomalies count and its anomalous runs, by id
// and with what was found) and both reports, next to the stalls and
// errors; a target that finds nothing leaves no trace of anomalies.
func TestTargetAnomaliesReported(t *testing.T) {
	for _, tc := range []struct {
		name string
		mark []int // runs (1-based, in start order) with a duplicate terminal event
	}{
		{name: "duplicate terminal event on 2 of 5 runs", mark: []int{2, 4}},
		{name: "a clean history", mark: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := engine.LookupVersion("pending-count")
			if err != nil {
				t.Fatal(err)
			}
			srv, err := protocol.NewServer(context.Background(), reference.New(mem.New(world.Options{}), v))
			if err != nil {
				t.Fatal(err)
			}
			dt := &duplicateTerminal{h: srv, mark: tc.mark}
			hs := httptest.NewServer(dt)
			defer func() {
				hs.Close()
				_ = srv.Close(context.Background())
			}()
			out := t.TempDir()
			res := sweepSteps(t, hs.URL, 5, out)
			want := dt.runs()
			if len(want) != len(tc.mark) {
				t.Fatalf("the target marked runs %v, want %d of them", want, len(tc.mark))
			}

			// results.json, as read back from disk.
			f, err := results.Read(filepath.Join(out, ResultsName))
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Cells) != 1 {
				t.Fatalf("%d cells, want 1", len(f.Cells))
			}
			c := f.Cells[0]
			if c.Runs != 5 || c.Stalls != 0 || c.Errors != 0 {
				t.Fatalf("cell: %d runs, %d stalls, %d errors; want 5 runs, none stalled or failed", c.Runs, c.Stalls, c.Errors)
			}
			var got []string
			for _, ar := range c.AnomalousRuns {
				got = append(got, ar.Run)
				if len(ar.Anomalies) != 1 || ar.Anomalies[0].Kind != "duplicate_terminal_event" || ar.Anomalies[0].Detail != dupDetail {
					t.Errorf("run %s: anomalies %+v, want the duplicate terminal event", ar.Run, ar.Anomalies)
				}
			}
			if c.Anomalies != len(tc.mark) || !slices.Equal(got, want) {
				t.Fatalf("results: anomalies %d, anomalous runs %v; want %d, %v", c.Anomalies, got, len(tc.mark), want)
			}

			// report.md: the anomalies line with the run ids, among the
			// stalls and errors; the engines table's anomalies column.
			md, err := os.ReadFile(res.ReportPath)
			if err != nil {
				t.Fatal(err)
			}
			if os.Getenv("SHOW_REPORT") != "" {
				t.Logf("%s", md)
			}
			mdAnomalies := strings.Contains(string(md), "**Anomalies**") || strings.Contains(string(md), " anomalies |")
			if len(tc.mark) == 0 {
				if mdAnomalies {
					t.Errorf("report.md shows anomalies for a clean history:\n%s", md)
				}
			} else {
				line := lineWith(string(md), "**Anomalies** in `")
				if !strings.Contains(line, ": 2 of 5 runs' histories") {
					t.Errorf("report.md anomalies line %q, want 2 of 5 runs:\n%s", line, md)
				}
				for _, id := range want {
					if !strings.Contains(line, "`"+id+"` (duplicate_terminal_event: "+dupDetail+")") {
						t.Errorf("report.md anomalies line %q does not name run %s and what was wrong", line, id)
					}
				}
				if !strings.Contains(lineWith(string(md), "| scenario |"), "| stalls | errors | anomalies |") ||
					!strings.HasSuffix(lineAfter(string(md), "|---|"), "| 0 | 0 | 2 |") {
					t.Errorf("report.md engines table: want an anomalies column of 2 next to stalls 0 and errors 0:\n%s", md)
				}
			}

			// The text report: an anomalies column right after stalls and
			// errors, with the cell's count.
			var txt strings.Builder
			if err := reporters.Text(&txt, f, reporters.Options{}); err != nil {
				t.Fatal(err)
			}
			head := strings.Fields(lineWith(txt.String(), "stalls"))
			i := slices.Index(head, "stalls")
			if i < 0 || i+1 >= len(head) || head[i+1] != "errors" {
				t.Fatalf("text report header %q: want stalls, errors:\n%s", head, txt.String())
			}
			if len(tc.mark) == 0 {
				if strings.Contains(txt.String(), "anomalies") {
					t.Errorf("text report shows anomalies for a clean history:\n%s", txt.String())
				}
				return
			}
			if i+2 >= len(head) || head[i+2] != "anomalies" {
				t.Fatalf("text report header %q: want anomalies next to stalls and errors:\n%s", head, txt.String())
			}
			row := strings.Fields(lineAfter(txt.String(), "stalls"))
			if n := len(row); n < 3 || !slices.Equal(row[n-3:], []string{"0", "0", "2"}) {
				t.Errorf("text report row %q: want stalls 0, errors 0, anomalies 2:\n%s", row, txt.String())
			}
		})
	}
}

// lineWith is the first line of s holding sub ("" if none).
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// lineAfter is the line after the first line of s holding sub.
func lineAfter(s, sub string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.Contains(l, sub) && i+1 < len(lines) {
			return lines[i+1]
		}
	}
	return ""
}
