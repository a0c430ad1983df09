package reporters

// definition is one metric's name as used in results files, its short title
// and its exact definition.
type definition struct {
	Name, Title, Definition string
}

// definitions returns the metric definitions the report footer quotes.
// TODO(reporters): switch to the metrics package's table once it lands.
func definitions() []definition {
	return []definition{
		{"ttfs", "TTFS", "time to first step: earliest step body start − t0"},
		{"ttls", "TTLS", "time to last step: latest step body end − t0 (fan-out)"},
		{"skew", "skew", "per run: latest branch body start − earliest branch body start"},
		{"stso", "STSO", "step-to-step overhead: step[i] body start − step[i−1] body end, tagged inline or queue-hop"},
		{"wo", "WO", "workflow overhead: (last step end − t0) − Σ step body durations"},
		{"ttc", "TTC", "time to completion: run completed − t0"},
		{"sl", "SL", "stream latency: chunk read time − chunk write time"},
		{"so", "SO", "stream overhead: (last chunk consumed − first chunk written) − chunks × pacing interval"},
	}
}

// metricTitle is the display name of a metric ("ttls" -> "TTLS").
func metricTitle(name string) string {
	for _, d := range definitions() {
		if d.Name == name {
			return d.Title
		}
	}
	switch name {
	case "stso_inline":
		return "STSO inline"
	case "stso_queue":
		return "STSO queue-hop"
	case "skew_offset":
		return "skew offset"
	}
	return name
}
