// Package scenarios defines the workloads durabench drives (fan-out,
// sequential, ...): each a small documented Scenario registered by name from
// an init function, with typed options, their defaults, the metrics it
// produces, and the engine.Program it runs.
package scenarios

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/durabench/durabench/engine"
)

// ErrUnknown is matched by errors for an unknown scenario or option name.
var ErrUnknown = errors.New("unknown scenario or option")

// ErrInvalid is matched by errors for an option value of the wrong type or
// out of range.
var ErrInvalid = errors.New("invalid option value")

// Error is a scenario or option error: Msg says what is wrong, Kind is
// ErrUnknown or ErrInvalid (for errors.Is).
type Error struct {
	Msg  string
	Kind error
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the error's kind.
func (e *Error) Unwrap() error { return e.Kind }

func errorf(kind error, format string, a ...any) error {
	return &Error{Msg: fmt.Sprintf(format, a...), Kind: kind}
}

// Type is the type of a scenario option's value.
type Type string

// Option types.
const (
	Int      Type = "int"
	Duration Type = "duration"
	String   Type = "string"
	Bool     Type = "bool"
	// Bytes is a size: an integer with an optional unit B, KB (1024 bytes)
	// or MB (1024 KB), spelled canonically in the largest exact unit.
	Bytes Type = "bytes"
	// BytesList is one or more sizes separated by "/" ("64/1KB/16KB").
	BytesList Type = "bytes list"
)

// OptionSpec declares one option of a scenario.
type OptionSpec struct {
	Name string
	Type Type
	// Default is the value used when the option is not given, written as a
	// user would write it ("20", "10ms", "true").
	Default string
	Help    string
	// Min is the smallest allowed value of an Int option.
	Min int
	// Choices, when set, lists the allowed values of a String option.
	Choices []string
	// Size marks an Int option that is the size of a run (branches, steps,
	// chunks): the memory a sweep cell needs grows with it, and a sweep
	// checks it against the machine's memory before anything runs.
	Size bool
}

// Parse checks that s is a valid value of the option and returns it in its
// canonical spelling (so equal values have equal strings: "020" is "20").
func (o OptionSpec) Parse(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch o.Type {
	case Int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return "", errorf(ErrInvalid, "option %s: %q is not an integer", o.Name, s)
		}
		if n < o.Min {
			return "", errorf(ErrInvalid, "option %s: %d is less than %d", o.Name, n, o.Min)
		}
		return strconv.Itoa(n), nil
	case Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return "", errorf(ErrInvalid, "option %s: %q is not a duration (e.g. 10ms)", o.Name, s)
		}
		if d < 0 {
			return "", errorf(ErrInvalid, "option %s: %s is negative", o.Name, d)
		}
		return d.String(), nil
	case Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return "", errorf(ErrInvalid, "option %s: %q is not true or false", o.Name, s)
		}
		return strconv.FormatBool(b), nil
	case Bytes:
		n, err := parseBytes(s)
		if err != nil || n < max(o.Min, 1) {
			return "", errorf(ErrInvalid, "option %s: %q is not a size of at least %s (e.g. 10KB, 1MB, 512)", o.Name, s, FormatBytes(max(o.Min, 1)))
		}
		return FormatBytes(n), nil
	case BytesList:
		var out []string
		for _, part := range strings.Split(s, "/") {
			n, err := parseBytes(strings.TrimSpace(part))
			if err != nil || n < max(o.Min, 1) {
				return "", errorf(ErrInvalid, "option %s: %q is not a size of at least %s (sizes are separated by /, e.g. 64/1KB/16KB)",
					o.Name, part, FormatBytes(max(o.Min, 1)))
			}
			out = append(out, FormatBytes(n))
		}
		return strings.Join(out, "/"), nil
	case String:
		if len(o.Choices) > 0 {
			for _, c := range o.Choices {
				if c == s {
					return s, nil
				}
			}
			return "", errorf(ErrInvalid, "option %s: %q is not one of %s", o.Name, s, strings.Join(o.Choices, ", "))
		}
		return s, nil
	}
	return "", errorf(ErrInvalid, "option %s: unknown type %q", o.Name, o.Type)
}

// Values are a scenario's option values by name, in canonical spelling.
type Values map[string]string

// Int returns an Int option's value (0 when absent or malformed; Validate
// first).
func (v Values) Int(name string) int { n, _ := strconv.Atoi(v[name]); return n }

// Duration returns a Duration option's value.
func (v Values) Duration(name string) time.Duration { d, _ := time.ParseDuration(v[name]); return d }

// Bool returns a Bool option's value.
func (v Values) Bool(name string) bool { b, _ := strconv.ParseBool(v[name]); return b }

// Bytes returns a Bytes option's value in bytes.
func (v Values) Bytes(name string) int { n, _ := parseBytes(v[name]); return n }

