package worldtest

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/durabench/durabench/world"
)

var logTests = []subtest{
	{name: "Order", fn: testOrder},
	{name: "LoadCopies", fn: testLoadCopies},
	{name: "CreateRun", fn: testCreateRun},
	{name: "UnknownRun", fn: testUnknownRun},
	{name: "IdempotentAppend", fn: testIdempotentAppend},
	{name: "TerminalRun", fn: testTerminalRun},
	{name: "EntityRules", fn: testEntityRules},
	{name: "Pending", fn: testPending},
	{name: "RunStatus", fn: testRunStatus},
	{name: "ConcurrentAppends", fn: testConcurrentAppends},
	{name: "DuplicateIsReadable", fn: testDuplicateIsReadable},
}

// testDuplicateIsReadable: an append answered Duplicate names an event that
// is in the log: a Load right after it finds the event, even while the
// first append of that ID is still in flight. (A lazily resumed hook's
// activation re-ensures hook_received while the resume's own write of it is
// in flight; reading it back missing, it left the run waiting for good.)
func testDuplicateIsReadable(c *env) {
	const rounds = 200
	c.createRun("r")
	c.append("r", world.Event{Kind: world.RunStarted})
	for i := range rounds {
		ev := world.Event{Kind: world.StepCreated, ID: fmt.Sprintf("create-%d", i), Entity: fmt.Sprintf("s%d", i)}
		g := c.RT.NewGroup()
		for range 2 {
			g.Go(func() error {
				res, err := c.W.Append(c.Ctx, "r", ev, world.Precondition{})
				if err != nil {
					return fmt.Errorf("append %s: %w", ev.ID, err)
				}
				evs, err := c.W.Load(c.Ctx, "r")
				if err != nil {
					return err
				}
				if int64(len(evs)) < res.Pos || evs[res.Pos-1].ID != ev.ID {
					return fmt.Errorf("append %s answered %+v, but a load right after has %d events without it", ev.ID, res, len(evs))
				}
				return nil
			})
		}
		c.NoErr(g.Wait(), "concurrent appends of one event")
	}
}

// testOrder: positions are 1..n in append order and Load returns the log in
// that order with every field the writer set.
func testOrder(c *env) {
	c.createRun("r")
	want := []world.Event{{Pos: 1, Kind: world.RunCreated}}
	c.append("r", world.Event{Kind: world.RunStarted, ID: "start"})
	want = append(want, world.Event{Pos: 2, Kind: world.RunStarted, ID: "start"})
	for i := range 8 {
		ev := world.Event{Kind: world.StepCreated, ID: fmt.Sprintf("c%d", i), Entity: fmt.Sprintf("s%d", i), Data: []byte{byte(i)}}
		res := c.append("r", ev)
		ev.Pos = int64(len(want) + 1)
		if res.Pos != ev.Pos || res.Duplicate {
			c.Fatalf("append %d: got %+v, want Pos %d", i, res, ev.Pos)
		}
		want = append(want, ev)
	}
	got := c.load("r")
	if len(got) != len(want) {
		c.Fatalf("Load: %d events, want %d", len(got), len(want))
	}
	if got[0].Kind != world.RunCreated || got[0].Pos != 1 {
		c.Fatalf("Load[0] = %+v, want run_created at 1", got[0])
	}
	for i := 1; i < len(want); i++ {
		g, w := got[i], want[i]
		if g.Pos != w.Pos || g.Kind != w.Kind || g.ID != w.ID || g.Entity != w.Entity || !bytes.Equal(g.Data, w.Data) {
			c.Fatalf("Load[%d] = %+v, want %+v", i, g, w)
		}
	}
}

