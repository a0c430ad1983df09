package profile

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// The named profiles are YAML files like any custom profile, so each number
// sits next to its rationale and `durabench list` can show them.
//
//go:embed builtin/*.yaml
var builtinFS embed.FS

// names lists the named profiles, from fastest to slowest.
var names = []string{"none", "lan", "cloud-v1", "cloud"}

// Names returns the names of the profiles that ship with durabench, from
// fastest to slowest.
func Names() []string { return append([]string(nil), names...) }

// Load returns the named profile (see Names) or, when nameOrPath is not a
// name, the profile in that YAML file. A file named like a profile is read
// with a path ("./cloud"). Each call returns a fresh Profile.
func Load(nameOrPath string) (*Profile, error) { return load(nameOrPath, nil) }

// Resolve is the one way a command turns its profile settings (--profile,
// --faults) into a profile: it loads nameOrPath as Load does ("" is "none")
// and applies the fault overrides (ApplyOverrides; "" applies none). read
// reads the profile file and the hdr files it or the overrides name (nil:
// the file system): a FileSet's Read on the driver, the files it recorded
// (ShippedFiles) on an external worker. Errors wrap ErrInvalid; those in an
// override are *Errors whose Override names it.
func Resolve(nameOrPath, faults string, read ReadFile) (*Profile, error) {
	if nameOrPath == "" {
		nameOrPath = "none"
	}
	p, err := load(nameOrPath, read)
	if err != nil || faults == "" {
		return p, err
	}
	return ApplyOverridesWith(p, faults, read)
}

func load(nameOrPath string, read ReadFile) (*Profile, error) {
	for _, n := range names {
		if n == nameOrPath {
			data, err := builtinFS.ReadFile("builtin/" + n + ".yaml")
			if err != nil {
				return nil, fmt.Errorf("profile %s: %w", n, err) // cannot happen: embedded
			}
			p, err := Parse("builtin/"+n+".yaml", data)
			if err != nil {
				return nil, err
			}
			p.Source = "builtin"
			return p, nil
		}
	}
	readFile := read
	if readFile == nil {
		readFile = os.ReadFile
	}
	data, err := readFile(nameOrPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !strings.ContainsAny(nameOrPath, `/\.`) {
			return nil, &Error{Msg: fmt.Sprintf("%q is neither a profile name (%s) nor a file", nameOrPath, strings.Join(names, ", "))}
		}
		return nil, fmt.Errorf("profile %s: %w: %w", nameOrPath, ErrInvalid, err)
	}
	return ParseWith(nameOrPath, data, read)
}
