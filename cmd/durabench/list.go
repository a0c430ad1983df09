package main

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world/profile"
	"github.com/durabench/durabench/world/registry"
)

// cmdList runs `durabench list`: scenarios, versions, kill switches, worlds,
// targets (the adapters installed) and profiles; with --profile, every number
// of one profile.
func cmdList(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("list", stderr)
	prof := fs.String("profile", "", "print every number of this profile (a name or a file) and its faults with --faults")
	faults := fs.String("faults", "", "with --profile: fault overrides to apply first, e.g. step_created.transient=2%")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("list takes no arguments")
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if *prof != "" || *faults != "" {
		p, err := profile.Resolve(*prof, *faults, nil)
		if err != nil {
			return usageErr("--profile %s: %v", *prof, err)
		}
		_, err = io.WriteString(w, p.Describe())
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SCENARIOS (--scenario NAME, --option name=value)")
	for _, s := range scenarios.All() {
		fmt.Fprintf(w, "  %s — %s\n", s.Name, s.Description)
		for _, o := range s.Options {
			typ := string(o.Type)
			if len(o.Choices) > 0 {
				typ = strings.Join(o.Choices, "|")
			}
			fmt.Fprintf(tw, "      %s\t%s\tdefault %s\t%s\n", o.Name, typ, o.Default, o.Help)
		}
		tw.Flush()
		fmt.Fprintf(w, "      metrics: %s\n", strings.Join(s.Metrics, ", "))
	}
	fmt.Fprintln(w, "\nVERSIONS (--versions NAME,...|all; by default a sweep runs all but baseline-serial; a sweep file can define more as feature sets)")
	for _, v := range engine.Versions() {
		fmt.Fprintf(tw, "  %s\t%s\n", v.Name, v.Features)
		fmt.Fprintf(tw, "  \t%s\n", v.Description)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nKILL SWITCHES (--switches none,NAME=VALUE; join several in one set with +)")
	for _, s := range engine.KnownSwitches() {
		fmt.Fprintf(tw, "  %s=%s\t%s\n", s.Name, s.Values, s.Effect)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nWORLDS (--world NAME,...; a world's settings are flags, or keys under its name in a sweep file)")
	for _, k := range registry.All() {
		fmt.Fprintf(w, "  %s — %s\n", k.Name, k.Description)
		for _, s := range k.Settings {
			def := s.Default
			if def == "" {
				def = `""`
			}
			fmt.Fprintf(tw, "      --%s\t%s\tdefault %s\t%s\n", k.FlagName(s), s.Type, def, s.Help)
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\nTARGETS (--targets NAME|URL,...: the engine under test; see docs/targets.md)")
	fmt.Fprintf(tw, "  %s\t%s\n", "reference", "the built-in engine, in-process on each --world, per version and switch set (default)")
	installed := target.Installed()
	for _, name := range slices.Sorted(maps.Keys(installed)) {
		fmt.Fprintf(tw, "  %s\t%s\n", name, installed[name])
	}
	if len(installed) == 0 {
		fmt.Fprintf(tw, "  \t%s\n", "no adapter installed: make engines builds the bundled ones (goworkflows, temporal, dbos) into bin/")
	}
	tw.Flush()
	fmt.Fprintln(w, "\nPROFILES (--profile NAME|FILE, --faults OP.FIELD=VALUE,...; durabench list --profile NAME prints its numbers)")
	for _, name := range profile.Names() {
		desc := ""
		if p, err := profile.Load(name); err == nil {
			desc = p.Description
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, desc)
	}
	return tw.Flush()
}
