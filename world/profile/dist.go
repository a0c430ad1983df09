package profile

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Dist is a latency distribution. Implementations are immutable and safe for
// concurrent use: the randomness comes from the caller's generator, so one
// seeded generator drawing in a fixed order replays the same latencies.
type Dist interface {
	// Sample draws one latency (never negative).
	Sample(r *rand.Rand) time.Duration
	// Quantile returns the latency at quantile q in [0, 1].
	Quantile(q float64) time.Duration
	// Mean returns the distribution's expected value.
	Mean() time.Duration
	// String returns the compact form ParseDist reads back, e.g.
	// "lognormal:20ms:80ms".
	String() string
}

// Fixed is a constant latency.
type Fixed time.Duration

// Sample returns the constant.
func (f Fixed) Sample(*rand.Rand) time.Duration { return time.Duration(f) }

// Quantile returns the constant.
func (f Fixed) Quantile(float64) time.Duration { return time.Duration(f) }

// Mean returns the constant.
func (f Fixed) Mean() time.Duration { return time.Duration(f) }

func (f Fixed) String() string { return "fixed:" + fmtDur(time.Duration(f)) }

// Normal is a normal distribution clamped at zero: a draw below zero counts as
// zero. With Mean several StdDevs above zero the clamp never matters.
type Normal struct {
	Mu     time.Duration // the mean before clamping
	StdDev time.Duration
}

// Sample draws mean + stddev·z, clamped at zero.
func (n Normal) Sample(r *rand.Rand) time.Duration {
	return clampDur(float64(n.Mu) + float64(n.StdDev)*r.NormFloat64())
}

// Quantile returns the clamped normal's quantile.
func (n Normal) Quantile(q float64) time.Duration {
	return clampDur(float64(n.Mu) + float64(n.StdDev)*probit(q))
}

// Mean returns E[max(0, X)], the mean after clamping.
func (n Normal) Mean() time.Duration {
	if n.StdDev <= 0 {
		return max(n.Mu, 0)
	}
	mu, sd := float64(n.Mu), float64(n.StdDev)
	a := mu / sd
	phi := math.Exp(-a*a/2) / math.Sqrt(2*math.Pi)
	Phi := 0.5 * math.Erfc(-a/math.Sqrt2)
	return time.Duration(mu*Phi + sd*phi)
}

func (n Normal) String() string {
	return "normal:" + fmtDur(n.Mu) + ":" + fmtDur(n.StdDev)
}

// z99 is the standard normal's 99th percentile: a lognormal's p99 is
// median·exp(σ·z99).
var z99 = probit(0.99)

// LogNormal is a lognormal distribution given by its median and its 99th
// percentile — the two numbers a latency dashboard shows — rather than by the
// mean and deviation of its logarithm. Real request latencies are close to
// lognormal: bounded below, long right tail.
type LogNormal struct {
	Median time.Duration
	P99    time.Duration // >= Median
}

func (l LogNormal) sigma() float64 {
	if l.P99 <= l.Median || l.Median <= 0 {
		return 0
	}
	return math.Log(float64(l.P99)/float64(l.Median)) / z99
}

// Sample draws median·exp(σ·z).
func (l LogNormal) Sample(r *rand.Rand) time.Duration {
	return clampDur(float64(l.Median) * math.Exp(l.sigma()*r.NormFloat64()))
}

// Quantile returns median·exp(σ·probit(q)).
func (l LogNormal) Quantile(q float64) time.Duration {
	return clampDur(float64(l.Median) * math.Exp(l.sigma()*probit(q)))
}

// Mean returns median·exp(σ²/2).
func (l LogNormal) Mean() time.Duration {
	s := l.sigma()
	return clampDur(float64(l.Median) * math.Exp(s*s/2))
}

func (l LogNormal) String() string {
	return "lognormal:" + fmtDur(l.Median) + ":" + fmtDur(l.P99)
}

