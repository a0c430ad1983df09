package natsworld_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/durabench/durabench/world"
	natsworld "github.com/durabench/durabench/world/nats"
	"github.com/durabench/durabench/world/nats/natstest"
)

// TestSecureConnections runs the world against nats-server processes with
// TLS and each kind of authentication: the right settings work, a wrong
// one fails within 5 s with ErrAuth, naming the server and no secret.
func TestSecureConnections(t *testing.T) {
	certs := natstest.Certificates(t)
	otherCerts := natstest.Certificates(t) // another CA: its certificates are not trusted
	tlsServer := natstest.Security{TLSCert: certs.ServerCert, TLSKey: certs.ServerKey}
	seed, nkeyPub := natstest.NKeyUser(t)
	otherSeed, _ := natstest.NKeyUser(t)
	op, creds := natstest.OperatorMode(t)
	_, otherCreds := natstest.OperatorMode(t)
	const password, token = "s3cret-pa55word", "t0ken-of-the-day"

	with := func(sec natstest.Security, edit func(*natstest.Security)) natstest.Security {
		edit(&sec)
		return sec
	}
	servers := []struct {
		name string
		sec  natstest.Security
		good natsworld.Auth
		bad  map[string]natsworld.Auth
	}{
		{"tls+password", with(tlsServer, func(s *natstest.Security) { s.User, s.Password = "bench", password }),
			natsworld.Auth{CAFile: certs.CA, User: "bench", Password: password},
			map[string]natsworld.Auth{
				"wrong password": {CAFile: certs.CA, User: "bench", Password: password + "x"},
				"untrusted CA":   {CAFile: otherCerts.CA, User: "bench", Password: password},
				"no TLS":         {User: "bench", Password: password},
				"wrong name":     {CAFile: certs.CA, ServerName: "elsewhere.test", User: "bench", Password: password},
			}},
		{"mtls+token", with(tlsServer, func(s *natstest.Security) { s.TLSCA, s.TLSVerify, s.Token = certs.CA, true, token }),
			natsworld.Auth{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, ServerName: natstest.ServerName, Token: token},
			map[string]natsworld.Auth{
				"wrong token":       {CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, Token: "not-" + token},
				"no client cert":    {CAFile: certs.CA, Token: token},
				"foreign client ca": {CAFile: certs.CA, CertFile: otherCerts.ClientCert, KeyFile: otherCerts.ClientKey, Token: token},
			}},
		{"nkey", natstest.Security{NKey: nkeyPub}, natsworld.Auth{NKeyFile: seed},
			map[string]natsworld.Auth{"other nkey": {NKeyFile: otherSeed}, "none": {}}},
		{"creds", natstest.Security{Operator: op}, natsworld.Auth{CredsFile: creds},
			map[string]natsworld.Auth{"other operator": {CredsFile: otherCreds}}},
	}
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			srv := natstest.Start(t, natstest.Spec{Name: s.name, Security: s.sec})
			ctx := context.Background()
			w, err := natsworld.New(ctx, natsworld.Config{URL: srv.URL, Auth: s.good})
			if err != nil {
				t.Fatalf("right settings: %v", err)
			}
			if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
				t.Errorf("CreateRun: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			for name, auth := range s.bad {
				start := time.Now()
				_, err := natsworld.New(ctx, natsworld.Config{URL: srv.URL, Auth: auth})
				took := time.Since(start)
				switch {
				case !errors.Is(err, natsworld.ErrAuth):
					t.Errorf("%s: error %v, want ErrAuth", name, err)
				case took > 5*time.Second:
					t.Errorf("%s: took %v, want < 5 s", name, took)
				case !strings.Contains(err.Error(), srv.URL) || strings.Contains(err.Error(), "\n"):
					t.Errorf("%s: error %q is not one line naming %s", name, err, srv.URL)
				case strings.Contains(err.Error(), password) || strings.Contains(err.Error(), token):
					t.Errorf("%s: error %q holds a secret", name, err)
				}
			}
		})
	}
}

// TestAuthCheck: contradictory settings and missing files are refused
// before anything connects, naming the setting.
func TestAuthCheck(t *testing.T) {
	for _, tc := range []struct {
		auth natsworld.Auth
		want string
	}{
		{natsworld.Auth{User: "u"}, "user and password"},
		{natsworld.Auth{User: "u", Password: "p", Token: "t"}, "user/password and token"},
		{natsworld.Auth{CertFile: "c.pem"}, "tls-cert and tls-key"},
		{natsworld.Auth{CAFile: "/nonexistent/ca.pem"}, "tls-ca file"},
		{natsworld.Auth{NKeyFile: "/nonexistent/user.nk"}, "nkey file"},
	} {
		err := tc.auth.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.auth, err, tc.want)
		}
	}
	if _, err := natsworld.New(context.Background(), natsworld.Config{Auth: natsworld.Auth{Token: "t"}}); err == nil {
		t.Error("credentials for the embedded server: no error")
	}
}

// TestRedactURL: passwords and tokens in URLs never reach a message.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://u:pw@h:4222":                    "nats://u:xxxxx@h:4222",
		"nats://tok@h:4222,nats://u:pw@h2:4222": "nats://xxxxx@h:4222,nats://u:xxxxx@h2:4222",
		"nats://h:4222":                         "nats://h:4222",
		"tls://h1, tls://h2":                    "tls://h1,tls://h2",
		"h:4222":                                "h:4222",
		"tok@h:4222":                            "(a URL with credentials)",
	} {
		if got := natsworld.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
