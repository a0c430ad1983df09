package sweep

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkUsageError fails unless err is what the CLI prints for a bad input:
// a *UsageError (exit 2) with a message.
func checkUsageError(t *testing.T, input string, err error) {
	t.Helper()
	var ue *UsageError
	if !errors.As(err, &ue) || !errors.Is(err, ErrInvalid) || err.Error() == "" {
		t.Fatalf("%q: error %T %v is not a usage error", input, err, err)
	}
}

// FuzzSweepFile: any sweep file loads into a valid plan or is rejected
// with a usage error naming the file; never a panic, a hang or a plan too
// big to hold. Seeds: examples/*.yaml and the files the tests write.
func FuzzSweepFile(f *testing.F) {
	examples, _ := filepath.Glob("../../examples/*.yaml")
	for _, p := range examples {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"scenarios: [fanout]\nrepz: 3\n", "reps: lots\n", "reps: -1\n", "versions: [baseline\n",
		"nats:\n  url: nats://u:p@h:4222\n  replicas: 3\n", "options:\n  branches: [4, 8]\n  body: 5ms\n",
		"scenarios:\n  - name: fanout\n    options: {branches: 2}\n", "a: &a [1]\nb: *a\n", "[1, 2]\n", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := DefaultPlan()
		err := p.parseFile("fuzz.yaml", data)
		if err == nil {
			err = p.finish()
		}
		if err != nil {
			checkUsageError(t, string(data), err)
			return
		}
		if _, err := p.Cells(); err != nil {
			t.Fatalf("a validated plan has no cells: %v", err)
		}
	})
}

// FuzzFlags: any value of any sweep flag (--option, --switches, --faults,
// --branches, a world's setting, ...) makes a valid plan or a usage error
// naming the flag.
func FuzzFlags(f *testing.F) {
	for _, s := range []struct{ flag, value string }{
		{"option", "body=5ms"}, {"option", "branches=4,8"}, {"option", "colour=red"}, {"option", "body"},
		{"switches", "none,resilient-step-dispatch=0+guard=on"}, {"faults", "step_created.transient=2%"},
		{"faults", "publish.latency=fixed:30ms,log_load.capacity=8"}, {"branches", "20,64,256"},
		{"versions", "all"}, {"pace", "open"}, {"rate", "50"}, {"nats-url", "nats://u:p@h:1"},
		{"nats-replicas", "3"}, {"visibility-timeout", "2s"}, {"profile", "lan"}, {"world", "sim,mem"},
	} {
		f.Add(s.flag, s.value)
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		fs := flag.NewFlagSet("fuzz", flag.ContinueOnError)
		fs.SetOutput(discard{})
		fl := BindFlags(fs)
		if fs.Lookup(name) == nil || name == "f" || name == "profile" && strings.ContainsAny(value, `/\.`) {
			return // not a flag; or a file to read
		}
		if err := fs.Parse([]string{"--" + name, value}); err != nil {
			return // the flag package's own error (a bool flag's value)
		}
		if _, err := fl.Plan(); err != nil {
			checkUsageError(t, name+"="+value, err)
		}
	})
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