// probit is the standard normal quantile function. q is clamped to
// (1e-12, 1-1e-12) so q = 0 or 1 give a finite, very unlikely value.
func probit(q float64) float64 {
	q = min(max(q, 1e-12), 1-1e-12)
	return math.Sqrt2 * math.Erfinv(2*q-1)
}

func clampDur(ns float64) time.Duration {
	switch {
	case ns <= 0 || math.IsNaN(ns):
		return 0
	case ns >= math.MaxInt64:
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// fmtDur prints d the shortest way time.ParseDuration reads back, with "us"
// rather than "µs" so the output is plain ASCII.
func fmtDur(d time.Duration) string {
	return strings.ReplaceAll(d.String(), "µ", "u")
}

// ParseDist parses the compact form of a distribution, as written in fault
// overrides and accepted as a string in profile files:
//
//	25ms                  fixed 25 ms (so is "fixed:25ms")
//	normal:20ms:5ms       normal, mean 20 ms, stddev 5 ms, clamped at 0
//	lognormal:20ms:80ms   lognormal, median 20 ms, p99 80 ms
//	hdr:FILE              the recorded distribution in FILE (see ParseHDR),
//	                      a relative FILE resolved against dir
//
// Durations use Go syntax (500us, 1.5ms, 2s). Errors name the part that is
// wrong but not where it came from; callers add that.
func ParseDist(s, dir string) (Dist, error) {
	return parseDist(s, dir, nil)
}

func parseDist(s, dir string, read ReadFile) (Dist, error) {
	s = strings.TrimSpace(s)
	kind, rest, found := strings.Cut(s, ":")
	if !found {
		d, err := parseDuration(s)
		if err != nil {
			if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
				return nil, err // a number without a unit: say so
			}
			return nil, fmt.Errorf("%q is neither a duration nor dist:params (fixed:25ms, normal:20ms:5ms, lognormal:20ms:80ms, hdr:FILE)", s)
		}
		return Fixed(d), nil
	}
	switch kind {
	case "fixed":
		d, err := parseDuration(rest)
		if err != nil {
			return nil, fmt.Errorf("fixed: %w", err)
		}
		return Fixed(d), nil
	case "normal":
		a, b, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, fmt.Errorf("normal needs mean and stddev, e.g. normal:20ms:5ms")
		}
		return newNormal(a, b)
	case "lognormal":
		a, b, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, fmt.Errorf("lognormal needs median and p99, e.g. lognormal:20ms:80ms")
		}
		return newLogNormal(a, b)
	case "hdr":
		return loadHDR(read, resolve(dir, rest), UnitMicrosecond)
	default:
		return nil, fmt.Errorf("unknown dist %q (known: %s)", kind, strings.Join(distNames, ", "))
	}
}

var distNames = []string{"fixed", "normal", "lognormal", "hdr"}

func newNormal(mean, stddev string) (Dist, error) {
	m, err := parseDuration(mean)
	if err != nil {
		return nil, fmt.Errorf("normal mean: %w", err)
	}
	sd, err := parseDuration(stddev)
	if err != nil {
		return nil, fmt.Errorf("normal stddev: %w", err)
	}
	return Normal{Mu: m, StdDev: sd}, nil
}

func newLogNormal(median, p99 string) (Dist, error) {
	m, err := parseDuration(median)
	if err != nil {
		return nil, fmt.Errorf("lognormal median: %w", err)
	}
	p, err := parseDuration(p99)
	if err != nil {
		return nil, fmt.Errorf("lognormal p99: %w", err)
	}
	if m <= 0 {
		return nil, fmt.Errorf("lognormal median must be > 0, got %s", fmtDur(m))
	}
	if p < m {
		return nil, fmt.Errorf("lognormal p99 %s is below the median %s", fmtDur(p), fmtDur(m))
	}
	return LogNormal{Median: m, P99: p}, nil
}
