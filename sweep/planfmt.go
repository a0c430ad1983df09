package sweep

import (
	"encoding/json"
	"net/url"
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

// redact removes a password from a URL list before it is written anywhere.
func redact(urls string) string {
	if urls == "" {
		return ""
	}
	parts := strings.Split(urls, ",")
	for i, s := range parts {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
				parts[i] = u.String()
			}
		}
	}
	return strings.Join(parts, ",")
}
