package reporters

import (
	"encoding/json"
	"io"

	"github.com/durabench/durabench/results"
)

// JSON writes f as indented JSON, the results file format itself.
func JSON(w io.Writer, f *results.File) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(f)
}
