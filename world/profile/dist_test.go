package profile_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/profile"
)

const ms = time.Millisecond

// sampleStats draws n samples and returns the sorted samples and their mean.
func sampleStats(d profile.Dist, n int, seed uint64) ([]time.Duration, time.Duration) {
	r := rand.New(rand.NewPCG(seed, 1))
	s := make([]time.Duration, n)
	var sum float64
	for i := range s {
		s[i] = d.Sample(r)
		sum += float64(s[i])
	}
	slices.Sort(s)
	return s, time.Duration(sum / float64(n))
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1)]
}

// within reports whether got is within frac of want.
func within(got, want time.Duration, frac float64) bool {
	return math.Abs(float64(got-want)) <= frac*float64(want)
}

// TestDistSamplesMatchQuantiles: the empirical p50, p99 and mean of 20 000
// draws match what the distribution says it is (generous bounds: 5% for
// p50 and the mean, 10% for p99).
func TestDistSamplesMatchQuantiles(t *testing.T) {
	hist := hdrhistogram.New(1, 10_000_000, 3)
	r := rand.New(rand.NewPCG(7, 7))
	for range 50_000 {
		hist.RecordValue(int64(5000 + r.ExpFloat64()*15000)) // µs: 5 ms + exp(15 ms)
	}
	emp := histDist(t, hist)
	for _, d := range []profile.Dist{
		profile.Fixed(25 * ms),
		profile.Normal{Mu: 30 * ms, StdDev: 5 * ms},
		profile.LogNormal{Median: 20 * ms, P99: 80 * ms},
		profile.LogNormal{Median: 500 * time.Microsecond, P99: 500 * time.Microsecond},
		emp,
	} {
		t.Run(d.String(), func(t *testing.T) {
			s, mean := sampleStats(d, 20_000, 1)
			if p50 := quantile(s, 0.5); !within(p50, d.Quantile(0.5), 0.05) {
				t.Errorf("sample p50 %v, Quantile(0.5) %v", p50, d.Quantile(0.5))
			}
			if p99 := quantile(s, 0.99); !within(p99, d.Quantile(0.99), 0.10) {
				t.Errorf("sample p99 %v, Quantile(0.99) %v", p99, d.Quantile(0.99))
			}
			if !within(mean, d.Mean(), 0.05) {
				t.Errorf("sample mean %v, Mean() %v", mean, d.Mean())
			}
			if s[0] < 0 {
				t.Errorf("negative sample %v", s[0])
			}
		})
	}
	// The imported histogram reproduces the recorded distribution.
	for _, q := range []float64{0.5, 0.9, 0.99} {
		rec := time.Duration(hist.ValueAtQuantile(q*100)) * time.Microsecond
		if got := emp.Quantile(q); !within(got, rec, 0.01) {
			t.Errorf("hdr p%v %v, recorded %v", q*100, got, rec)
		}
	}
}

func TestLogNormalParameters(t *testing.T) {
	d := profile.LogNormal{Median: 20 * ms, P99: 80 * ms}
	if d.Quantile(0.5) != 20*ms || !within(d.Quantile(0.99), 80*ms, 1e-6) {
		t.Errorf("p50 %v p99 %v", d.Quantile(0.5), d.Quantile(0.99))
	}
	// σ = ln(4)/2.326 = 0.596, mean = median·exp(σ²/2) = 23.9 ms.
	if !within(d.Mean(), 23_900*time.Microsecond, 0.005) {
		t.Errorf("mean %v", d.Mean())
	}
}

func TestNormalClampsAtZero(t *testing.T) {
	d := profile.Normal{Mu: 1 * ms, StdDev: 2 * ms}
	s, mean := sampleStats(d, 20_000, 3)
	zeros := 0
	for _, v := range s {
		if v == 0 {
			zeros++
		}
	}
	// P(X < 0) = Φ(-0.5) = 0.3085.
	if frac := float64(zeros) / float64(len(s)); math.Abs(frac-0.3085) > 0.02 {
		t.Errorf("%.3f of draws clamped, want ~0.3085", frac)
	}
	if !within(mean, d.Mean(), 0.05) {
		t.Errorf("mean %v, Mean() %v", mean, d.Mean())
	}
}

