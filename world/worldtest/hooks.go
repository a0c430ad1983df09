package worldtest

import "github.com/durabench/durabench/world"

var hookTests = []subtest{
	{name: "CreateResume", fn: testHooks},
}

// testHooks: hook_created indexes a token to its run, unique across runs;
// hook_received needs a known token and is deduplicated by its ID.
func testHooks(c *env) {
	c.createRun("a")
	c.createRun("b")
	c.append("a", world.Event{Kind: world.RunStarted})
	c.append("b", world.Event{Kind: world.RunStarted})
	_, err := c.W.HookRun(c.Ctx, "tok")
	c.IsErr(err, world.ErrNotFound, "HookRun before hook_created")
	c.append("a", world.Event{Kind: world.HookCreated, Entity: "tok", ID: "hook-tok"})
	run, err := c.W.HookRun(c.Ctx, "tok")
	c.NoErr(err, "HookRun tok")
	if run != "a" {
		c.Fatalf("HookRun(tok) = %q, want a", run)
	}
	c.appendErr("b", world.Event{Kind: world.HookCreated, Entity: "tok"}, world.ErrConflict)
	c.appendErr("a", world.Event{Kind: world.HookCreated, Entity: "tok"}, world.ErrConflict)
	if dup := c.append("a", world.Event{Kind: world.HookCreated, Entity: "tok", ID: "hook-tok"}); !dup.Duplicate {
		c.Fatalf("retried hook_created with its ID = %+v, want Duplicate", dup)
	}
	c.appendErr("a", world.Event{Kind: world.HookReceived, Entity: "nope", ID: "r0"}, world.ErrNotFound)
	first := c.append("a", world.Event{Kind: world.HookReceived, Entity: "tok", ID: "resume-1", Data: []byte("p")})
	again := c.append("a", world.Event{Kind: world.HookReceived, Entity: "tok", ID: "resume-1", Data: []byte("p")})
	if first.Duplicate || !again.Duplicate || again.Pos != first.Pos {
		c.Fatalf("resume: first %+v, again %+v: want one event, the retry a duplicate", first, again)
	}
	second := c.append("a", world.Event{Kind: world.HookReceived, Entity: "tok", ID: "resume-2"})
	if second.Duplicate || second.Pos != first.Pos+1 {
		c.Fatalf("second resume = %+v, want a new event at %d", second, first.Pos+1)
	}
	if evs := c.load("b"); len(evs) != 2 {
		c.Fatalf("run b has %d events, want 2 (the conflicting hook_created must add nothing)", len(evs))
	}
}
