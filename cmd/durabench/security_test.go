package main

import (
	"bytes"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durabench/durabench/world/nats/natstest"
)

// TestNATSWrongCredentials: against a real nats-server with TLS and each
// kind of authentication, a wrong credential (or a missing CA) is exit 2
// with one line on stderr within 5 s that names the server and never the
// secret; nothing is written. The worker says the same.
func TestNATSWrongCredentials(t *testing.T) {
	certs := natstest.Certificates(t)
	_, nkeyPub := natstest.NKeyUser(t)
	otherSeed, _ := natstest.NKeyUser(t)
	op, _ := natstest.OperatorMode(t)
	_, otherCreds := natstest.OperatorMode(t)
	const password, token = "pa55-w0rd-Xq7", "t0k3n-Yz9"
	tlsURL := natstest.Serve(t, natstest.Security{TLSCert: certs.ServerCert, TLSKey: certs.ServerKey, User: "bench", Password: password})
	tokURL := natstest.Serve(t, natstest.Security{Token: token})
	nkURL := natstest.Serve(t, natstest.Security{NKey: nkeyPub})
	crURL := natstest.Serve(t, natstest.Security{Operator: op})
	tokInURL := strings.Replace(tokURL, "nats://", "nats://wrong-"+token+"@", 1)

	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		url    string
		args   []string
		secret string
	}{
		{"password", tlsURL, []string{"--nats-tls-ca", certs.CA, "--nats-user", "bench", "--nats-password", "wrong-" + password}, "wrong-" + password},
		{"no CA", tlsURL, []string{"--nats-user", "bench", "--nats-password", password}, password},
		{"token", tokURL, []string{"--nats-token", "wrong-" + token}, "wrong-" + token},
		{"token in URL", tokInURL, nil, "wrong-" + token},
		{"nkey", nkURL, []string{"--nats-nkey", otherSeed}, ""},
		{"creds", crURL, []string{"--nats-creds", otherCreds}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			host := c.url[strings.LastIndex(c.url, "@")+1:]
			host = strings.TrimPrefix(host, "nats://")
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(c.name, " ", "-"))
			for _, args := range [][]string{
				append([]string{"sweep", "--world", "nats", "--nats-url", c.url, "--out", out}, c.args...),
				append([]string{"worker", "--nats-url", c.url}, c.args...),
			} {
				start := time.Now()
				r := durabench(t, dir, args...)
				took := time.Since(start)
				if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 || !strings.Contains(r.stderr, host) {
					t.Errorf("%s: exit %d, stderr %q: want exit 2 and one line naming %s", args[0], r.code, r.stderr, host)
				}
				if c.secret != "" && strings.Contains(r.stderr+r.stdout, c.secret) {
					t.Errorf("%s: the output holds the secret: %q", args[0], r.stderr)
				}
				if took > 6*time.Second {
					t.Errorf("%s: took %v, want < 5 s (+ process start)", args[0], took)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was created", out)
			}
		})
	}
}

