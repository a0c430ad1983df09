package natsworld

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ErrAuth is returned by New and Dial when the server refused the
// credentials, or TLS failed (a certificate not trusted on either side, a
// server that requires TLS or a client certificate). The error that wraps
// it names the server, never a secret.
var ErrAuth = errors.New("authentication or TLS failed")

// Auth secures and authenticates a connection to an external NATS server.
// The zero value connects in plain text without credentials.
type Auth struct {
	// CAFile verifies the server's certificate (PEM); CertFile and KeyFile
	// are the client's certificate and key for mutual TLS; ServerName is
	// the name the server's certificate must carry (default: the URL's
	// host). Any of them turns TLS on.
	CAFile, CertFile, KeyFile, ServerName string
	// At most one kind of credential: User and Password, Token, NKeyFile
	// (a file holding a user NKey seed, "SU..."), or CredsFile (a JWT
	// credentials file, as nsc writes them).
	User, Password string
	Token          string
	NKeyFile       string
	CredsFile      string
}

// TLS reports whether a is set to use TLS.
func (a Auth) TLS() bool {
	return a.CAFile != "" || a.CertFile != "" || a.KeyFile != "" || a.ServerName != ""
}

// Secrets are the values of a that must never be written anywhere: the
// password and the token. (The files hold secrets too; their paths are
// not.)
func (a Auth) Secrets() []string {
	var s []string
	for _, v := range []string{a.Password, a.Token} {
		if v != "" {
			s = append(s, v)
		}
	}
	return s
}

// Check reports a contradiction in a, or a file it names that cannot be
// read, naming the setting (cert, key, password...) and never a secret.
func (a Auth) Check() error {
	var kinds []string
	if a.User != "" || a.Password != "" {
		if a.User == "" || a.Password == "" {
			return errors.New("user and password go together: give both")
		}
		kinds = append(kinds, "user/password")
	}
	for _, k := range []struct{ name, v string }{{"token", a.Token}, {"nkey", a.NKeyFile}, {"creds", a.CredsFile}} {
		if k.v != "" {
			kinds = append(kinds, k.name)
		}
	}
	if len(kinds) > 1 {
		return fmt.Errorf("give one kind of credential, not %s", strings.Join(kinds, " and "))
	}
	if (a.CertFile == "") != (a.KeyFile == "") {
		return errors.New("tls-cert and tls-key go together: give both")
	}
	for _, f := range []struct{ name, path string }{
		{"tls-ca", a.CAFile}, {"tls-cert", a.CertFile}, {"tls-key", a.KeyFile}, {"nkey", a.NKeyFile}, {"creds", a.CredsFile},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s file: %w", f.name, err)
		}
	}
	return nil
}

// options are a's nats.go options. File contents are checked here (a
// certificate that does not parse), so a mistake is found before any
// connection is tried.
func (a Auth) options() ([]nats.Option, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	if a.TLS() {
		// First: Secure sets the TLS configuration the options below fill.
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12, ServerName: a.ServerName}))
	}
	if a.CAFile != "" {
		opts = append(opts, nats.RootCAs(a.CAFile))
	}
	if a.CertFile != "" {
		opts = append(opts, nats.ClientCert(a.CertFile, a.KeyFile))
	}
	switch {
	case a.User != "":
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	case a.Token != "":
		opts = append(opts, nats.Token(a.Token))
	case a.NKeyFile != "":
		o, err := nats.NkeyOptionFromSeed(a.NKeyFile)
		if err != nil {
			// nats.go's message names the problem, not the seed.
			return nil, fmt.Errorf("nkey file %s: %w", a.NKeyFile, err)
		}
		opts = append(opts, o)
	case a.CredsFile != "":
		opts = append(opts, nats.UserCredentials(a.CredsFile))
	}
	// Apply them once now: a CA or certificate file that does not parse
	// is an error naming the file, before a connection is tried.
	var o nats.Options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	return opts, nil
}

// Dial connects to the server or cluster at urls (comma-separated) with
// auth, within timeout. The error names the server (RedactURL) and wraps
// ErrAuth when the server refused the credentials or the TLS handshake,
// ErrUnreachable when no server answered.
func Dial(ctx context.Context, urls string, auth Auth, timeout time.Duration, opts ...nats.Option) (*nats.Conn, error) {
	where := RedactURL(urls)
	aopts, err := auth.options()
	if err != nil {
		return nil, fmt.Errorf("natsworld: connect to %s: %w", where, err)
	}
	opts = append(append([]nats.Option{nats.Timeout(timeout)}, opts...), aopts...)
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(urls, opts...)
		done <- result{nc, err}
	}()
	abandon := func() {
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("natsworld: connect to %s: %w", where, classify(r.err, auth))
		}
		return r.nc, nil
	case <-timer.C:
		abandon()
		return nil, fmt.Errorf("natsworld: connect to %s: %w: no answer within %s", where, ErrUnreachable, timeout)
	case <-ctx.Done():
		abandon()
		return nil, fmt.Errorf("natsworld: connect to %s: %w", where, ctx.Err())
	}
}

// classify wraps a connect error in ErrAuth or ErrUnreachable, and keeps
// any secret of auth out of its message.
func classify(err error, auth Auth) error {
	kind := ErrUnreachable
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked),
		errors.Is(err, nats.ErrAccountAuthExpired), errors.Is(err, nats.ErrSecureConnRequired),
		errors.Is(err, nats.ErrSecureConnWanted), errors.As(err, &certErr),
		// A server that refuses the client's certificate may just close
		// the connection after the handshake (TLS 1.3): "tls error".
		strings.Contains(err.Error(), "tls: "), strings.Contains(err.Error(), "tls error"), strings.Contains(err.Error(), "x509: "):
		kind = ErrAuth
	}
	msg := err.Error()
	for _, s := range auth.Secrets() {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return fmt.Errorf("%w: %s", kind, msg)
}

// RedactURL hides the credentials in a comma-separated list of NATS URLs
// for messages and results: a password ("nats://u:xxxxx@h") and a token,
// which NATS takes from a URL's user when it has no password
// ("nats://xxxxx@h"). An entry that does not parse as a URL is replaced
// whole when it holds an '@'.
func RedactURL(urls string) string {
	if urls == "" {
		return ""
	}
	parts := strings.Split(urls, ",")
	for i, s := range parts {
		s = strings.TrimSpace(s)
		u, err := url.Parse(s)
		switch {
		case err != nil || u.Host == "" && strings.Contains(s, "@"):
			if strings.Contains(s, "@") {
				parts[i] = "(a URL with credentials)"
			}
		case u.User != nil:
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
			} else {
				u.User = url.User("xxxxx")
			}
			parts[i] = u.String()
		default:
			parts[i] = s
		}
	}
	return strings.Join(parts, ",")
}
