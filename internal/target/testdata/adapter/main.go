// Command adapter is a target adapter for durabench's own tests: the
// built-in engine (pending-count, mem world) behind protocol.Main, as a real
// executable that tests build as durabench-target-testref. --scenarios
// limits what it declares, so a sweep has something to skip.
package main

import (
	"context"
	"flag"
	"slices"
	"strings"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/target/reference"
	"github.com/durabench/durabench/protocol"
	"github.com/durabench/durabench/world/registry"
)

// limited declares only some of the reference's scenarios.
type limited struct {
	*reference.Reference
	only []string
}

func (l limited) Info() protocol.Info {
	info := l.Reference.Info()
	info.Engine = "testref"
	if len(l.only) > 0 {
		info.Scenarios = slices.DeleteFunc(info.Scenarios, func(s protocol.Scenario) bool { return !slices.Contains(l.only, s.Name) })
	}
	return info
}

func main() {
	protocol.Main("testref", func(fs *flag.FlagSet) func(ctx context.Context) (protocol.Backend, error) {
		only := fs.String("scenarios", "", "declare only these scenarios (comma-separated)")
		return func(ctx context.Context) (protocol.Backend, error) {
			kind, err := registry.Lookup("mem")
			if err != nil {
				return nil, err
			}
			w, err := kind.New(ctx, registry.Config{Settings: kind.Defaults(), SoleWriter: true})
			if err != nil {
				return nil, err
			}
			v, err := engine.LookupVersion("pending-count")
			if err != nil {
				return nil, err
			}
			l := limited{Reference: reference.New(w, v)}
			if *only != "" {
				l.only = strings.Split(*only, ",")
			}
			return l, nil
		}
	})
}
