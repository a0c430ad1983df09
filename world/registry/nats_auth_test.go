package registry

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	natsworld "github.com/durabench/durabench/world/nats"
	"github.com/durabench/durabench/world/nats/natstest"
)

// TestNATSAuthSettings: the TLS and credential settings are flags and
// sweep-file keys, need an external server, and are checked as a whole;
// the password and the token are secrets, never recorded.
func TestNATSAuthSettings(t *testing.T) {
	k, err := Lookup(NATS)
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	for _, s := range k.Settings {
		flags[k.FlagName(s)] = true
		if s.Secret != (s.Name == "password" || s.Name == "token") || s.Secret && s.Record {
			t.Errorf("%s: secret %v, recorded %v", s.Name, s.Secret, s.Record)
		}
	}
	for _, f := range []string{"nats-tls-ca", "nats-tls-cert", "nats-tls-key", "nats-tls-server-name", "nats-user",
		"nats-password", "nats-token", "nats-nkey", "nats-creds"} {
		if !flags[f] {
			t.Errorf("no flag --%s", f)
		}
	}
	v := k.Defaults()
	v["token"] = "t"
	if err := k.Check(v); err == nil || !strings.Contains(err.Error(), "need --nats-url") {
		t.Errorf("credentials without a URL: %v", err)
	}
	v["url"], v["token"], v["user"] = "nats://h:4222", "", "u"
	if err := k.Check(v); err == nil || !strings.Contains(err.Error(), "user and password") {
		t.Errorf("a user without a password: %v", err)
	}
	v["token"] = "t"
	v["user"], v["password"] = "u", "p"
	if got := k.Secrets(v); !slices.Equal(got, []string{"p", "t"}) {
		t.Errorf("Secrets = %q", got)
	}
}

// TestNATSProbeAuth: the probe connects with TLS and a password, and a
// wrong password is ErrAuth naming the server, not the password.
func TestNATSProbeAuth(t *testing.T) {
	certs := natstest.Certificates(t)
	url := natstest.Serve(t, natstest.Security{TLSCert: certs.ServerCert, TLSKey: certs.ServerKey, User: "bench", Password: "right"})
	k, _ := Lookup(NATS)
	v := k.Defaults()
	v["url"], v["tls_ca"], v["user"], v["password"] = url, certs.CA, "bench", "right"
	if err := k.Probe(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	v["password"] = "wrong-password"
	err := k.Probe(context.Background(), v)
	if !errors.Is(err, natsworld.ErrAuth) || !strings.Contains(err.Error(), url) || strings.Contains(err.Error(), "wrong-password") {
		t.Errorf("wrong password: %v", err)
	}
}
