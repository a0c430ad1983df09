package check

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/durabench/durabench/internal/target"
	"github.com/durabench/durabench/protocol"
)

// checkStartAt is the target check of starts held until their at (1.3).
const checkStartAt = "starts held until at"

// startAtAhead is how far ahead of the target's clock the check's start is
// to be held: long enough to tell a held start from one started at once on
// any machine, short enough to keep the check quick.
const startAtAhead = 150 * time.Millisecond

// startAtLate bounds how long after its at a held start may start.
const startAtLate = time.Second

// checkStartsAt checks a 1.3 target's holding of a start until its at: a
// start startAtAhead ahead (on the target's clock, from the check's
// offset) is accepted, and its run's first event comes no earlier than its
// at and within startAtLate of it; a start whose at is further ahead than
// protocol.MaxStartAhead is refused (400). n/a for a target below 1.3.
func (k *checker) checkStartsAt(ctx context.Context, f *findings) {
	if k.info.Minor < protocol.MinorStartAt {
		f.na[checkStartAt] = fmt.Sprintf("a protocol %s target (a start held until its at is 1.3)", k.info.ProtocolString())
		return
	}
	sc, ok := k.startScenario()
	if !ok {
		f.na[checkStartAt] = "the target declares no scenario"
		return
	}
	run := fmt.Sprintf("check-%d-at", k.epoch.UnixNano()%1e6)
	targetNow := func() time.Duration { return k.now() + k.clk.Offset }
	at := targetNow() + startAtAhead
	if _, err := k.c.Start(ctx, protocol.StartRequest{Run: run, Scenario: sc, Options: OptionsFor[sc], At: int64(at)}); err != nil {
		f.failf(checkStartAt, "start %s held %s ahead: %s", run, startAtAhead, k.explain(ctx, err))
		return
	}
	defer func() { _ = k.c.Release(ctx, run) }()
	if why := k.awaitCompleted(ctx, run); why != "" {
		f.failf(checkStartAt, "%s, held %s ahead: %s", run, startAtAhead, why)
		return
	}
	tl, err := k.c.Timeline(ctx, run, 0, 0)
	if err != nil || len(tl.Events) == 0 {
		f.failf(checkStartAt, "%s's timeline once completed: %v, %d events", run, errOrOK(err), len(tl.Events))
		return
	}
	first := slices.MinFunc(tl.Events, func(a, b protocol.Event) int { return cmp.Compare(a.At, b.At) })
	switch d := time.Duration(first.At) - at; {
	case d < 0:
		f.failf(checkStartAt, "%s, to start at %d on the target's clock, has its first event (%s) %s before that: "+
			"hold a start whose at is ahead until then (protocol 1.3), or declare \"minor\": 2", run, int64(at), first.Kind, -d)
	case d > startAtLate:
		f.failf(checkStartAt, "%s, to start at %d on the target's clock, has its first event (%s) %s after that (at most %s)",
			run, int64(at), first.Kind, d, startAtLate)
	default:
		far := protocol.StartRequest{Run: run + "-far", Scenario: sc, Options: OptionsFor[sc], At: int64(targetNow() + 2*protocol.MaxStartAhead)}
		if _, err := k.c.Start(ctx, far); target.StatusOf(err) != http.StatusBadRequest {
			if err == nil {
				_ = k.awaitCompleted(ctx, far.Run)
				_ = k.c.Release(ctx, far.Run)
			}
			f.failf(checkStartAt, "a start whose at is %s ahead of the target's clock: %v, want 400 (at most %s ahead, protocol 1.3)",
				2*protocol.MaxStartAhead, errOrOK(err), protocol.MaxStartAhead)
			return
		}
		f.passed(checkStartAt)
	}
}
