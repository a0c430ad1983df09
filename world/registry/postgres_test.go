package registry

import (
	"context"
	"strings"
	"testing"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/postgres/pgserver"
)

// TestPostgresSettings: fsync is on or off; off needs the throwaway server.
func TestPostgresSettings(t *testing.T) {
	k, err := Lookup(Postgres)
	if err != nil {
		t.Fatal(err)
	}
	vals := k.Defaults()
	if vals["fsync"] != "on" {
		t.Errorf("fsync defaults to %q, want on", vals["fsync"])
	}
	for in, want := range map[string]string{"off": "off", "false": "off", "1": "on"} {
		if err := k.Set(vals, "fsync", in); err != nil || vals["fsync"] != want {
			t.Errorf("fsync=%s: %v, value %q, want %q", in, err, vals["fsync"], want)
		}
	}
	if err := k.Set(vals, "fsync", "sometimes"); err == nil || err.Error() != `"sometimes" is not on or off` {
		t.Errorf("fsync=sometimes: %v", err)
	}
	vals["fsync"], vals["url"] = "off", "postgres://h/db"
	if err := k.Check(vals); err == nil || !strings.Contains(err.Error(), "throwaway server") {
		t.Errorf("fsync off with a URL: %v", err)
	}
	if k.FlagName(k.Settings[0]) != "postgres-url" {
		t.Errorf("url's flag is --%s", k.FlagName(k.Settings[0]))
	}
}

// TestPostgresNotInstalled: with no binaries and no URL the probe's error
// is one line saying how to install them and naming --postgres-url.
func TestPostgresNotInstalled(t *testing.T) {
	defer func(f func() (string, error)) { findPGBinaries = f }(findPGBinaries)
	findPGBinaries = func() (string, error) { return "", pgserver.ErrNotInstalled }
	k, _ := Lookup(Postgres)
	err := k.Probe(context.Background(), k.Defaults())
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "apt-get install postgresql") ||
		!strings.Contains(err.Error(), "--postgres-url") {
		t.Errorf("probe without binaries: %v", err)
	}
}

// TestPostgresNew: with no URL, cells share one throwaway server, each in
// its own schema.
func TestPostgresNew(t *testing.T) {
	if _, err := pgserver.FindBinaries(); err != nil {
		t.Skipf("skipped: %v", err)
	}
	k, _ := Lookup(Postgres)
	ctx := context.Background()
	if err := k.Probe(ctx, k.Defaults()); err != nil {
		t.Fatal(err)
	}
	var ws []world.World
	for _, prefix := range []string{"durabench_test_a", "durabench_test_b"} {
		w, err := k.New(ctx, Config{Options: world.Options{}, Settings: k.Defaults(), Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
			t.Fatalf("%s: %v", prefix, err)
		}
		ws = append(ws, w)
	}
	if len(local.servers) != 1 || local.servers[false] == nil {
		t.Fatalf("%d throwaway servers, want the one with fsync on", len(local.servers))
	}
	if ws[0].Name() != Postgres {
		t.Errorf("world named %q", ws[0].Name())
	}
}
