package sweep

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/durabench/durabench/scenarios"
	"github.com/durabench/durabench/world/registry"
)

// A plan must fit in memory. A cell keeps every run's log, queue and
// timeline until it ends, so its memory grows with its runs (reps + warmup)
// × the size of each run (the scenario's Size options: branches, steps,
// chunks) × what one step costs on the cell's world (registry.Kind.StepBytes,
// measured as peak heap, the garbage collector's headroom included).
// Validate refuses a cell that would need more than the memory limit —
// MaxMemory, by default 3/4 of the memory available when the sweep is
// planned (the smallest of MemAvailable in /proc/meminfo, the cgroup's
// limit and GOMEMLIMIT; the rest is for the runtime, stacks and other
// processes) — before anything runs: one line naming the setting and the
// largest value that fits, never a Go out-of-memory crash mid-sweep.

func init() {
	fields = append(fields, field{"max-memory", false,
		"memory a cell may use, e.g. 8GiB (cells that would need more are refused before the sweep starts; default: 3/4 of the memory available)",
		func(p *Plan, v []string) (err error) {
			p.MaxMemory, err = parseBytes(v[0])
			return err
		}})
}

// memoryLimit is the memory a cell of the plan may use, and how the limit
// was set (for the error message).
func (p *Plan) memoryLimit() (int64, string) {
	if p.MaxMemory > 0 {
		return p.MaxMemory, "--max-memory"
	}
	return availableMemory() / 4 * 3, "3/4 of the memory available; --max-memory sets it"
}

// availableMemory is the memory this process can count on: the smallest of
// the kernel's MemAvailable, the cgroup's limit and the Go memory limit
// (GOMEMLIMIT). Where none is known, 4 GiB.
func availableMemory() int64 {
	avail := int64(math.MaxInt64)
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
				if kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64); err == nil {
					avail = kb << 10
				}
			}
		}
		f.Close()
	}
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(path); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 {
				avail = min(avail, n) // "max" (no limit) does not parse
			}
		}
	}
	avail = min(avail, debug.SetMemoryLimit(-1)) // MaxInt64 unless set
	if avail == math.MaxInt64 {
		return 4 << 30
	}
	return avail
}

// checkSize refuses a cell of scenario s (plan entry sp) with option values
// vals (defaults filled in) on world kind whose runs would not fit in
// limit. The error names the setting to lower — the run's size when one
// run alone is too big, else reps — and the largest value that fits.
func (p *Plan) checkSize(s *scenarios.Scenario, sp ScenarioPlan, vals scenarios.Values, kind *registry.Kind, limit int64, how string) error {
	var size *scenarios.OptionSpec // the largest Size option, to name
	units, n := 1.0, 1
	data := 0 // bytes a step or chunk carries besides its own (payloads, chunk sizes)
	for i, o := range s.Options {
		if o.Type == scenarios.Bytes || o.Type == scenarios.BytesList {
			if _, err := o.Parse(vals[o.Name]); err != nil {
				return &UsageError{Field: "scenario " + s.Name, Err: err}
			}
			// Stored twice: a step's input and output, a chunk in a
			// pipeline's two streams.
			for _, b := range vals.BytesList(o.Name) {
				data = max(data, 2*b)
			}
			continue
		}
		if !o.Size {
			continue
		}
		v, err := o.Parse(vals[o.Name])
		if err != nil {
			return &UsageError{Field: "scenario " + s.Name, Err: err}
		}
		x, _ := strconv.Atoi(v)
		units *= float64(x)
		if size == nil || x > n {
			size, n = &s.Options[i], x
		}
	}
	runs := p.Reps + p.Warmup
	per := float64(kind.BytesPerStep() + int64(data))
	need := units * float64(runs) * per
	if need <= float64(limit) {
		return nil
	}
	fitReps := int64(float64(limit)/(units*per)) - int64(p.Warmup)
	what := fmt.Sprintf("%d runs on %s need about %s at %s each, over the limit of %s (%s)",
		runs, kind.Name, formatBytes(need), formatBytes(per), formatBytes(float64(limit)), how)
	if size != nil {
		what = fmt.Sprintf("%d runs × %d %s on %s need about %s at %s each, over the limit of %s (%s)",
			runs, n, size.Name, kind.Name, formatBytes(need), formatBytes(per), formatBytes(float64(limit)), how)
		if fitReps < 1 || runs == 1 {
			others := units / float64(n) // the other Size options' product
			e := p.sizeOrigin(sp, size.Name)
			e.Msg = fmt.Sprintf("too big for memory: %s; at most %d %s fit",
				what, int64(float64(limit)/(float64(runs)*per*others)), size.Name)
			return e
		}
	}
	e := p.errAt("reps", nil).(*UsageError)
	e.Msg = fmt.Sprintf("too big for memory: %s; at most %d reps fit", what, max(fitReps, 0))
	if p.Warmup > 0 {
		e.Msg += fmt.Sprintf(" (with %d warm-ups)", p.Warmup)
	}
	return e
}

// sizeOrigin locates the user's setting of option name of scenario sp: the
// scenario's own option, the plan's option, --branches, or the option alone
// when it holds its default.
func (p *Plan) sizeOrigin(sp ScenarioPlan, name string) *UsageError {
	for _, key := range []string{"option " + sp.Name + "." + name, "option " + name} {
		if at, ok := p.origins[key]; ok {
			return &at
		}
	}
	if name == "branches" {
		if at, ok := p.origins["branches"]; ok {
			return &at
		}
	}
	return &UsageError{Field: "option " + name}
}

// parseBytes reads a size such as 8GiB, 512MiB, 2G or 1073741824.
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRightFunc(t, func(r rune) bool { return r < '0' || r > '9' && r != '.' })
	unit := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(t, num), "B"))
	mult := map[string]float64{"": 1, "K": 1 << 10, "Ki": 1 << 10, "M": 1 << 20, "Mi": 1 << 20,
		"G": 1 << 30, "Gi": 1 << 30, "T": 1 << 40, "Ti": 1 << 40}[unit]
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || !(v*mult >= 1) || v*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is not a memory size such as 8GiB or 512MiB", s)
	}
	return int64(v * mult), nil
}

// formatBytes writes n bytes in binary units ("11.5 GiB").
func formatBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 || n == math.Trunc(n) {
		return fmt.Sprintf("%.0f %s", n, units[i])
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}