// testLoadCopies: the appender's buffer does not alias the stored log, and
// a Load's result is a stable snapshot: later appends (in order or, on a
// mint-ordered log, behind it) never change what an earlier Load returned.
// Load's result is read-only (world.Log), so a world may share it.
func testLoadCopies(c *env) {
	c.createRun("r")
	buf := []byte("payload")
	c.append("r", world.Event{Kind: world.RunStarted, Data: buf})
	buf[0] = 'X'
	first := c.load("r")
	if string(first[1].Data) != "payload" {
		c.Fatalf("stored data changed with the appender's buffer: %q", first[1].Data)
	}
	_ = append(first, world.Event{Kind: world.RunCompleted}) // appending to the snapshot must not reach the log
	second := c.load("r")
	if len(second) != 2 || second[0].Kind != world.RunCreated || second[1].Kind != world.RunStarted {
		c.Fatalf("Load after appending to an earlier Load's result = %+v", second)
	}
	for i := range 4 {
		c.append("r", world.Event{Kind: world.StepCreated, Entity: fmt.Sprintf("s%d", i)})
	}
	if len(first) != 2 || first[0].Kind != world.RunCreated || first[1].Kind != world.RunStarted || first[1].Entity != "" {
		c.Fatalf("an earlier Load's result changed after appends: %+v", first)
	}
}

// testCreateRun: CreateRun stores the run with run_created at position 1;
// a second CreateRun with the same ID fails with ErrConflict; ListRuns is in
// creation order.
func testCreateRun(c *env) {
	in := world.Run{ID: "a", Deployment: "dep-1", SpecVersion: 3, Input: []byte("prog")}
	c.NoErr(c.W.CreateRun(c.Ctx, in), "CreateRun a")
	got, err := c.W.GetRun(c.Ctx, "a")
	c.NoErr(err, "GetRun a")
	if got.ID != "a" || got.Deployment != "dep-1" || got.SpecVersion != 3 || string(got.Input) != "prog" || got.Status != world.StatusPending {
		c.Fatalf("GetRun = %+v", got)
	}
	evs := c.load("a")
	if len(evs) != 1 || evs[0].Kind != world.RunCreated || evs[0].Pos != 1 {
		c.Fatalf("log of a new run = %+v, want [run_created@1]", evs)
	}
	c.IsErr(c.W.CreateRun(c.Ctx, world.Run{ID: "a"}), world.ErrConflict, "second CreateRun a")
	if evs := c.load("a"); len(evs) != 1 {
		c.Fatalf("second CreateRun changed the log: %+v", evs)
	}
	c.createRun("c")
	c.createRun("b")
	ids, err := c.W.ListRuns(c.Ctx)
	c.NoErr(err, "ListRuns")
	if !slices.Equal(ids, []string{"a", "c", "b"}) {
		c.Fatalf("ListRuns = %v, want [a c b]", ids)
	}
}

// testUnknownRun: every per-run call on an unknown run is ErrNotFound.
func testUnknownRun(c *env) {
	_, err := c.W.Append(c.Ctx, "nope", world.Event{Kind: world.RunStarted, ID: "x"}, world.Precondition{})
	c.IsErr(err, world.ErrNotFound, "Append to unknown run")
	_, err = c.W.Load(c.Ctx, "nope")
	c.IsErr(err, world.ErrNotFound, "Load unknown run")
	_, err = c.W.GetRun(c.Ctx, "nope")
	c.IsErr(err, world.ErrNotFound, "GetRun unknown run")
}

// testIdempotentAppend: a second append with the same ID adds nothing and
// reports the first position with Duplicate set.
func testIdempotentAppend(c *env) {
	c.createRun("r")
	first := c.append("r", world.Event{Kind: world.StepCreated, ID: "create-s", Entity: "s"})
	c.append("r", world.Event{Kind: world.RunStarted})
	again := c.append("r", world.Event{Kind: world.StepCreated, ID: "create-s", Entity: "s"})
	if !again.Duplicate || again.Pos != first.Pos || first.Duplicate {
		c.Fatalf("first %+v, again %+v: want the same Pos with Duplicate on the second", first, again)
	}
	// Without the ID the same event is a second step_created: a conflict.
	c.appendErr("r", world.Event{Kind: world.StepCreated, Entity: "s"}, world.ErrConflict)
	if evs := c.load("r"); len(evs) != 3 {
		c.Fatalf("log has %d events, want 3: %+v", len(evs), evs)
	}
}

