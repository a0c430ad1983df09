package reporters

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/durabench/durabench/results"
)

// Marker is the hidden first line of the GitHub comment; the workflow finds
// its earlier comment by it and updates that comment instead of adding one.
const Marker = "<!-- durabench-benchmark -->"

// embedPrefix opens the HTML comment that carries the compact results copy.
const embedPrefix = "<!-- durabench-results:v1\n"

// CommentLimit is the size the GitHub comment stays under, in bytes (GitHub
// rejects comments over 65,536 characters; bytes are never fewer).
const CommentLimit = 65000

// githubBody renders the comment and trims it to CommentLimit: the oldest
// history entries go first, then the histograms (first all but the widest
// cells', then all), then the histograms of the embedded copy (which only
// the next comment's histograms would use), then per-run detail (stalled
// and failed run ids), and last the table rows.
func githubBody(f *results.File, opt Options) (string, error) {
	m := newMarkdown(f, opt)
	d := fullDetail(opt)
	render := func(d detail) (string, error) {
		emb, err := embed(f, d.embedHDR)
		if err != nil {
			return "", err
		}
		return m.render(d) + emb, nil
	}
	fits := func(d detail) (string, bool, error) {
		s, err := render(d)
		return s, len(s) < CommentLimit, err
	}
	s, ok, err := fits(d)
	if err != nil || ok {
		return s, err
	}
	// History: keep the largest number of newest entries that fits (the
	// size grows with the count, so a binary search finds it).
	if d.history > 0 {
		d.trimmed = append(d.trimmed, "older previous results")
		lo, hi := 0, d.history // fits(lo) is unknown, fits(hi) is false
		for lo < hi {
			mid := (lo + hi + 1) / 2
			d.history = mid
			if _, ok, err := fits(d); err != nil {
				return "", err
			} else if ok {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		d.history = lo
		if s, ok, err = fits(d); err != nil || ok {
			return s, err
		}
	}
	steps := []struct {
		note  string
		apply func(*detail)
	}{
		{"histograms of all but the widest cells", func(d *detail) { d.widestOnly = true }},
		{"histograms", func(d *detail) { d.histograms = false }},
		{"histograms of the embedded copy", func(d *detail) { d.embedHDR = false }},
		{"stalled and failed run ids", func(d *detail) { d.runDetail = false }},
	}
	for _, st := range steps {
		st.apply(&d)
		d.trimmed = append(d.trimmed, st.note)
		if s, ok, err = fits(d); err != nil || ok {
			return s, err
		}
	}
	d.trimmed = append(d.trimmed, "table rows")
	for rows := 200; rows > 0; rows /= 2 {
		d.maxRows = rows
		if s, ok, err = fits(d); err != nil || ok {
			return s, err
		}
	}
	return "", fmt.Errorf("github comment: %d bytes even with every table trimmed (limit %d)", len(s), CommentLimit)
}

// compact returns a copy of f without per-run values, and with encoded
// histograms only for the metrics the report draws histograms of (none
// unless keepHDR): what the comment embeds for the next comparison, which
// needs summaries for its deltas and those histograms for its overlays.
func compact(f *results.File, keepHDR bool) *results.File {
	drawn := map[string]bool{}
	if keepHDR {
		for _, g := range groupScenarios(f) {
			for _, name := range histogramMetrics(g.Cells) {
				drawn[g.Name+"/"+name] = true
			}
		}
	}
	c := *f
	c.Cells = make([]results.Cell, len(f.Cells))
	for i, cell := range f.Cells {
		cell.Metrics = make(map[string]results.Metric, len(f.Cells[i].Metrics))
		for k, m := range f.Cells[i].Metrics {
			m.Values = nil
			if !drawn[cell.Scenario+"/"+k] {
				m.HDR = ""
			}
			cell.Metrics[k] = m
		}
		if cell.DriverLag != nil {
			lag := *cell.DriverLag
			lag.Values, lag.HDR = nil, ""
			cell.DriverLag = &lag
		}
		cell.CriticalPath = compactPath(cell.CriticalPath)
		cell.CompletionPath = compactPath(cell.CompletionPath)
		c.Cells[i] = cell
	}
	return &c
}

// embed returns the hidden HTML comment carrying f's compact copy: gzip of
// its JSON, base64 in 76-character lines (base64 never contains "--", so it
// cannot close the comment).
func embed(f *results.File, keepHDR bool) (string, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err := json.NewEncoder(zw).Encode(compact(f, keepHDR)); err != nil {
		return "", fmt.Errorf("embed results: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("embed results: %w", err)
	}
	enc := base64.StdEncoding.EncodeToString(buf.Bytes())
	var sb strings.Builder
	sb.WriteString("\n" + embedPrefix)
	for len(enc) > 76 {
		sb.WriteString(enc[:76] + "\n")
		enc = enc[76:]
	}
	sb.WriteString(enc + "\n-->\n")
	return sb.String(), nil
}

// Status is what a sticky comment says of its benchmark run.
type Status string

// The three states of the sticky comment. A completed comment is rendered
// from a results file (Markdown with Options.GitHub); the other two need
// none.
const (
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
)

// StatusComment describes a benchmark run that has no results to show yet
// (running) or none at all (failed), as the body of the sticky comment:
// posted when the job starts, it replaces the previous run's numbers so
// that nobody reads them as this commit's; on failure it points at the
// run's logs. commit and runURL may be empty.
func StatusComment(w io.Writer, s Status, commit, runURL string) error {
	var sb strings.Builder
	sb.WriteString(Marker + "\n")
	what := "this commit"
	if commit != "" {
		what = "commit `" + shortCommit(commit) + "`"
	}
	switch s {
	case StatusRunning:
		sb.WriteString("## 📊 " + Title + " — ⏳ running\n\n")
		sb.WriteString("Benchmarking " + what)
		if runURL != "" {
			fmt.Fprintf(&sb, " ([run](%s))", runURL)
		}
		sb.WriteString(". The results replace this comment when the sweep finishes; " +
			"earlier numbers were for an earlier commit.\n")
	case StatusFailed:
		sb.WriteString("## 📊 " + Title + " — ❌ failed\n\n")
		sb.WriteString("The benchmark of " + what + " did not complete")
		if runURL != "" {
			fmt.Fprintf(&sb, "; see the [run logs](%s)", runURL)
		}
		sb.WriteString(". No figures are shown: a sweep that did not finish has none to trust.\n")
	default:
		return fmt.Errorf("status %q: not %s or %s (a completed comment is rendered from a results file)",
			s, StatusRunning, StatusFailed)
	}
	_, err := io.WriteString(w, sb.String())
	return err
}
