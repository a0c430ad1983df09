// Package registry is the registry of the worlds a sweep runs on, as package
// scenarios is the registry of its workloads: each world is a Kind
// registered by name from an init function, one file per world here, with
// its description, its own settings (flags and sweep-file keys), whether
// its clock is virtual, and how to build a fresh one for a cell. Adding a
// world is its implementation under world/ and one file here: the sweep,
// the CLI and the results file learn everything from the Kind.
//
// The engines under test (targets) are meant to get a registry of the same
// shape: a name, a description, typed settings with defaults, a check of
// the settings as a whole, a probe, and a constructor.
package registry

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/durabench/durabench/world"
)

// Default is the world of a sweep that names none: embedded NATS
// JetStream, the real thing with no set-up.
const Default = "nats"

// Kind is one kind of world a sweep can run on.
type Kind struct {
	// Name is the world's name in --world, sweep files and results.
	Name string
	// Description is one line for `durabench list`.
	Description string
	// VirtualTime is true when the world's clock is simulated: its worlds
	// implement Runner, and results say the figures are virtual.
	VirtualTime bool
	// Settings are the world's own settings.
	Settings []Setting
	// Check, when set, checks the settings as a whole for a plan that runs
	// on this world (e.g. replicas that need an external server).
	Check func(s Values) error
	// Probe, when set, checks before anything runs that the world's
	// external services answer; its error names the setting.
	Probe func(ctx context.Context, s Values) error
	// New builds a fresh world for one cell.
	New func(ctx context.Context, c Config) (world.World, error)
	// Share, when set, starts what two cells' worlds are to share (an
	// interleaved pair: the embedded NATS server), passed to New as
	// Config.Shared; nil with no error when there is nothing to share
	// under these settings. The caller closes it after both worlds.
	Share func(ctx context.Context, s Values) (Shared, error)
	// Kept, when set, says what a sweep left behind on a shared server
	// (nothing: ""), for the user to inspect or remove; prefix begins the
	// names of every cell's resources (see Config.Prefix).
	Kept func(s Values, prefix string) string
	// StepBytes is the memory a sweep cell on this world holds per step
	// (a branch of a fan-out, a step of a chain) of each of its runs, the
	// engine, the driver and the world's own store included: the peak heap
	// growth of a cell, measured with sweep's BenchmarkCellHeap and rounded
	// up. 0 means DefaultStepBytes. A sweep refuses a plan whose cells
	// would not fit in memory (sweep.Plan.MaxMemory).
	StepBytes int64
}

// DefaultStepBytes is the StepBytes of a world that has not measured its
// own: more than any measured world.
const DefaultStepBytes = 64 << 10

// BytesPerStep is k's StepBytes, or DefaultStepBytes.
func (k *Kind) BytesPerStep() int64 {
	if k.StepBytes > 0 {
		return k.StepBytes
	}
	return DefaultStepBytes
}

// Config is what a world is built from for one cell.
type Config struct {
	// Options are the cell's world options (guard, retry style,
	// visibility timeout, seed).
	Options world.Options
	// Settings are the world's settings, every default filled in.
	Settings Values
	// Prefix names the cell's resources on a shared server (streams,
	// tables): unique to the sweep and the cell.
	Prefix string
	// SoleWriter says no other process writes under Prefix: the engine
	// runs in this process, not on external workers.
	SoleWriter bool
	// Profiled says a latency/fault profile wraps the world and supplies
	// every latency: the world must not add one of its own.
	Profiled bool
	// Shared, when set, is what Kind.Share started for the cell's world
	// to share with another's.
	Shared Shared
}

// Shared is a resource several worlds share (Kind.Share).
type Shared interface {
	Close() error
}

// Runner is a world that runs the code using it itself: a VirtualTime world
// runs fn as its root task in virtual time. Code driving any world calls
// Run when the world is a Runner, and fn directly otherwise.
type Runner interface {
	Run(ctx context.Context, fn func(ctx context.Context)) error
}

// Type is the type of a setting's value: what a sweep file must give.
type Type string

// Setting types.
const (
	String Type = "string"
	Int    Type = "int"
	Bool   Type = "bool"
)

// Setting is one setting of a world: flag --<world>-<Name> (or Flag; an
// underscore in Name is a dash in the flag) and sweep-file key
// <world>.<Name>, e.g. --nats-url and nats.url, --nats-tls-ca and
// nats.tls_ca.
type Setting struct {
	Name string
	// Flag is the flag's name when it is not <world>-<Name>.
	Flag string
	// Aliases are more flag names for the setting (a shorter spelling).
	Aliases []string
	Help    string
	// Default is the value when the user gives none, as a user writes it.
	Default string
	Type    Type
	// Parse checks a value and returns it in canonical spelling; nil
	// accepts any value of Type.
	Parse func(s string) (string, error)
	// Record says results record the value (world_options.<world>_<Name>),
	// through Redact when set (a URL's password).
	Record bool
	Redact func(string) string
	// Secret marks a credential (a password, a token): its value is never
	// written anywhere — not recorded (Record must be false), not in an
	// error message, not by durabench list.
	Secret bool
}

