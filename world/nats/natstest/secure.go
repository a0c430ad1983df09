package natstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Security is how a test server secures and authenticates its clients; the
// zero value does neither.
type Security struct {
	// TLSCert and TLSKey are the server's certificate and key files (TLS
	// required); with TLSVerify, clients must present a certificate
	// signed by TLSCA.
	TLSCert   string `json:"tls_cert,omitempty"`
	TLSKey    string `json:"tls_key,omitempty"`
	TLSCA     string `json:"tls_ca,omitempty"`
	TLSVerify bool   `json:"tls_verify,omitempty"`
	// One kind of client authentication: a user and password, a token,
	// a user's public NKey, or operator mode (Operator: credentials files).
	User     string    `json:"user,omitempty"`
	Password string    `json:"password,omitempty"`
	Token    string    `json:"token,omitempty"`
	NKey     string    `json:"nkey,omitempty"`
	Operator *Operator `json:"operator,omitempty"`
}

// Operator is an operator-mode setup: the operator's JWT, the system
// account's public key, and every account's JWT by public key (the server
// resolves them from memory).
type Operator struct {
	JWT      string            `json:"jwt"`
	System   string            `json:"system"`
	Accounts map[string]string `json:"accounts"`
}

// apply sets sec on the server's options.
func (sec Security) apply(opts *server.Options) error {
	if sec.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: sec.TLSCert, KeyFile: sec.TLSKey,
			CaFile: sec.TLSCA, Verify: sec.TLSVerify})
		if err != nil {
			return err
		}
		opts.TLSConfig, opts.TLS, opts.TLSVerify, opts.TLSTimeout = tc, true, sec.TLSVerify, 2
	}
	switch {
	case sec.User != "":
		opts.Username, opts.Password = sec.User, sec.Password
	case sec.Token != "":
		opts.Authorization = sec.Token
	case sec.NKey != "":
		opts.Nkeys = []*server.NkeyUser{{Nkey: sec.NKey}}
	case sec.Operator != nil:
		oc, err := jwt.DecodeOperatorClaims(sec.Operator.JWT)
		if err != nil {
			return err
		}
		res := &server.MemAccResolver{}
		for pub, j := range sec.Operator.Accounts {
			if err := res.Store(pub, j); err != nil {
				return err
			}
		}
		opts.TrustedOperators, opts.SystemAccount, opts.AccountResolver = []*jwt.OperatorClaims{oc}, sec.Operator.System, res
	}
	return nil
}

// Serve starts a JetStream server with sec in the test's process, on a
// loopback port, and returns its client URL; the test's cleanup stops it.
// Tests that run the durabench binary reach it over TCP like any server.
func Serve(t testing.TB, sec Security) string {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
	if err := sec.apply(opts); err != nil {
		t.Fatal(err)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return fmt.Sprintf("nats://127.0.0.1:%d", s.Addr().(*net.TCPAddr).Port)
}

// TLSFiles are PEM files of a throwaway certificate authority, a server
// certificate it signed for 127.0.0.1, localhost and ServerName, and a
// client certificate it signed.
type TLSFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// ServerName is the extra name the test server's certificate carries.
const ServerName = "nats.durabench.test"

// Certificates writes a fresh CA, server and client certificate into a
// test temp dir.
func Certificates(t testing.TB) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	caKey, caCert, caDER := newCert(t, "durabench test CA", nil, nil, func(c *x509.Certificate) {
		c.IsCA, c.BasicConstraintsValid = true, true
		c.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	})
	files := TLSFiles{CA: filepath.Join(dir, "ca.pem")}
	writePEM(t, files.CA, "CERTIFICATE", caDER)
	srvKey, _, srvDER := newCert(t, "127.0.0.1", caCert, caKey, func(c *x509.Certificate) {
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		c.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		c.DNSNames = []string{"localhost", ServerName}
	})
	files.ServerCert, files.ServerKey = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	writePEM(t, files.ServerCert, "CERTIFICATE", srvDER)
	writeKey(t, files.ServerKey, srvKey)
	cliKey, _, cliDER := newCert(t, "durabench client", caCert, caKey, func(c *x509.Certificate) {
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	})
	files.ClientCert, files.ClientKey = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	writePEM(t, files.ClientCert, "CERTIFICATE", cliDER)
	writeKey(t, files.ClientKey, cliKey)
	return files
}

// newCert makes a certificate for name, signed by parent (self-signed when
// nil).
func newCert(t testing.TB, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey,
	edit func(*x509.Certificate)) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature}
	edit(tmpl)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeKey(t testing.TB, path string, key *ecdsa.PrivateKey) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, path, "EC PRIVATE KEY", der)
}

// NKeyUser makes a user NKey: the seed file a client signs with, and the
// public key the server trusts.
func NKeyUser(t testing.TB) (seedFile, public string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	public, _ = kp.PublicKey()
	seedFile = filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return seedFile, public
}

// OperatorMode makes an operator, a system account, an account with
// JetStream and a user in it: the server's operator setup and the user's
// credentials file.
func OperatorMode(t testing.TB) (*Operator, string) {
	t.Helper()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	okp, err := nkeys.CreateOperator()
	must(err)
	opub, _ := okp.PublicKey()
	sys, err := nkeys.CreateAccount()
	must(err)
	sysPub, _ := sys.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	oc.Name, oc.SystemAccount = "durabench-test", sysPub
	ojwt, err := oc.Encode(okp)
	must(err)
	sc := jwt.NewAccountClaims(sysPub)
	sc.Name = "SYS"
	sysJWT, err := sc.Encode(okp)
	must(err)
	akp, err := nkeys.CreateAccount()
	must(err)
	apub, _ := akp.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "durabench"
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	ajwt, err := ac.Encode(okp)
	must(err)
	ukp, err := nkeys.CreateUser()
	must(err)
	upub, _ := ukp.PublicKey()
	useed, _ := ukp.Seed()
	uc := jwt.NewUserClaims(upub)
	uc.Name = "bench"
	ujwt, err := uc.Encode(akp)
	must(err)
	creds, err := jwt.FormatUserConfig(ujwt, useed)
	must(err)
	path := filepath.Join(t.TempDir(), "bench.creds")
	must(os.WriteFile(path, creds, 0o600))
	return &Operator{JWT: ojwt, System: sysPub, Accounts: map[string]string{apub: ajwt, sysPub: sysJWT}}, path
}
