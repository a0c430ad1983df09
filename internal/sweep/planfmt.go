package sweep

import (
	"encoding/json"
	"strings"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/results"
)

func joinComma(v []string) string { return strings.Join(v, ",") }

// featureMap is a version's features as the results file records them.
func featureMap(v engine.Version) map[string]any {
	b, _ := json.Marshal(v.Features)
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	return m
}

// spansRecord is --spans as the results file records it: "off", or
// nothing (on, the default).
func spansRecord(on bool) string {
	if on {
		return ""
	}
	return results.SpansOff
}

// spansWord is a recorded plan's --spans: on or off.
func spansWord(rp results.PlanRecord) string {
	if rp.NoSpans() {
		return "off"
	}
	return "on"
}
