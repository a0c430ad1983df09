package sweep

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
	natsworld "github.com/durabench/durabench/world/nats"
	"github.com/durabench/durabench/world/profile"
	"github.com/durabench/durabench/world/sim"
)

// DefaultWorld is the world of a sweep that names none: embedded NATS
// JetStream, the real thing with no set-up.
const DefaultWorld = "nats"

// ProbeTimeout bounds the check that an external NATS server answers,
// before anything runs.
const ProbeTimeout = 5 * time.Second

// cellWorld is the world a cell runs on, and how to drive it: real-time
// worlds run the driver directly, the sim world runs it as its root task in
// virtual time.
type cellWorld struct {
	world.World
	// run runs fn on the world (in virtual time on sim).
	run   func(ctx context.Context, fn func(ctx context.Context)) error
	close func() error
}

// newWorld builds a fresh world for one cell: its own store (mem, sim), or
// its own streams under a fresh prefix (nats), wrapped by the cell's
// latency/fault profile.
func (p *Plan) newWorld(ctx context.Context, c CellPlan) (*cellWorld, error) {
	opts := c.WorldOptions
	var base world.World
	cw := &cellWorld{}
	switch c.World {
	case "mem":
		base = mem.New(opts)
	case "sim":
		model, err := sim.ParseLogModel(p.SimLog)
		if err != nil {
			return nil, &UsageError{Field: "sim-log", Err: err}
		}
		sc := sim.Config{Options: opts, Log: model, Seed: c.Seed,
			// A pending count is an atomic counter in a real backend: count it
			// over everything committed, on either log model.
			PendingAtCommit: true}
		if c.ProfileName != "none" {
			// The profile supplies every latency; the sim's own default
			// (1 ms a call) would count twice.
			sc.Latency = func(world.Op, *rand.Rand) time.Duration { return 0 }
		}
		sw := sim.New(sc)
		base = sw
		cw.run = sw.Run
	case "nats":
		nw, err := p.newNATS(ctx, opts, p.NATS.StreamPrefix(c))
		if err != nil {
			return nil, err
		}
		base = nw
	default:
		return nil, invalid(fmt.Sprintf("unknown world %q", c.World))
	}
	w := profile.Wrap(base, c.Profile, c.Seed)
	cw.World = w
	cw.close = w.Close
	if cw.run == nil {
		cw.run = func(ctx context.Context, fn func(ctx context.Context)) error { fn(ctx); return nil }
	}
	return cw, nil
}

func defaultWorld() string { return DefaultWorld }

func (p *Plan) newNATS(ctx context.Context, opts world.Options, prefix string) (world.World, error) {
	return natsworld.New(ctx, natsworld.Config{Options: opts, URL: p.NATS.URL, Creds: p.NATS.Creds,
		Storage: p.NATS.Storage, Replicas: p.NATS.Replicas, Keep: p.NATS.Keep, Prefix: prefix,
		// The prefix is this sweep's own: only external workers write
		// there besides this process.
		SoleWriter: !p.External.Enabled()})
}

// Probe checks, before anything runs, that the plan's external services
// answer: an external NATS server must accept a connection within
// ProbeTimeout. The error names the URL.
func (p *Plan) Probe(ctx context.Context) error {
	if p.NATS.URL == "" {
		return nil
	}
	uses := false
	for _, w := range p.Worlds {
		uses = uses || w == "nats"
	}
	if !uses {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	w, err := natsworld.New(ctx, natsworld.Config{URL: p.NATS.URL, Creds: p.NATS.Creds, Storage: p.NATS.Storage,
		Replicas: p.NATS.Replicas, ConnectTimeout: ProbeTimeout - 500*time.Millisecond})
	if err != nil {
		if errors.Is(err, natsworld.ErrUnreachable) || ctx.Err() != nil {
			return &UsageError{Flag: "--nats-url", Err: err}
		}
		return &UsageError{Flag: "--nats-url", Value: p.NATS.URL, Err: err}
	}
	return w.Close()
}