// FlagName is the flag that sets s on k.
func (k *Kind) FlagName(s Setting) string {
	if s.Flag != "" {
		return s.Flag
	}
	return k.Name + "-" + strings.ReplaceAll(s.Name, "_", "-")
}

// parse checks a value of the setting against its Type and Parse, and
// returns its canonical spelling.
func (s Setting) parse(v string) (string, error) {
	v = strings.TrimSpace(v)
	switch s.Type {
	case Int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return "", fmt.Errorf("%q is not an integer", v)
		}
		v = strconv.Itoa(n)
	case Bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return "", fmt.Errorf("%q is not true or false", v)
		}
		v = strconv.FormatBool(b)
	}
	if s.Parse != nil {
		return s.Parse(v)
	}
	return v, nil
}

// Set parses v and sets the setting named name in vals; the error says
// what is wrong with the value.
func (k *Kind) Set(vals Values, name, v string) error {
	for _, s := range k.Settings {
		if s.Name == name {
			canon, err := s.parse(v)
			if err != nil {
				return err
			}
			vals[name] = canon
			return nil
		}
	}
	return fmt.Errorf("world %s has no setting %q", k.Name, name)
}

// Defaults are k's settings with their default values.
func (k *Kind) Defaults() Values {
	v := Values{}
	for _, s := range k.Settings {
		v[s.Name] = s.Default
	}
	return v
}

// Values are a world's settings by name, in canonical spelling.
type Values map[string]string

// Int returns an Int setting's value.
func (v Values) Int(name string) int { n, _ := strconv.Atoi(v[name]); return n }

// Bool returns a Bool setting's value.
func (v Values) Bool(name string) bool { b, _ := strconv.ParseBool(v[name]); return b }

// Secrets returns the values of k's Secret settings that are set in v:
// what must never be written anywhere.
func (k *Kind) Secrets(v Values) []string {
	var out []string
	for _, s := range k.Settings {
		if s.Secret && v[s.Name] != "" {
			out = append(out, v[s.Name])
		}
	}
	return out
}

// Clone returns a copy of v.
func (v Values) Clone() Values {
	c := make(Values, len(v))
	for k, x := range v {
		c[k] = x
	}
	return c
}

var (
	mu       sync.RWMutex
	registry = map[string]*Kind{}
)

// Register adds a world kind; it panics on a duplicate name or a default
// that does not parse (a programming error, found at start-up).
func Register(k *Kind) {
	mu.Lock()
	defer mu.Unlock()
	if k.Name == "" || k.New == nil {
		panic("worlds: Register needs a name and New")
	}
	if _, dup := registry[k.Name]; dup {
		panic("worlds: duplicate world " + k.Name)
	}
	for _, s := range k.Settings {
		if _, err := s.parse(s.Default); err != nil && s.Default != "" {
			panic("worlds: " + k.Name + "." + s.Name + ": bad default: " + err.Error())
		}
		if s.Secret && (s.Record || s.Default != "" || s.Parse != nil) {
			panic("worlds: " + k.Name + "." + s.Name + ": a secret is neither recorded, nor defaulted, nor parsed")
		}
	}
	registry[k.Name] = k
}

// Lookup returns the world kind with that name.
func Lookup(name string) (*Kind, error) {
	mu.RLock()
	defer mu.RUnlock()
	if k, ok := registry[name]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("unknown world %q (known: %s)", name, strings.Join(namesLocked(), ", "))
}

// All returns every registered world kind: the default first, then by name.
func All() []*Kind {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]*Kind, 0, len(registry))
	for _, n := range namesLocked() {
		out = append(out, registry[n])
	}
	return out
}

func namesLocked() []string {
	n := make([]string, 0, len(registry))
	for k := range registry {
		n = append(n, k)
	}
	slices.SortFunc(n, func(a, b string) int {
		switch {
		case a == Default:
			return -1
		case b == Default:
			return 1
		}
		return strings.Compare(a, b)
	})
	return n
}

// choice is a Setting.Parse accepting one of the values, with the message
// "%q is not a or b".
func choice(vals ...string) func(string) (string, error) {
	return func(s string) (string, error) {
		if slices.Contains(vals, s) {
			return s, nil
		}
		return "", fmt.Errorf("%q is not %s", s, orList(vals))
	}
}

// atLeast is a Setting.Parse for an Int setting of at least n.
func atLeast(n int) func(string) (string, error) {
	return func(s string) (string, error) {
		if v, _ := strconv.Atoi(s); v < n {
			return "", fmt.Errorf("%s is less than %d", s, n)
		}
		return s, nil
	}
}

func orList(v []string) string {
	if len(v) < 2 {
		return strings.Join(v, "")
	}
	return strings.Join(v[:len(v)-1], ", ") + " or " + v[len(v)-1]
}
