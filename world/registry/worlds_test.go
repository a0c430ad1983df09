package registry

import (
	"context"
	"strings"
	"testing"

	"github.com/durabench/durabench/world"
)

// TestRegistry: the default world comes first, every world's defaults are
// valid values of its settings, and an unknown name lists the known ones.
func TestRegistry(t *testing.T) {
	all := All()
	if len(all) < 3 || all[0].Name != Default {
		t.Fatalf("All() = %d kinds, first %q; want the default %q first", len(all), all[0].Name, Default)
	}
	for _, k := range all {
		if k.Description == "" {
			t.Errorf("%s: no description", k.Name)
		}
		vals := k.Defaults()
		for _, s := range k.Settings {
			if err := k.Set(vals, s.Name, s.Default); err != nil && s.Default != "" {
				t.Errorf("%s.%s: default %q: %v", k.Name, s.Name, s.Default, err)
			}
		}
	}
	if _, err := Lookup("redis"); err == nil || !strings.Contains(err.Error(), `unknown world "redis" (known: nats, mem, postgres, sim)`) {
		t.Errorf("Lookup(redis): %v", err)
	}
}

// TestSettings: a setting's value is checked by type and by its own rule,
// and kept in canonical spelling.
func TestSettings(t *testing.T) {
	nats, err := Lookup(NATS)
	if err != nil {
		t.Fatal(err)
	}
	vals := nats.Defaults()
	for _, c := range []struct{ name, value, want string }{
		{"replicas", "0", "0 is less than 1"},
		{"replicas", "x", `"x" is not an integer`},
		{"storage", "tape", `"tape" is not file or memory`},
		{"keep", "maybe", `"maybe" is not true or false`},
	} {
		if err := nats.Set(vals, c.name, c.value); err == nil || err.Error() != c.want {
			t.Errorf("nats.%s=%s: error %v, want %q", c.name, c.value, err, c.want)
		}
	}
	if err := nats.Set(vals, "replicas", " 03"); err != nil || vals["replicas"] != "3" {
		t.Errorf("replicas 03: %v, value %q", err, vals["replicas"])
	}
	if err := nats.Check(vals); err == nil || !strings.Contains(err.Error(), "needs --nats-url") {
		t.Errorf("3 replicas on the embedded server: %v", err)
	}
	if got := redact("nats://u:secret@h:4222,nats://h2"); got != "nats://u:xxxxx@h:4222,nats://h2" {
		t.Errorf("redact: %s", got)
	}
}

// TestNew: the in-process worlds build from their defaults; sim runs code
// in virtual time (it is a Runner).
func TestNew(t *testing.T) {
	for _, name := range []string{"mem", "sim"} {
		k, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		w, err := k.New(context.Background(), Config{Options: world.Options{Seed: 1}, Settings: k.Defaults()})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if w.Name() != name {
			t.Errorf("%s: world named %q", name, w.Name())
		}
		if _, ok := w.(Runner); ok != k.VirtualTime {
			t.Errorf("%s: Runner %v, VirtualTime %v", name, ok, k.VirtualTime)
		}
		w.Close()
	}
}
