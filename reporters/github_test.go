package reporters

import (
	"strings"
	"testing"
)

// TestStatusComment: the running and failed comments carry the sticky
// marker, say their state in the header, name the commit and link the run,
// and show no figures; a completed comment cannot be made without results.
func TestStatusComment(t *testing.T) {
	for _, c := range []struct {
		s    Status
		want []string
	}{
		{StatusRunning, []string{Marker + "\n", "— ⏳ running", "commit `abcdef0`", "([run](https://ci/run/9))"}},
		{StatusFailed, []string{Marker + "\n", "— ❌ failed", "commit `abcdef0`", "[run logs](https://ci/run/9)"}},
	} {
		var sb strings.Builder
		if err := StatusComment(&sb, c.s, "abcdef0123456", "https://ci/run/9"); err != nil {
			t.Fatal(err)
		}
		body := sb.String()
		if !strings.HasPrefix(body, Marker+"\n") {
			t.Errorf("%s: body does not start with the marker:\n%s", c.s, body)
		}
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: body lacks %q:\n%s", c.s, w, body)
			}
		}
		if strings.Contains(body, "|") || strings.Contains(body, embedPrefix) {
			t.Errorf("%s: a status comment shows a table or embeds results:\n%s", c.s, body)
		}
	}
	var sb strings.Builder
	if err := StatusComment(&sb, StatusRunning, "", ""); err != nil || !strings.Contains(sb.String(), "Benchmarking this commit.") {
		t.Errorf("no commit, no URL: %v\n%s", err, sb.String())
	}
	if err := StatusComment(&sb, StatusCompleted, "abc", ""); err == nil {
		t.Error("a completed status comment without results was written")
	}
}
