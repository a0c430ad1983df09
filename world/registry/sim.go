package registry

import (
	"context"
	"math/rand"
	"time"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/sim"
)

func init() {
	Register(&Kind{
		Name:        "sim",
		Description: "deterministic discrete-event simulation in virtual time (--sim-log append-only|mint-ordered)",
		VirtualTime: true,
		// Measured (BenchmarkCellHeap): 2.8–3.3 KB per branch; 9.2 KB per
		// step of a 2,000-step chain.
		StepBytes: 12 << 10,
		Settings: []Setting{
			{Name: "log", Type: String, Default: string(sim.AppendOnly), Record: true,
				Help:  "sim world log model: append-only or mint-ordered",
				Parse: choice(string(sim.AppendOnly), string(sim.MintOrdered))},
		},
		New: func(_ context.Context, c Config) (world.World, error) {
			model, err := sim.ParseLogModel(c.Settings["log"])
			if err != nil {
				return nil, err
			}
			sc := sim.Config{Options: c.Options, Log: model, Seed: c.Options.Seed,
				// A pending count is an atomic counter in a real backend:
				// count it over everything committed, on either log model.
				PendingAtCommit: true}
			if c.Profiled {
				// The profile supplies every latency; the sim's own default
				// (1 ms a call) would count twice.
				sc.Latency = func(world.Op, *rand.Rand) time.Duration { return 0 }
			}
			return sim.New(sc), nil
		},
	})
}

var _ Runner = (*sim.World)(nil)