// TestSecretsNeverWritten: sweeps that authenticate with a password (over
// TLS) and a token (a flag, and inside the URL), one of them interrupted
// and resumed, one with its engine on an external worker, all with --keep;
// then every command on their results. The secrets appear in no output:
// not in results.json, report.md, the journal, the history store, a
// report in any format (the PR comment too), a worker's log, stdout or
// stderr.
func TestSecretsNeverWritten(t *testing.T) {
	certs := natstest.Certificates(t)
	const password, token = "pa55-w0rd-Xq7", "t0k3n-Yz9"
	pwURL := natstest.Serve(t, natstest.Security{TLSCert: certs.ServerCert, TLSKey: certs.ServerKey, User: "bench", Password: password})
	tokURL := natstest.Serve(t, natstest.Security{Token: token})
	u, _ := url.Parse(tokURL)
	u.User = url.User(token)
	tokInURL := u.String()

	dir := t.TempDir()
	var outputs []string // every stdout and stderr
	keep := func(r result) result { outputs = append(outputs, r.stdout, r.stderr); return r }
	small := []string{"--branches", "4", "--versions", "baseline,resilient,pending-count", "--switches", "none",
		"--reps", "4", "--warmup", "0", "--keep", "--progress", "lines"}

	// 1. Password over TLS, on the command line; interrupted, then resumed
	// from a sweep file holding the password.
	pwOut := filepath.Join(dir, "pw")
	args := append([]string{"sweep", "--world", "nats", "--nats-url", pwURL, "--nats-tls-ca", certs.CA, "--nats-user", "bench",
		"--nats-password", password, "--option", "body=60ms", "--grace", "1s", "--out", pwOut}, small...)
	s := startUntil(t, dir, "[1/3]", args...)
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code, stderr, seen := s.finish(t, 60*time.Second, "the sweep did not stop on SIGINT")
	outputs = append(outputs, stderr, strings.Join(seen, "\n"))
	if code != 130 || !strings.Contains(stderr, "--nats-password <hidden>") {
		t.Fatalf("interrupted sweep: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(pwOut, "results.partial.jsonl")); err != nil {
		t.Fatalf("no journal after the interrupt: %v", err)
	}
	journal, _ := os.ReadFile(filepath.Join(pwOut, "results.partial.jsonl"))
	outputs = append(outputs, string(journal))
	sweepFile := filepath.Join(dir, "secret.yaml")
	if err := os.WriteFile(sweepFile, []byte("nats:\n  url: "+pwURL+"\n  tls_ca: "+certs.CA+"\n  user: bench\n  password: "+password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	resume := append([]string{"sweep", "-f", sweepFile, "--world", "nats", "--option", "body=60ms", "--grace", "1s", "--resume", pwOut}, small...)
	if r := keep(durabench(t, dir, resume...)); r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}

	// 2. A token in the URL and as a flag, the engine on an external worker.
	w := exec.Command(bin, "worker", "--nats-url", tokURL, "--nats-token", token, "--id", "w1", "--status-every", "100ms")
	var wlog bytes.Buffer
	w.Stdout, w.Stderr = &wlog, &wlog
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	tokOut := filepath.Join(dir, "tok")
	r := keep(durabench(t, dir, append([]string{"sweep", "--world", "nats", "--nats-url", tokInURL, "--workers", "external",
		"--out", tokOut}, small...)...))
	_ = w.Process.Signal(syscall.SIGTERM)
	_ = w.Wait()
	outputs = append(outputs, wlog.String())
	if r.code != 0 || !strings.Contains(wlog.String(), "cell") {
		t.Fatalf("sweep on a worker: exit %d, stderr %q; worker log:\n%s", r.code, r.stderr, wlog.String())
	}
	if !strings.Contains(r.stderr, "xxxxx@") && !strings.Contains(r.stderr, "streams kept") {
		t.Logf("driver stderr: %s", r.stderr)
	}

	// 3. Every command on the results.
	hist := filepath.Join(dir, "history")
	for _, out := range []string{pwOut, tokOut} {
		res := filepath.Join(out, "results.json")
		for _, format := range []string{"text", "md", "github", "json", "benchfmt"} {
			keep(durabench(t, dir, "report", res, "--format", format, "--baseline", res))
		}
		keep(durabench(t, dir, "compare", res, res))
		keep(durabench(t, dir, "gate", res, "--baseline", res, "--rule", "errors == 0"))
		keep(durabench(t, dir, "history", "add", res, "--dir", hist))
	}

	// Every output and every file written.
	for _, root := range []string{pwOut, tokOut, hist} {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(p)
				outputs = append(outputs, p+"\x00"+string(b))
			}
			return nil
		})
	}
	files := 0
	for _, o := range outputs {
		if strings.Contains(o, "\x00") {
			files++
		}
		for _, secret := range []string{password, token} {
			if strings.Contains(o, secret) {
				name, _, _ := strings.Cut(o, "\x00")
				t.Errorf("a secret was written: %.300q", name)
			}
		}
	}
	if files < 5 { // results.json and report.md of both sweeps, a history entry
		t.Errorf("only %d files checked", files)
	}
}
