package registry

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
			{Name: "url", Type: String, Record: true, Redact: natsworld.RedactURL,
				Help: "external NATS server or cluster (default: embedded)"},
			{Name: "creds", Type: String, Help: "credentials file (user JWT and NKey seed, as nsc writes them)"},
			{Name: "nkey", Type: String, Help: "file holding a user NKey seed (SU...)"},
			{Name: "user", Type: String, Help: "user name (with --nats-password)"},
			{Name: "password", Type: String, Secret: true, Help: "password of --nats-user (never written anywhere; prefer a sweep file to the command line)"},
			{Name: "token", Type: String, Secret: true, Help: "authentication token (never written anywhere)"},
			{Name: "tls_ca", Type: String, Help: "CA certificate file (PEM) that verifies the server: turns TLS on"},
			{Name: "tls_cert", Type: String, Help: "client certificate file (PEM) for mutual TLS, with --nats-tls-key"},
			{Name: "tls_key", Type: String, Help: "client key file (PEM) of --nats-tls-cert"},
			{Name: "tls_server_name", Type: String, Help: "name the server's certificate must carry (default: the URL's host)"},
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
			auth := NATSAuth(s)
			if auth == (natsworld.Auth{}) {
				return nil
			}
			if s["url"] == "" {
				return errors.New("NATS TLS and credentials (--nats-tls-*, --nats-user, --nats-token, --nats-nkey, --nats-creds) need --nats-url: the embedded server has no listener")
			}
			if err := auth.Check(); err != nil {
				return fmt.Errorf("nats: %w", err)
			}
			return nil
		},
		Probe: probeNATS,
		New: func(ctx context.Context, c Config) (world.World, error) {
			cfg := natsworld.Config{Options: c.Options, URL: c.Settings["url"], Auth: NATSAuth(c.Settings),
				Storage: c.Settings["storage"], Replicas: c.Settings.Int("replicas"), Keep: c.Settings.Bool("keep"),
				Prefix: c.Prefix, SoleWriter: c.SoleWriter}
			if e, ok := c.Shared.(*natsworld.Embedded); ok {
				cfg.Embedded = e
			}
			return natsworld.New(ctx, cfg)
		},
		// An interleaved pair's two cells share one embedded server (an
		// external one is shared already).
		Share: func(ctx context.Context, s Values) (Shared, error) {
			if s["url"] != "" {
				return nil, nil
			}
			e, err := natsworld.StartEmbedded()
			if err != nil {
				return nil, err
			}
			return e, nil
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
	w, err := natsworld.New(ctx, natsworld.Config{URL: s["url"], Auth: NATSAuth(s), Storage: s["storage"],
		Replicas: s.Int("replicas"), ConnectTimeout: probeTimeout - 500*time.Millisecond})
	if err != nil {
		if errors.Is(err, natsworld.ErrUnreachable) || errors.Is(err, natsworld.ErrAuth) || ctx.Err() != nil {
			return fmt.Errorf("nats-url: %w", err)
		}
		return fmt.Errorf("nats-url %s: %w", natsworld.RedactURL(s["url"]), err)
	}
	return w.Close()
}

// NATSConnection names the nats world's settings that say how to reach
// its server: the URL, TLS and credentials. A durabench worker takes them
// as flags too (--nats-url, --nats-tls-ca, ...).
var NATSConnection = []string{"url", "creds", "nkey", "user", "password", "token", "tls_ca", "tls_cert", "tls_key", "tls_server_name"}

// NATSAuth is the TLS and credentials the nats world's settings give: the
// same for the sweep's world and for its cluster connections.
func NATSAuth(s Values) natsworld.Auth {
	return natsworld.Auth{CAFile: s["tls_ca"], CertFile: s["tls_cert"], KeyFile: s["tls_key"], ServerName: s["tls_server_name"],
		User: s["user"], Password: s["password"], Token: s["token"], NKeyFile: s["nkey"], CredsFile: s["creds"]}
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