// testTerminalRun: after run_completed nothing may be appended (ErrGone),
// but a retried append of the terminal event itself is a duplicate.
func testTerminalRun(c *env) {
	for _, kind := range []world.EventKind{world.RunCompleted, world.RunFailed} {
		run := "r-" + kind.String()
		c.createRun(run)
		c.append(run, world.Event{Kind: world.RunStarted})
		c.append(run, world.Event{Kind: world.StepCreated, Entity: "s"})
		end := c.append(run, world.Event{Kind: kind, ID: "end"})
		c.appendErr(run, world.Event{Kind: world.StepCreated, Entity: "t"}, world.ErrGone)
		c.appendErr(run, world.Event{Kind: world.StepCompleted, Entity: "s"}, world.ErrGone)
		c.appendErr(run, world.Event{Kind: world.RunStarted, ID: "again"}, world.ErrGone)
		c.appendErr(run, world.Event{Kind: world.RunCompleted}, world.ErrGone)
		dup := c.append(run, world.Event{Kind: kind, ID: "end"})
		if !dup.Duplicate || dup.Pos != end.Pos {
			c.Fatalf("%s: retried terminal append = %+v, want Duplicate at %d", run, dup, end.Pos)
		}
		if evs := c.load(run); len(evs) != 4 {
			c.Fatalf("%s: log has %d events after the terminal one, want 4", run, len(evs))
		}
	}
}

// testEntityRules: step events need a step_created and no terminal event.
func testEntityRules(c *env) {
	c.createRun("r")
	c.append("r", world.Event{Kind: world.RunStarted})
	for _, k := range []world.EventKind{world.StepStarted, world.StepCompleted, world.StepFailed, world.StepRetrying} {
		c.appendErr("r", world.Event{Kind: k, Entity: "ghost"}, world.ErrNotFound)
	}
	c.append("r", world.Event{Kind: world.StepCreated, Entity: "s"})
	c.appendErr("r", world.Event{Kind: world.StepCreated, Entity: "s"}, world.ErrConflict)
	c.append("r", world.Event{Kind: world.StepStarted, Entity: "s"})
	c.append("r", world.Event{Kind: world.StepRetrying, Entity: "s"})
	c.append("r", world.Event{Kind: world.StepStarted, Entity: "s"})
	c.append("r", world.Event{Kind: world.StepCompleted, Entity: "s"})
	for _, k := range []world.EventKind{world.StepStarted, world.StepCompleted, world.StepFailed, world.StepRetrying} {
		c.appendErr("r", world.Event{Kind: k, Entity: "s"}, world.ErrConflict)
	}
	c.appendErr("r", world.Event{Kind: world.StepCreated, Entity: "s"}, world.ErrConflict)
	c.append("r", world.Event{Kind: world.StepCreated, Entity: "f"})
	c.append("r", world.Event{Kind: world.StepFailed, Entity: "f"})
	c.appendErr("r", world.Event{Kind: world.StepCompleted, Entity: "f"}, world.ErrConflict)
	// A step of another run is not this run's step.
	c.createRun("other")
	c.appendErr("other", world.Event{Kind: world.StepStarted, Entity: "s"}, world.ErrNotFound)
	if evs := c.load("r"); len(evs) != 9 {
		c.Fatalf("log has %d events, want 9 (rejected appends must add nothing)", len(evs))
	}
}

// testPending: AppendResult.Pending counts created, unfinished steps.
func testPending(c *env) {
	c.createRun("r")
	steps := []struct {
		ev      world.Event
		pending int
	}{
		{world.Event{Kind: world.RunStarted}, 0},
		{world.Event{Kind: world.StepCreated, Entity: "a", ID: "ca"}, 1},
		{world.Event{Kind: world.StepCreated, Entity: "b"}, 2},
		{world.Event{Kind: world.StepCreated, Entity: "c"}, 3},
		{world.Event{Kind: world.StepStarted, Entity: "a"}, 3},
		{world.Event{Kind: world.StepCompleted, Entity: "a"}, 2},
		{world.Event{Kind: world.StepRetrying, Entity: "b"}, 2},
		{world.Event{Kind: world.StepFailed, Entity: "b"}, 1},
		{world.Event{Kind: world.StepCreated, Entity: "a", ID: "ca"}, 1}, // duplicate: current count
		{world.Event{Kind: world.StepCompleted, Entity: "c"}, 0},
		{world.Event{Kind: world.StepCreated, Entity: "d"}, 1},
	}
	for i, s := range steps {
		res := c.append("r", s.ev)
		if res.Pending != s.pending {
			c.Fatalf("step %d (%s %s): Pending = %d, want %d", i, s.ev.Kind, s.ev.Entity, res.Pending, s.pending)
		}
	}
}

