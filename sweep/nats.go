package sweep

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/durabench/durabench/world"
	natsworld "github.com/durabench/durabench/world/nats"
)

func (p *Plan) newNATS(ctx context.Context, opts world.Options, prefix string) (world.World, error) {
	return natsworld.New(ctx, natsworld.Config{Options: opts, URL: p.NATS.URL, Creds: p.NATS.Creds,
		Storage: p.NATS.Storage, Replicas: p.NATS.Replicas, Keep: p.NATS.Keep, Prefix: prefix})
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
			return fmt.Errorf("nats-url: %w: %w", err, ErrInvalid)
		}
		return fmt.Errorf("nats-url %s: %w: %w", p.NATS.URL, err, ErrInvalid)
	}
	return w.Close()
}

// natsAvailable reports whether the nats world is built in.
const natsAvailable = true