// BytesList returns a BytesList option's sizes in bytes.
func (v Values) BytesList(name string) []int {
	var out []int
	for _, part := range strings.Split(v[name], "/") {
		if n, err := parseBytes(part); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// maxBytes bounds a size option: 64 MB.
const maxBytes = 64 << 20

// parseBytes reads "512", "512B", "10KB", "1MB" (binary units, any case).
func parseBytes(s string) (int, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	mult := 1
	switch {
	case strings.HasSuffix(u, "MB"):
		mult, u = 1<<20, strings.TrimSuffix(u, "MB")
	case strings.HasSuffix(u, "KB"):
		mult, u = 1<<10, strings.TrimSuffix(u, "KB")
	case strings.HasSuffix(u, "B"):
		u = strings.TrimSuffix(u, "B")
	}
	n, err := strconv.Atoi(strings.TrimSpace(u))
	if err != nil || n < 0 || n > maxBytes/mult {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

// FormatBytes spells n bytes in the largest unit that divides it exactly
// ("1MB", "10KB", "100").
func FormatBytes(n int) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MB"
	case n > 0 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KB"
	}
	return strconv.Itoa(n)
}

// String returns a String option's value.
func (v Values) String(name string) string { return v[name] }

// Scenario is one workload.
type Scenario struct {
	Name        string
	Description string
	Options     []OptionSpec
	// Metrics names the metrics (metrics package names: "ttfs", "ttls", ...)
	// the scenario produces; reports show only those.
	Metrics []string
	// Program returns the workflow program for validated option values.
	Program func(opts Values) (engine.Program, error)
}

// Option returns the scenario's option spec with that name.
func (s *Scenario) Option(name string) (OptionSpec, bool) {
	for _, o := range s.Options {
		if o.Name == name {
			return o, true
		}
	}
	return OptionSpec{}, false
}

// HasOption reports whether the scenario declares the option.
func (s *Scenario) HasOption(name string) bool { _, ok := s.Option(name); return ok }

// ApplyDefaults returns a copy of v with every missing option set to its
// default.
func (s *Scenario) ApplyDefaults(v Values) Values {
	out := make(Values, len(s.Options))
	for k, val := range v {
		out[k] = val
	}
	for _, o := range s.Options {
		if _, ok := out[o.Name]; !ok {
			out[o.Name] = o.Default
		}
	}
	return out
}

// Validate checks every value in v against its option, rejects unknown
// option names, and canonicalizes the values in place.
func (s *Scenario) Validate(v Values) error {
	names := make([]string, 0, len(v))
	for k := range v {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		o, ok := s.Option(k)
		if !ok {
			return errorf(ErrUnknown, "scenario %s has no option %q (options: %s)", s.Name, k, s.optionNames())
		}
		c, err := o.Parse(v[k])
		if err != nil {
			return fmt.Errorf("scenario %s: %w", s.Name, err)
		}
		v[k] = c
	}
	return nil
}

func (s *Scenario) optionNames() string {
	n := make([]string, len(s.Options))
	for i, o := range s.Options {
		n[i] = o.Name
	}
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, ", ")
}

// Build applies the defaults to v, validates it and returns the program and
// the complete option values.
func (s *Scenario) Build(v Values) (engine.Program, Values, error) {
	full := s.ApplyDefaults(v)
	if err := s.Validate(full); err != nil {
		return engine.Program{}, nil, err
	}
	p, err := s.Program(full)
	if err != nil {
		return engine.Program{}, nil, fmt.Errorf("scenario %s: %w", s.Name, err)
	}
	if err := p.Validate(); err != nil {
		return engine.Program{}, nil, errorf(ErrInvalid, "scenario %s: %v", s.Name, err)
	}
	return p, full, nil
}

var (
	mu       sync.RWMutex
	registry = map[string]*Scenario{}
)

// Register adds s to the registry. It panics on a duplicate or incomplete
// scenario: registration happens in init functions, so this is a programming
// error.
func Register(s *Scenario) {
	mu.Lock()
	defer mu.Unlock()
	if s.Name == "" || s.Program == nil {
		panic("scenarios: Register needs a name and a Program")
	}
	if _, dup := registry[s.Name]; dup {
		panic("scenarios: duplicate scenario " + s.Name)
	}
	for _, o := range s.Options {
		if _, err := o.Parse(o.Default); err != nil {
			panic("scenarios: " + s.Name + ": bad default: " + err.Error())
		}
	}
	registry[s.Name] = s
}

// Get returns the scenario with that name.
func Get(name string) (*Scenario, error) {
	mu.RLock()
	defer mu.RUnlock()
	if s, ok := registry[name]; ok {
		return s, nil
	}
	return nil, errorf(ErrUnknown, "unknown scenario %q (known: %s)", name, strings.Join(namesLocked(), ", "))
}

// All returns every registered scenario, sorted by name.
func All() []*Scenario {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]*Scenario, 0, len(registry))
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
	sort.Strings(n)
	return n
}
