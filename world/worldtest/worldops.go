package worldtest

import (
	"context"
	"time"

	"github.com/durabench/durabench/world"
)

var worldTests = []subtest{
	{name: "CapabilitiesDefault", opts: world.Options{}, fn: testCapabilities(world.Options{}.WithDefaults())},
	{name: "CapabilitiesSet", opts: world.Options{Guard: true, RetryStyle: world.Fresh, VisibilityTimeout: 2 * time.Second},
		fn: testCapabilities(world.Options{Guard: true, RetryStyle: world.Fresh, VisibilityTimeout: 2 * time.Second})},
	{name: "Close", opts: queueOptions(world.Redeliver), fn: testClose},
}

// testCapabilities: the declared capabilities reflect the options.
func testCapabilities(want world.Options) func(c *env) {
	return func(c *env) {
		caps := c.W.Capabilities()
		if caps.Guard != want.Guard || caps.RetryStyle != want.RetryStyle || caps.VisibilityTimeout != want.VisibilityTimeout {
			c.Fatalf("Capabilities = %+v, want Guard %v, RetryStyle %q, VisibilityTimeout %v",
				caps, want.Guard, want.RetryStyle, want.VisibilityTimeout)
		}
		if c.W.Name() == "" {
			c.Fatalf("Name is empty")
		}
	}
}

// testClose: Close stops consumers; later calls fail with ErrClosed; a
// second Close is not an error.
func testClose(c *env) {
	c.createRun("r")
	rec := &recorder{}
	_ = c.consume(1, func(ctx context.Context, d world.Delivery) error {
		rec.add(d, c.RT.Now())
		return nil
	})
	c.publish(world.Message{ID: "a"}, 0)
	c.waitCount(rec, 1, "before Close")
	c.NoErr(c.W.Close(), "Close")
	_, err := c.W.Append(c.Ctx, "r", world.Event{Kind: world.RunStarted}, world.Precondition{})
	c.IsErr(err, world.ErrClosed, "Append after Close")
	_, err = c.W.Load(c.Ctx, "r")
	c.IsErr(err, world.ErrClosed, "Load after Close")
	_, err = c.W.Publish(c.Ctx, world.Message{ID: "b"}, world.PublishOptions{})
	c.IsErr(err, world.ErrClosed, "Publish after Close")
	_, err = c.W.Consume(c.Ctx, world.ConsumeOptions{Concurrency: 1}, func(context.Context, world.Delivery) error { return nil })
	c.IsErr(err, world.ErrClosed, "Consume after Close")
	c.NoErr(c.W.Close(), "second Close")
}
