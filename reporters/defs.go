package reporters

import "github.com/durabench/durabench/metrics"

// metricTitle is the display name of a metric ("ttls" -> "TTLS"), from the
// one table of definitions in package metrics.
func metricTitle(name string) string {
	if d, ok := metrics.Lookup(name); ok {
		return d.Short
	}
	return name
}
