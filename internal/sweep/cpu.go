package sweep

import (
	"time"

	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/results"
)

// cpuMeter measures what a cell cost the machine's processors while its
// driver ran (warm-up included): durabench's own process — its driver,
// and the engine when that runs in process — and, for a target durabench
// started, the adapter's process. On a machine the two share, a driver
// lag warning is read against it: a target that keeps the cores busy
// delays the driver's wake-ups (docs/performance.md, Driver capacity), and
// so does a virtual machine's host that takes its vCPUs (steal).
type cpuMeter struct {
	wall    time.Time
	self    time.Duration
	selfOK  bool
	adapter func() (time.Duration, bool)
	t0      time.Duration
	tOK     bool
	// steal is the machine's steal time so far (target.Steal).
	steal   time.Duration
	stealOK bool
}

// startCPU starts measuring; adapter reads the target process's CPU time
// so far (nil: durabench started none).
func startCPU(adapter func() (time.Duration, bool)) *cpuMeter {
	m := &cpuMeter{wall: time.Now(), adapter: adapter}
	m.self, m.selfOK = target.SelfCPU()
	m.steal, m.stealOK = target.Steal()
	if adapter != nil {
		m.t0, m.tOK = adapter()
	}
	return m
}

// stop returns the cores each process kept busy on average since start
// (CPU time / wall time), nil when not even durabench's own can be read.
func (m *cpuMeter) stop() *results.CellCPU {
	wall := time.Since(m.wall)
	self, ok := target.SelfCPU()
	if !m.selfOK || !ok || wall <= 0 {
		return nil
	}
	c := &results.CellCPU{DurabenchCores: cores(self-m.self, wall)}
	if m.tOK {
		if t, ok := m.adapter(); ok {
			v := cores(t-m.t0, wall)
			c.TargetCores = &v
		}
	}
	if steal, ok := target.Steal(); ok && m.stealOK {
		s := cores(steal-m.steal, wall)
		c.StealCores = &s
	}
	return c
}

// cores is cpu over wall, to two decimals.
func cores(cpu, wall time.Duration) float64 {
	return float64(int64(100*cpu.Seconds()/wall.Seconds()+0.5)) / 100
}
