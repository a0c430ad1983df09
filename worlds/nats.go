package worlds

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/durabench/durabench/world"
	natsworld "github.com/durabench/durabench/world/nats"
)

// NATS is the NATS JetStream world's name. Distributed sweeps (engines on
// `durabench worker` processes) need it: their workers meet the driver on
// its server.
const NATS = "nats"

// probeTimeout bounds the check that an external NATS server answers,
// before anything runs.
const probeTimeout = 5 * time.Second

func init() {
	Register(&Kind{
		Name:        NATS,
		Description: "NATS JetStream: embedded in-process (default), or an external server/cluster with --nats-url",
		// Measured (BenchmarkCellHeap) on the embedded server, whose memory
		// is this process's: 32–39 KB per branch (fan-outs of 500 to 4,000
		// branches); 20.4 KB per step of a 2,000-step chain.
		StepBytes: 40 << 10,
		Settings: []Setting{
			{Name: "url", Type: String, Record: true, Redact: redact,
				Help: "external NATS server or cluster (default: embedded)"},
			{Name: "creds", Type: String, Help: "NATS credentials file"},
			{Name: "replicas", Type: Int, Default: "1", Record: true, Parse: atLeast(1),
				Help: "stream replicas (external cluster)"},
			{Name: "storage", Type: String, Default: natsworld.StorageFile, Record: true,
				Parse: choice(natsworld.StorageFile, natsworld.StorageMemory), Help: "file or memory"},
			{Name: "keep", Flag: "keep", Type: Bool, Default: "false",
				Help: "keep the streams on an external NATS server"},
		},
		Check: func(s Values) error {
			if r := s.Int("replicas"); r > 1 && s["url"] == "" {
				return fmt.Errorf("nats-replicas %d needs --nats-url: the embedded server is a single node", r)
			}
			return nil
		},
		Probe: probeNATS,
		New: func(ctx context.Context, c Config) (world.World, error) {
			return natsworld.New(ctx, natsworld.Config{Options: c.Options, URL: c.Settings["url"], Creds: c.Settings["creds"],
				Storage: c.Settings["storage"], Replicas: c.Settings.Int("replicas"), Keep: c.Settings.Bool("keep"),
				Prefix: c.Prefix, SoleWriter: c.SoleWriter})
		},
		Kept: func(s Values, prefix string) string {
			if !s.Bool("keep") || s["url"] == "" {
				return ""
			}
			return fmt.Sprintf("NATS streams kept (--keep): %s<cell>_log, _queue and _chunks, one set per cell", prefix)
		},
	})
}

// probeNATS checks that an external NATS server accepts a connection
// within probeTimeout; the error names the URL.
func probeNATS(ctx context.Context, s Values) error {
	if s["url"] == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	w, err := natsworld.New(ctx, natsworld.Config{URL: s["url"], Creds: s["creds"], Storage: s["storage"],
		Replicas: s.Int("replicas"), ConnectTimeout: probeTimeout - 500*time.Millisecond})
	if err != nil {
		if errors.Is(err, natsworld.ErrUnreachable) || ctx.Err() != nil {
			return fmt.Errorf("nats-url: %w", err)
		}
		return fmt.Errorf("nats-url %s: %w", s["url"], err)
	}
	return w.Close()
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
