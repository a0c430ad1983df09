package stats

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/durabench/durabench/results"
)

// FuzzGateRules: any rules file (--rules FILE, or one --rule) parses into
// rules that a gate evaluates and reports, or is rejected with an error
// matching ErrRules (exit 2) that names the line.
func FuzzGateRules(f *testing.F) {
	if data, err := examplesRules(); err == nil {
		f.Add(string(data))
	}
	for _, s := range []string{
		"ttls{scenario=fanout,branches=256}.p90 < 1.10x baseline", "stalls == 0\nerrors == 0\n",
		`ttls{version="abc",switches="guard=on,resilient-step-dispatch=0"}.p99 <= 2s`, "runs{world=nats|sim} >= 3",
		"ttfs.p75 < 200", "ttls{branches=1,branches=2}.p90 < 1.1x baseline", "ttfs.p75 < 1..2ms", "# nothing\n",
		"skew.mean != 0us", "ttfs.p75 < 1e308s", "ttfs.p75 < 0.0000001ns",
	} {
		f.Add(s)
	}
	head := synthFile(1, 10, 0.2, 1, synthMatrix)
	base := synthFile(2, 10, 0.2, 1.05, synthMatrix)
	f.Fuzz(func(t *testing.T, text string) {
		rules, err := ParseRules("rules.txt", strings.NewReader(text))
		if err != nil {
			if !errors.Is(err, ErrRules) || !errors.Is(err, results.ErrInvalid) {
				t.Fatalf("error %v does not match ErrRules", err)
			}
			return
		}
		rep, err := Gate(head, base, rules)
		if err != nil {
			t.Fatalf("gate: %v", err)
		}
		var b bytes.Buffer
		if err := rep.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteMarkdown(&b); err != nil {
			t.Fatal(err)
		}
		_ = rep.Err()
	})
}
