package sweep

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/durabench/durabench/engine"
)

// Flags are the plan's command-line flags: one per setting (the same names
// as the sweep file's keys, with dashes), --option name=value (repeatable),
// and -f FILE. Flags override the file.
type Flags struct {
	file    string
	options []string
	set     map[string]string
	fs      *flag.FlagSet
}

type flagValue struct {
	f    *Flags
	name string
	bool bool
}

func (v *flagValue) String() string { return "" }
func (v *flagValue) Set(s string) error {
	v.f.set[v.name] = s
	return nil
}
func (v *flagValue) IsBoolFlag() bool { return v.bool }

type optionsValue struct{ f *Flags }

func (v optionsValue) String() string { return "" }
func (v optionsValue) Set(s string) error {
	v.f.options = append(v.f.options, s)
	return nil
}

// BindFlags registers the plan's flags on fs.
func BindFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{set: map[string]string{}, fs: fs}
	def := DefaultPlan()
	for _, fd := range fields {
		isBool := fieldKinds[fd.name] == kBool || fieldKinds[fd.name] == kBoolOrWord
		fs.Var(&flagValue{f: f, name: fd.name, bool: isBool}, fd.name, fd.help+defaultNote(def, fd.name))
	}
	fs.Var(optionsValue{f}, "option", "scenario option name=value[,value...] (repeatable; see durabench list)")
	fs.StringVar(&f.file, "f", "", "sweep file (YAML); flags override it")
	return f
}

// ParsePlan is the plan `durabench sweep ARGS` would run: the flags (and
// the -f file they name) parsed and validated.
func ParsePlan(args []string) (*Plan, error) {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, &UsageError{Err: err}
	}
	return f.Plan()
}

// defaultNote describes a setting's default for -h.
func defaultNote(p *Plan, name string) string {
	var d string
	switch name {
	case "scenario":
		d = p.scenarioNames()
	case "branches":
		d = "20,64,256"
	case "versions":
		var names []string
		for _, v := range engine.DefaultVersions() {
			names = append(names, v.Name)
		}
		d = strings.Join(names, ",")
	case "switches":
		d = "none,resilient-step-dispatch=0"
	case "world":
		d = strings.Join(p.Worlds, ",")
	case "profile":
		d = "none"
	case "reps":
		d = fmt.Sprint(p.Reps)
	case "warmup":
		d = fmt.Sprint(p.Warmup)
	case "pace":
		d = p.Pace
	case "concurrency":
		d = fmt.Sprint(p.Concurrency)
	case "cell-timeout":
		d = p.CellTimeout.String()
	case "grace":
		d = p.Grace.String()
	case "seed":
		d = fmt.Sprint(p.Seed)
	case "retry-style":
		d = string(p.RetryStyle)
	case "spans":
		d = "on"
	case "visibility-timeout":
		d = p.VisibilityTimeout.String()
	default:
		s, ok := worldFlags[name]
		if !ok || s.Default == "" || s.Default == "false" {
			return ""
		}
		d = s.Default
	}
	return " (default " + d + ")"
}

// PrintableFlag returns how the value of flag name (without dashes) may
// be printed, e.g. in the command that resumes a sweep: a secret's (a
// password, a token) as <hidden>, a URL without its credentials.
func PrintableFlag(name, value string) string {
	s, ok := worldFlags[name]
	switch {
	case !ok:
		return value
	case s.Secret:
		return "<hidden>"
	case s.Redact != nil:
		return s.Redact(value)
	}
	return value
}

// File is the -f sweep file, if any.
func (f *Flags) File() string { return f.file }

// Plan builds the plan: defaults, then the sweep file, then the flags that
// were given; then it validates the whole. Every error names the flag or the
// file, line and field, and is a *UsageError.
func (f *Flags) Plan() (*Plan, error) {
	p := DefaultPlan()
	if f.file != "" {
		if err := p.LoadFile(f.file); err != nil {
			return nil, err
		}
	}
	var err error
	f.fs.Visit(func(fl *flag.Flag) {
		raw, ok := f.set[fl.Name]
		if err != nil || !ok {
			return
		}
		fd, _ := lookupField(fl.Name)
		vals := []string{raw}
		if fd.list {
			vals = splitList(raw)
		}
		at := UsageError{Flag: "--" + fl.Name, Value: raw}
		if worldFlags[fl.Name].Secret {
			at.Value = "" // a password or token is never printed
		}
		if e := p.set(fl.Name, vals, at); e != nil {
			at.Err = e
			err = &at
		}
	})
	if err != nil {
		return nil, err
	}
	if len(f.options) > 0 {
		if p.Options == nil {
			p.Options = map[string][]string{}
		}
		for _, o := range f.options {
			name, val, ok := strings.Cut(o, "=")
			if !ok {
				return nil, &UsageError{Flag: "--option", Value: o, Msg: "want name=value"}
			}
			if e := setOption(p.Options, strings.TrimSpace(name), splitList(val)); e != nil {
				return nil, &UsageError{Flag: "--option", Value: o, Err: e}
			}
			p.setOrigin("option "+strings.TrimSpace(name), UsageError{Flag: "--option", Value: o})
		}
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p, nil
}

// finish completes a plan whose settings are all given, and validates it.
func (p *Plan) finish() error {
	if !p.given("versions") && len(p.Custom) > 0 {
		p.Versions = append(engine.DefaultVersions(), p.Custom...)
	}
	if opts, ok := p.Options["branches"]; ok && len(opts) > 0 {
		// --option branches=... is the same as --branches.
		at, ok := p.origins["option branches"]
		if !ok {
			at = UsageError{Field: "option branches"}
		}
		if err := p.set("branches", opts, at); err != nil {
			return &UsageError{Field: "option branches", Err: err}
		}
		delete(p.Options, "branches")
	}
	return p.Validate()
}

func splitList(s string) []string {
	parts := strings.Split(s, ",")
	out := parts[:0]
	for _, x := range parts {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
