package world

import (
	"context"
	"time"
)

// A world that limits how many calls run at once (a latency profile's
// capacity, world/profile) knows, for each call, how long it waited for a
// permit apart from the time the backend then took to serve it. A caller
// that wants that split passes a *CallWait in the call's context; the
// world adds the call's wait to it. Worlds that limit capacity say so with
// Capabilities.CapacityWaits, so a caller that does not see it never pays
// for the context.

// CallWait receives the time one world call waited for backend capacity.
type CallWait struct {
	// D is the wait: from the call to the permit.
	D time.Duration
}

type callWaitKey struct{}

type deliveryWaitKey struct{}

// WithCallWait returns ctx carrying w: a world call made with the result
// adds its wait for capacity to w.
func WithCallWait(ctx context.Context, w *CallWait) context.Context {
	return context.WithValue(ctx, callWaitKey{}, w)
}

// AddCallWait adds d to the CallWait ctx carries, if any (a world that
// limits capacity calls it once it holds a permit).
func AddCallWait(ctx context.Context, d time.Duration) {
	if w, ok := ctx.Value(callWaitKey{}).(*CallWait); ok && d > 0 {
		w.D += d
	}
}

// WithDeliveryWait returns ctx telling a queue handler that its delivery
// waited d for backend capacity before the handler was called (a profile's
// deliver capacity).
func WithDeliveryWait(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, deliveryWaitKey{}, d)
}

// DeliveryWait is the wait for capacity of the delivery a handler's ctx
// belongs to (0: none reported).
func DeliveryWait(ctx context.Context) time.Duration {
	d, _ := ctx.Value(deliveryWaitKey{}).(time.Duration)
	return d
}
