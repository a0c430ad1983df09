package main

import (
	"fmt"
	"io"

	"github.com/durabench/durabench/results"
)

// benchfmt renders f in Go's benchmark format.
// TODO(wiring): reporters.Benchfmt lands with the compare/gate work.
func benchfmt(w io.Writer, f *results.File) error {
	return fmt.Errorf("--format benchfmt: not built yet: %w", errUsage)
}