func histDist(t *testing.T, h *hdrhistogram.Histogram) profile.Dist {
	t.Helper()
	enc, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		t.Fatal(err)
	}
	d, err := profile.ParseHDR("test", enc, profile.UnitMicrosecond)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestHDRFormats(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	h := hdrhistogram.New(1, 10_000_000, 3)
	for v := int64(1000); v <= 100_000; v += 1000 { // 1 ms .. 100 ms, uniform
		h.RecordValue(v)
	}
	enc, _ := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	h2 := hdrhistogram.New(1, 10_000_000, 3)
	h2.RecordValues(200_000, 100) // 100 calls at 200 ms
	enc2, _ := h2.Encode(hdrhistogram.V2CompressedEncodingCookieBase)

	files := map[string]string{
		"plain.hdr": string(enc) + "\n",
		"log.hlog": "#[StartTime: 0]\n\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n" +
			"0.000,1.000,100.000," + string(enc) + "\n1.000,1.000,200.000," + string(enc2) + "\n",
		"values.txt": "# value_us count\n20000 3\n\n40000 1\n",
	}
	for name, content := range files {
		write(name, content)
	}
	plain, err := profile.LoadHDR(filepath.Join(dir, "plain.hdr"), profile.UnitMicrosecond)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Count() != 100 || !within(plain.Quantile(0.5), 50*ms, 0.02) || !within(plain.Mean(), 50500*time.Microsecond, 0.01) {
		t.Errorf("plain: n %d p50 %v mean %v", plain.Count(), plain.Quantile(0.5), plain.Mean())
	}
	merged, err := profile.LoadHDR(filepath.Join(dir, "log.hlog"), profile.UnitMicrosecond)
	if err != nil {
		t.Fatal(err)
	}
	if merged.Count() != 200 || !within(merged.Quantile(0.75), 200*ms, 0.01) {
		t.Errorf("interval log: n %d p75 %v, want 200 values, p75 200ms", merged.Count(), merged.Quantile(0.75))
	}
	values, err := profile.LoadHDR(filepath.Join(dir, "values.txt"), profile.UnitMicrosecond)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := sampleStats(values, 4000, 5)
	at20 := 0
	for _, v := range s {
		if v != 20*ms && v != 40*ms {
			t.Fatalf("drew %v, not a recorded value", v)
		}
		if v == 20*ms {
			at20++
		}
	}
	if frac := float64(at20) / 4000; math.Abs(frac-0.75) > 0.03 {
		t.Errorf("20ms drawn %.3f of the time, want 0.75", frac)
	}

	// From a profile file: relative to the file, in the given unit; inline.
	prof := write("p.yaml", fmt.Sprintf(`ops:
  publish: {latency: {dist: hdr, file: values.txt}}
  deliver: {latency: {dist: hdr, file: values.txt, unit: ms}}
  run_get: {latency: {dist: hdr, encoded: %s}}
  log_load: {latency: "hdr:plain.hdr"}
`, enc))
	p, err := profile.ParseFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.For(world.OpPublish).Latency.Quantile(0.5); got != 20*ms {
		t.Errorf("publish p50 %v", got)
	}
	if got := p.For(world.OpDeliver).Latency.Quantile(0.5); got != 20*time.Second {
		t.Errorf("deliver (unit ms) p50 %v", got)
	}
	if got := p.For(world.OpGetRun).Latency.Quantile(0.5); !within(got, 50*ms, 0.02) {
		t.Errorf("run_get (encoded) p50 %v", got)
	}
	if got := p.For(world.OpLoad).Latency.Quantile(0.5); !within(got, 50*ms, 0.02) {
		t.Errorf("log_load (compact) p50 %v", got)
	}

	for name, content := range map[string]string{
		"bad.txt":   "20000 3\nfast 2\n",
		"empty.txt": "# nothing\n",
		"junk.hdr":  "HISTFAAAAjunk\n",
	} {
		if _, err := profile.LoadHDR(write(name, content), profile.UnitMicrosecond); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v does not name the file", name, err)
		}
	}
}

func TestParseDist(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want profile.Dist
	}{
		{"25ms", profile.Fixed(25 * ms)},
		{"0", profile.Fixed(0)},
		{"fixed:1.5s", profile.Fixed(1500 * ms)},
		{"normal:20ms:5ms", profile.Normal{Mu: 20 * ms, StdDev: 5 * ms}},
		{"lognormal:20ms:80ms", profile.LogNormal{Median: 20 * ms, P99: 80 * ms}},
		{"lognormal:500us:2ms", profile.LogNormal{Median: 500 * time.Microsecond, P99: 2 * ms}},
	} {
		got, err := profile.ParseDist(tt.in, "")
		if err != nil || got != tt.want {
			t.Errorf("ParseDist(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			continue
		}
		// String is the compact form, and reads back.
		back, err := profile.ParseDist(got.String(), "")
		if err != nil || back != got {
			t.Errorf("ParseDist(%q.String() = %q) = %v, %v", tt.in, got.String(), back, err)
		}
	}
	for _, bad := range []string{"", "25", "-5ms", "fixed:", "normal:20ms", "lognormal:0s:1ms", "lognormal:20ms:10ms", "pareto:1ms:2ms", "hdr:/no/such/file"} {
		if _, err := profile.ParseDist(bad, ""); err == nil {
			t.Errorf("ParseDist(%q): no error", bad)
		}
	}
}
