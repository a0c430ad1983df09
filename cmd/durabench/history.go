package main

import (
	"fmt"
	"io"

	"github.com/durabench/durabench/results"
)

// cmdHistory runs `durabench history add RESULTS --dir DIR`.
func cmdHistory(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "add" {
		return usageErr("history: want `history add RESULTS --dir DIR`")
	}
	fs := newFlagSet("history add", stderr)
	dir := fs.String("dir", "", "history directory")
	pos, err := parse(fs, args[1:], stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *dir == "" {
		return usageErr("history add needs one results file and --dir DIR")
	}
	f, err := results.Read(pos[0])
	if err != nil {
		return err
	}
	if f.Partial {
		return fmt.Errorf("%s: partial results (%s) are not history: %w", pos[0], f.Error, results.ErrInvalid)
	}
	path, err := results.AddHistory(*dir, f)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, path)
	return nil
}
