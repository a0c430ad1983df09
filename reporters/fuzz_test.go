package reporters

import (
	"bytes"
	"io"
	"testing"

	"github.com/durabench/durabench/results"
)

// FuzzReport: any results file that reads (durabench report FILE, a
// --baseline, a history entry) renders in every text format, alone and
// against the fixture's baseline, without a panic.
func FuzzReport(f *testing.F) {
	f.Add(mustJSON(fixtureHead()))
	f.Add(mustJSON(variant("cloud", true, true)))
	f.Add(mustJSON(fixtureBase()))
	base := fixtureBase()
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := results.Decode("results.json", data)
		if err != nil {
			return // FuzzResultsFile in results checks the errors
		}
		for _, opt := range []Options{{}, {Baseline: base}, {GitHub: true, Baseline: base}} {
			if err := Text(io.Discard, file, opt); err != nil {
				t.Fatalf("text: %v", err)
			}
			// A GitHub comment may not fit its limit: that is an error.
			if err := Markdown(io.Discard, file, opt); err != nil && !opt.GitHub {
				t.Fatalf("markdown (github %v): %v", opt.GitHub, err)
			}
		}
		if err := Benchfmt(io.Discard, file); err != nil {
			t.Fatalf("benchfmt: %v", err)
		}
		if err := JSON(io.Discard, file); err != nil {
			t.Fatalf("json: %v", err)
		}
	})
}

// FuzzEmbedded: the results copy a PR comment carries (the previous
// comment's, read back as the next comparison's baseline) decodes or is
// an error; never a panic or an unbounded read. A comment rendered from a
// fixture reads back as its cells.
func FuzzEmbedded(f *testing.F) {
	var b bytes.Buffer
	if err := Markdown(&b, fixtureHead(), Options{GitHub: true}); err != nil {
		f.Fatal(err)
	}
	f.Add(b.String())
	f.Add("just a comment")
	f.Add(embedPrefix + "!!\n-->")
	f.Add(embedPrefix + "H4sIAAAAAAAA/w==\n-->")
	f.Fuzz(func(t *testing.T, body string) {
		file, err := ExtractEmbedded(body)
		if err != nil {
			return
		}
		if err := Text(io.Discard, file, Options{}); err != nil {
			t.Fatalf("text of an embedded copy: %v", err)
		}
	})
}
