package stats

import (
	"strconv"
	"strings"
)

// For the package's tests only: the CLI and the reports use none of these.

// String renders the rule in canonical form.
func (r Rule) String() string {
	var b strings.Builder
	if r.Count != "" {
		b.WriteString(r.Count)
	} else {
		b.WriteString(r.Metric)
	}
	if len(r.Selector) > 0 {
		b.WriteByte('{')
		for i, m := range r.Selector {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(m.Field + "=" + strings.Join(m.Values, "|"))
		}
		b.WriteByte('}')
	}
	if r.Stat != "" {
		b.WriteString("." + r.Stat)
	}
	b.WriteString(" " + r.Op + " ")
	switch {
	case r.Relative:
		b.WriteString(strconv.FormatFloat(r.Threshold, 'f', -1, 64) + "x baseline")
	case r.Count != "":
		b.WriteString(strconv.FormatFloat(r.Threshold, 'f', -1, 64))
	default:
		b.WriteString(thresholdString(r.Threshold))
	}
	return b.String()
}

// thresholdString renders microseconds exactly, in the unit that spells
// them shortest (200ms, 1.5s, 250ns).
func thresholdString(us float64) string {
	best := ""
	for _, u := range []struct {
		name string
		size float64
	}{{"s", 1e6}, {"ms", 1e3}, {"µs", 1}, {"ns", 1e-3}} {
		s := strconv.FormatFloat(us/u.size, 'f', -1, 64) + u.name
		if best == "" || len([]rune(s)) < len([]rune(best)) {
			best = s
		}
	}
	return best
}

// Changed returns the rows whose median moved significantly, in either
// direction, for callers that summarise a comparison.
func (c *Comparison) Changed() []MetricRow {
	var out []MetricRow
	for _, m := range c.Metrics {
		for _, r := range m.Rows {
			if r.InBase && r.InHead && r.Test.Significant {
				out = append(out, r)
			}
		}
	}
	return out
}