// testRunStatus: the status is derived from the log.
func testRunStatus(c *env) {
	status := func(id string) world.RunStatus {
		r, err := c.W.GetRun(c.Ctx, id)
		c.NoErr(err, "GetRun "+id)
		return r.Status
	}
	c.createRun("ok")
	c.createRun("bad")
	for _, id := range []string{"ok", "bad"} {
		if s := status(id); s != world.StatusPending {
			c.Fatalf("%s: status %s after CreateRun, want pending", id, s)
		}
		c.append(id, world.Event{Kind: world.RunStarted})
		if s := status(id); s != world.StatusRunning {
			c.Fatalf("%s: status %s after run_started, want running", id, s)
		}
		c.append(id, world.Event{Kind: world.StepCreated, Entity: "s"})
		if s := status(id); s != world.StatusRunning {
			c.Fatalf("%s: status %s after step_created, want running", id, s)
		}
	}
	c.append("ok", world.Event{Kind: world.RunCompleted})
	c.append("bad", world.Event{Kind: world.RunFailed})
	if s := status("ok"); s != world.StatusCompleted || !s.Terminal() {
		c.Fatalf("ok: status %s, want completed", s)
	}
	if s := status("bad"); s != world.StatusFailed || !s.Terminal() {
		c.Fatalf("bad: status %s, want failed", s)
	}
}

// testConcurrentAppends: 32 tasks append to one run at once; positions are
// unique and dense, and Pending reaches 0 exactly once.
func testConcurrentAppends(c *env) {
	const n = 32
	c.createRun("r")
	c.append("r", world.Event{Kind: world.RunStarted})
	var mu sync.Mutex
	var positions []int64
	var zeros int
	record := func(res world.AppendResult) {
		mu.Lock()
		defer mu.Unlock()
		positions = append(positions, res.Pos)
		if res.Pending == 0 {
			zeros++
		}
	}
	phase := func(kinds ...world.EventKind) {
		g := c.RT.NewGroup()
		for i := range n {
			g.Go(func() error {
				for _, k := range kinds {
					ev := world.Event{Kind: k, ID: fmt.Sprintf("%s-%d", k, i), Entity: fmt.Sprintf("s%d", i)}
					res, err := c.W.Append(c.Ctx, "r", ev, world.Precondition{})
					if err != nil {
						return fmt.Errorf("append %s s%d: %w", k, i, err)
					}
					record(res)
				}
				return nil
			})
		}
		c.NoErr(g.Wait(), "concurrent appends")
	}
	// Create every step first, so Pending can reach 0 only on the last
	// completion.
	phase(world.StepCreated)
	mu.Lock()
	zeros = 0
	mu.Unlock()
	phase(world.StepStarted, world.StepCompleted)

	slices.Sort(positions)
	for i, p := range positions {
		if want := int64(i + 3); p != want {
			c.Fatalf("positions not unique and dense: sorted[%d] = %d, want %d (all: %v)", i, p, want, positions)
		}
	}
	if zeros != 1 {
		c.Fatalf("Pending reached 0 in %d appends, want exactly 1", zeros)
	}
	evs := c.load("r")
	if len(evs) != 2+3*n {
		c.Fatalf("log has %d events, want %d", len(evs), 2+3*n)
	}
	for i, ev := range evs {
		if ev.Pos != int64(i+1) {
			c.Fatalf("Load[%d].Pos = %d", i, ev.Pos)
		}
	}
}
