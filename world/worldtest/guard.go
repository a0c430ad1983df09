package worldtest

import "github.com/durabench/durabench/world"

var guardTests = []subtest{
	{name: "Enforced", opts: world.Options{Guard: true}, fn: testGuardEnforced},
	{name: "NotEnforced", opts: world.Options{Guard: false}, fn: testGuardNotEnforced},
}

func guarded(last int64) world.Precondition { return world.Precondition{Guarded: true, LastPos: last} }

// testGuardEnforced: a guarded append whose LastPos is not the log's last
// position fails with ErrPrecondition; unguarded appends and duplicates pass.
func testGuardEnforced(c *env) {
	if !c.W.Capabilities().Guard {
		c.Fatalf("Capabilities().Guard = false with Options.Guard = true")
	}
	c.createRun("r")
	res, err := c.W.Append(c.Ctx, "r", world.Event{Kind: world.RunStarted, ID: "start"}, guarded(1))
	c.NoErr(err, "guarded append with fresh LastPos 1")
	if res.Pos != 2 {
		c.Fatalf("Pos = %d, want 2", res.Pos)
	}
	_, err = c.W.Append(c.Ctx, "r", world.Event{Kind: world.StepCreated, Entity: "s"}, guarded(1))
	c.IsErr(err, world.ErrPrecondition, "guarded append with stale LastPos 1")
	_, err = c.W.Append(c.Ctx, "r", world.Event{Kind: world.StepCreated, Entity: "s"}, guarded(7))
	c.IsErr(err, world.ErrPrecondition, "guarded append with LastPos ahead of the log")
	// A retried append is answered as a duplicate before the guard is checked.
	res, err = c.W.Append(c.Ctx, "r", world.Event{Kind: world.RunStarted, ID: "start"}, guarded(1))
	c.NoErr(err, "guarded duplicate with stale LastPos")
	if !res.Duplicate || res.Pos != 2 {
		c.Fatalf("guarded duplicate = %+v, want Duplicate at 2", res)
	}
	res, err = c.W.Append(c.Ctx, "r", world.Event{Kind: world.StepCreated, Entity: "s"}, world.Precondition{LastPos: 1})
	c.NoErr(err, "unguarded append with stale LastPos")
	res, err = c.W.Append(c.Ctx, "r", world.Event{Kind: world.StepStarted, Entity: "s"}, guarded(res.Pos))
	c.NoErr(err, "guarded append with fresh LastPos")
	if res.Pos != 4 {
		c.Fatalf("Pos = %d, want 4", res.Pos)
	}
	if evs := c.load("r"); len(evs) != 4 {
		c.Fatalf("log has %d events, want 4", len(evs))
	}
}

// testGuardNotEnforced: a world created without Guard ignores LastPos.
func testGuardNotEnforced(c *env) {
	if c.W.Capabilities().Guard {
		c.Fatalf("Capabilities().Guard = true with Options.Guard = false")
	}
	c.createRun("r")
	for i, k := range []world.EventKind{world.RunStarted, world.StepCreated, world.StepStarted} {
		res, err := c.W.Append(c.Ctx, "r", world.Event{Kind: k, Entity: "s"}, guarded(1))
		c.NoErr(err, "guarded append with stale LastPos on an unguarded world")
		if want := int64(i + 2); res.Pos != want {
			c.Fatalf("Pos = %d, want %d", res.Pos, want)
		}
	}
}
