package profile_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
)

// encodedHDR is a real HDR histogram (1–100 ms, microseconds) in the V2
// compressed encoding, as a latency file holds it.
func encodedHDR(f *testing.F) string {
	h := hdrhistogram.New(1, 10_000_000, 3)
	for v := int64(1000); v <= 100_000; v += 1000 {
		h.RecordValue(v)
	}
	enc, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		f.Fatal(err)
	}
	return string(enc)
}

// fuzzFiles are the files a fuzzed profile or override may name.
func fuzzFiles(enc string) profile.ReadFile {
	return profile.ShippedFiles(map[string][]byte{
		"values.txt": []byte("# value_us count\n20000 3\n\n40000 1\n"),
		"plain.hdr":  []byte(enc + "\n"),
	})
}

// exercise draws from every distribution of p, as a sweep would.
func exercise(t *testing.T, p *profile.Profile) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, op := range world.Ops() {
		if d := p.For(op).Latency; d != nil {
			for range 3 {
				_ = d.Sample(r)
			}
		}
	}
	_ = p.Label()
	_ = p.Describe()
}

// FuzzProfileFile: any profile file parses into a profile whose
// distributions can be drawn from, or is rejected with an error wrapping
// ErrInvalid (exit 2). Seeds: the built-in profiles and the test files.
func FuzzProfileFile(f *testing.F) {
	builtins, _ := filepath.Glob("builtin/*.yaml")
	for _, p := range builtins {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	enc := encodedHDR(f)
	for _, s := range []string{
		example,
		"ops:\n  publish: {latency: {dist: hdr, file: values.txt}}\n  deliver: {latency: {dist: hdr, file: values.txt, unit: ms}}\n" +
			"  run_get: {latency: {dist: hdr, encoded: " + enc + "}}\n  log_load: {latency: \"hdr:plain.hdr\"}\n",
		"groups:\n  reads: {ops: [run_get, log_load], capacity: 2}\n",
		"ops:\n  publish: {latency: {dist: lognormal, median: 10ms, p99: 5ms}}\n",
		"targets:\n  ttfs: [3ms, 2ms, 1ms]\n", "name: a\n---\nname: b\n", "ops:\n\tpublish: {}\n", "",
	} {
		f.Add([]byte(s))
	}
	read := fuzzFiles(enc)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := profile.ParseWith("p.yaml", data, read)
		if err != nil {
			if !errors.Is(err, profile.ErrInvalid) || err.Error() == "" {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("a parsed profile does not validate: %v", err)
		}
		exercise(t, p)
	})
}

// FuzzFaults: any --faults list applies to a built-in profile or is
// rejected with an error naming the override.
func FuzzFaults(f *testing.F) {
	for _, s := range []string{
		"step_created.transient=2%, publish.latency=fixed:30ms,log_load.capacity=8,reads.capacity=4,default.transient=0.1%",
		"step_created.transient=120%", "publish.latency=lognormal:30ms", "publish.latency=hdr:plain.hdr",
		"deliver.latency=normal:20ms:5ms", "log_load.per_event=50us", "step_created=2%", ",,", "reads.latency=1ms",
		"deliver.concurrency=8", "publish.concurrency=2", "deliver.concurrency=0",
	} {
		f.Add("cloud", s)
		f.Add("none", s)
	}
	read := fuzzFiles(encodedHDR(f))
	f.Fuzz(func(t *testing.T, base, faults string) {
		if !slices.Contains(profile.Names(), base) {
			return // a file name: FuzzProfileFile covers files
		}
		p, err := profile.Resolve(base, faults, read)
		if err != nil {
			if !errors.Is(err, profile.ErrInvalid) || err.Error() == "" {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("%q: overridden profile does not validate: %v", faults, err)
		}
		exercise(t, p)
	})
}

// FuzzHDR: any latency file (HDR histograms, an interval log, "value
// count" lines) parses into a distribution that samples within its
// recorded range, or is rejected naming the file.
func FuzzHDR(f *testing.F) {
	enc := encodedHDR(f)
	for _, s := range []string{
		enc + "\n",
		"#[StartTime: 0]\n\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n" +
			"0.000,1.000,100.000," + enc + "\n",
		"# value_us count\n20000 3\n\n40000 1\n", "20000 3\nfast 2\n", "# nothing\n", "HISTFAAAAjunk\n", "1e308 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := profile.ParseHDR("f.hdr", data, profile.UnitMicrosecond)
		if err != nil {
			return
		}
		r := rand.New(rand.NewPCG(1, 2))
		lo, hi := e.Quantile(0), e.Quantile(1)
		for range 5 {
			if v := e.Sample(r); v < lo || v > hi {
				t.Fatalf("sampled %v outside [%v, %v]", v, lo, hi)
			}
		}
		_ = e.Mean()
	})
}

// FuzzDist: any compact distribution (a profile value, a --faults latency)
// parses into one that reads back from its String, or is rejected.
func FuzzDist(f *testing.F) {
	for _, s := range []string{"25ms", "0", "fixed:1.5s", "normal:20ms:5ms", "lognormal:20ms:80ms", "lognormal:500us:2ms",
		"", "25", "-5ms", "fixed:", "normal:20ms", "lognormal:0s:1ms", "pareto:1ms:2ms"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := profile.ParseDist(s, "")
		if err != nil {
			return
		}
		back, err := profile.ParseDist(d.String(), "")
		if err != nil || back.String() != d.String() {
			t.Fatalf("%q -> %q -> %v, %v", s, d.String(), back, err)
		}
		_ = d.Sample(rand.New(rand.NewPCG(1, 2)))
	})
}
