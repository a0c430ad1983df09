package reporters

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/durabench/durabench/results"
)

// For the package's tests only: reading back the results copy that a
// GitHub comment embeds (see embed), to check what the comment carries.

// ErrNoEmbedded is returned by ExtractEmbedded when the body has no embedded
// results.
var ErrNoEmbedded = errors.New("no embedded durabench results in the comment")

// ExtractEmbedded returns the results embedded in a GitHub comment body
// rendered by Markdown with Options.GitHub, so a later run can compare with
// it. The copy has no per-run values. It returns ErrNoEmbedded when the body
// has none, and an error naming the problem when the copy is corrupt or of
// another schema.
func ExtractEmbedded(body string) (*results.File, error) {
	i := strings.Index(body, embedPrefix)
	if i < 0 {
		return nil, ErrNoEmbedded
	}
	rest := body[i+len(embedPrefix):]
	j := strings.Index(rest, "-->")
	if j < 0 {
		return nil, fmt.Errorf("embedded results: unterminated comment")
	}
	enc := strings.Join(strings.Fields(rest[:j]), "")
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("embedded results: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("embedded results: %w", err)
	}
	js, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("embedded results: %w", err)
	}
	var f results.File
	if err := json.Unmarshal(js, &f); err != nil {
		return nil, fmt.Errorf("embedded results: %w", err)
	}
	if f.Schema != results.Schema {
		return nil, fmt.Errorf("embedded results: schema %q, want %q", f.Schema, results.Schema)
	}
	return &f, nil
}
