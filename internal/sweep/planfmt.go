package sweep

import (
	"encoding/json"
	"strings"

	"github.com/durabench/durabench/engine"
)

func joinComma(v []string) string { return strings.Join(v, ",") }

// featureMap is a version's features as the results file records them.
func featureMap(v engine.Version) map[string]any {
	b, _ := json.Marshal(v.Features)
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	return m
}
