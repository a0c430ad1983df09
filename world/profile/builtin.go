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
var names = []string{"none", "lan", "cloud"}

// Names returns the names of the profiles that ship with durabench, from
// fastest to slowest.
func Names() []string { return append([]string(nil), names...) }

// Load returns the named profile (see Names) or, when nameOrPath is not a
// name, the profile in that YAML file. A file named like a profile is read
// with a path ("./cloud"). Each call returns a fresh Profile.
func Load(nameOrPath string) (*Profile, error) {
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
	if _, err := os.Stat(nameOrPath); errors.Is(err, fs.ErrNotExist) && !strings.ContainsAny(nameOrPath, `/\.`) {
		return nil, &Error{Msg: fmt.Sprintf("%q is neither a profile name (%s) nor a file", nameOrPath, strings.Join(names, ", "))}
	}
	return ParseFile(nameOrPath)
}
