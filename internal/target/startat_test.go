package target_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/durabench/durabench/internal/driver"
	"github.com/durabench/durabench/protocol"
)

// startLog records each start its backend was asked for: its at, and the
// backend's clock when the start reached it.
type startLog struct {
	protocol.Backend
	mu     sync.Mutex
	starts []aheadStart
}

type aheadStart struct {
	run     string
	at, now time.Duration
}

func (s *startLog) Start(ctx context.Context, req protocol.StartRequest) error {
	now := s.Now()
	s.mu.Lock()
	s.starts = append(s.starts, aheadStart{req.Run, time.Duration(req.At), now})
	s.mu.Unlock()
	return s.Backend.Start(ctx, req)
}

func (s *startLog) taken() []aheadStart {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.starts)
}

// minor12 declares protocol 1.2 in a target's info: a target that does
// not hold starts.
var minor12 = declareMinor(2)

// runPaced runs reps runs of a 20-branch fan-out through url's session
// stream, paced by pacer, and returns the driver's result.
func runPaced(t *testing.T, url string, pacer driver.Pacer, reps int) *driver.Result {
	t.Helper()
	res, err := runCellPaced(t, url, "at", "fanout", map[string]string{"branches": "20"}, reps, "stream", false, pacer, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Timelines {
		if tl.Failed || len(tl.Steps) != 20 {
			t.Fatalf("run %s: failed %v (%s), %d steps of 20", tl.ID, tl.Failed, tl.Error, len(tl.Steps))
		}
	}
	return res
}

// TestStartsSentAhead: on a target that holds starts (protocol 1.3, the
// built-in server), the pacer sends a start ahead of its schedule for
// each run that starts with none in flight (closed pacing) or, with open
// pacing, whose schedule is far enough from the previous run's: the
// target starts it no earlier than its at, and the run's driver lag is
// then 0 (the start left ahead of its schedule). Runs closer together,
// and every run of a 1.2 target, are started at their schedule, as
// before (no at).
func TestStartsSentAhead(t *testing.T) {
	closed, err := driver.NewPacer("closed", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := driver.NewPacer("open", 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := driver.NewPacer("open", 0, 4000) // 250 µs apart
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		pacer driver.Pacer
		wrap  func(http.Handler) http.Handler
		// ahead: how many of the runs' starts carry an at.
		ahead func(n int) int
		// onTime: most runs have no driver lag (a closed pacer sends a
		// start as it schedules it, StartAhead before its schedule).
		onTime bool
	}{
		{"closed(1)", closed, nil, func(n int) int { return n }, true},
		{"open 50/s", slow, nil, func(n int) int { return n }, false},
		{"open 4000/s", fast, nil, func(int) int { return 1 }, false}, // the first run only
		{"closed(1) on a 1.2 target", closed, minor12, func(int) int { return 0 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &startLog{Backend: newRef(t)}
			wrap := tc.wrap
			if wrap == nil {
				wrap = func(h http.Handler) http.Handler { return h }
			}
			const reps = 12
			res := runPaced(t, serveHandler(t, b, wrap), tc.pacer, reps)
			starts := b.taken()
			if len(starts) != reps {
				t.Fatalf("%d starts reached the backend, want %d", len(starts), reps)
			}
			ahead, zeroLag := 0, 0
			for _, s := range starts {
				if s.at == 0 {
					continue
				}
				ahead++
				if s.now < s.at {
					t.Errorf("run %s started at %v on the target's clock, %v before its at %v: a start must be held until its at",
						s.run, s.now, s.at-s.now, s.at)
				}
			}
			for _, l := range res.Lag {
				if l == 0 {
					zeroLag++
				}
			}
			if want := tc.ahead(reps); ahead != want {
				t.Errorf("%d of %d starts carried an at, want %d", ahead, reps, want)
			}
			// A start sent ahead has no driver lag unless it left after
			// its schedule (a pacer that fell behind).
			if tc.onTime && zeroLag < reps/2 {
				t.Errorf("driver lags %v: want most 0, each start sent ahead of its schedule", res.Lag)
			}
		})
	}
}
