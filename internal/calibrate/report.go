package calibrate

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/durabench/durabench/world/profile"
)

// Tolerance is the relative error within which a figure counts as
// reproduced (the fidelity table's ±20%).
const Tolerance = 0.20

// Check measures the table under prof without searching: the Result's
// Fitted figures are prof's. Cells are seeded as in a sweep of a profile
// called name (the --profile a sweep would name it by).
func Check(ctx context.Context, t *Table, prof *profile.Profile, name string, seed int64, parallel int) (*Result, error) {
	if seed == 0 {
		seed = 1
	}
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	r, err := newRunner(t, name, seed)
	if err != nil {
		return nil, err
	}
	vals, err := measureAll(ctx, r, []*profile.Profile{prof}, parallel)
	if err != nil {
		return nil, err
	}
	fig := splitFigures(r, vals[0])
	return &Result{Table: t, Profile: prof, Fitted: fig, Start: fig, Evals: 1}, nil
}

// RelError is v's relative error against figure f: (v − observed)/observed,
// or for a rate observed as 0, v itself.
func RelError(f Figure, v float64) float64 {
	if f.Value == 0 {
		return v
	}
	return (v - f.Value) / f.Value
}

// Within reports whether v reproduces f within Tolerance (a rate observed
// as 0 only by 0).
func Within(f Figure, v float64) bool {
	if f.Value == 0 {
		return v == 0
	}
	return math.Abs(RelError(f, v)) <= Tolerance
}

// Counts returns how many fitted figures there are and how many of them
// the fitted profile reproduces within Tolerance.
func (r *Result) Counts() (within, fitted int) {
	for i, c := range r.Table.Cells {
		for j, f := range c.Figures {
			if f.Unfitted != "" {
				continue
			}
			fitted++
			if Within(f, r.Fitted[i][j]) {
				within++
			}
		}
	}
	return within, fitted
}

// WriteResiduals writes the residual table: per cell and figure, the
// observed value, the value under the starting profile (when start), the
// value under the fitted profile, the relative error and whether it is
// within Tolerance; unfitted figures are marked.
func (r *Result) WriteResiduals(w io.Writer, start bool) error {
	head := []string{"cell", "figure", "observed"}
	if start {
		head = append(head, "start")
	}
	head = append(head, "fitted", "error", "")
	rows := [][]string{head}
	for i, c := range r.Table.Cells {
		for j, f := range c.Figures {
			v := r.Fitted[i][j]
			row := []string{c.Label(), f.Name(), f.Format(f.Value)}
			if start {
				row = append(row, f.Format(r.Start[i][j]))
			}
			mark := "ok"
			switch {
			case f.Unfitted != "":
				mark = "unfitted"
			case !Within(f, v):
				mark = fmt.Sprintf("over ±%.0f%%", 100*Tolerance)
			}
			rows = append(rows, append(row, f.Format(v), fmtError(f, v), mark))
		}
	}
	return writeTable(w, rows, 2)
}

// writeTable writes rows as aligned columns, the first left columns
// left-aligned and the others right-aligned but the last, indented by two
// spaces.
func writeTable(w io.Writer, rows [][]string, left int) error {
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(" ")
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			b.WriteString(" ")
			if i < left || i == len(r)-1 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		b.WriteString("\n")
	}
	var out strings.Builder
	for line := range strings.SplitSeq(strings.TrimSuffix(b.String(), "\n"), "\n") {
		out.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	_, err := io.WriteString(w, out.String())
	return err
}

func fmtError(f Figure, v float64) string {
	if f.IsRate() && f.Value == 0 {
		return fmt.Sprintf("%+.1f pt", 100*v)
	}
	return fmt.Sprintf("%+.1f%%", 100*RelError(f, v))
}

// WriteParams writes each searched parameter's start and fitted values,
// then the frozen ones.
func (r *Result) WriteParams(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  parameter\tstart\tfitted\t")
	for _, p := range r.Params {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t\n", p.Name, p.Format(p.Start), p.Format(p.Fitted))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Frozen) > 0 {
		_, err := fmt.Fprintf(w, "  not searched (no figure of the table depends on them): %s\n", strings.Join(r.Frozen, ", "))
		return err
	}
	return nil
}

// Header is the comment a fitted profile's file starts with: how it was
// made (command, the command line that refits it), its residuals, and the
// figures it does not fit, with why.
func (r *Result) Header(command string) string {
	var b strings.Builder
	within, fitted := r.Counts()
	fmt.Fprintf(&b, "%s: fitted on the sim world by\n\n    %s\n\n", r.Profile.Name, command)
	fmt.Fprintf(&b, "to the figures of %s: %d of %d fitted figures within ±%.0f%%. Refit with\n", r.Table.File, within, fitted, 100*Tolerance)
	b.WriteString("that command rather than editing the numbers by hand (docs/profiles.md).\n\n")
	b.WriteString("Observed vs this profile:\n")
	_ = r.WriteResiduals(&b, false)
	var notes []string
	for _, c := range r.Table.Cells {
		for _, f := range c.Figures {
			if f.Unfitted != "" && !slices.Contains(notes, f.Unfitted) {
				notes = append(notes, f.Unfitted)
				fmt.Fprintf(&b, "\n%s\n", wrap("Unfitted "+f.Name()+": "+f.Unfitted, 100))
			}
		}
	}
	return b.String()
}

// wrap breaks s into lines of at most width characters.
func wrap(s string, width int) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = w
			continue
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}

// WriteMarkdown writes the residual table as a markdown table — the cell,
// the figure, the observed value, the fitted profile's, the relative error
// and a ✓ within Tolerance — then each unfitted figure's reason as a
// numbered note.
func (r *Result) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| cell | figure | observed | %s | error | ±%.0f%% |\n|---|---|---:|---:|---:|:-:|\n", r.Profile.Name, 100*Tolerance)
	var notes []string
	for i, c := range r.Table.Cells {
		for j, f := range c.Figures {
			v := r.Fitted[i][j]
			mark := "✓"
			switch {
			case f.Unfitted != "":
				k := slices.Index(notes, f.Unfitted)
				if k < 0 {
					notes = append(notes, f.Unfitted)
					k = len(notes) - 1
				}
				mark = fmt.Sprintf("✗ unfitted (%d)", k+1)
			case !Within(f, v):
				mark = "✗"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", c.Label(), f.Name(), f.Format(f.Value), f.Format(v), fmtError(f, v), mark)
		}
	}
	for k, n := range notes {
		fmt.Fprintf(&b, "\n(%d) %s\n", k+1, n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
