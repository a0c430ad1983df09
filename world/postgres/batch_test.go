package pgworld_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durabench/durabench/world"
	pgworld "github.com/durabench/durabench/world/postgres"
)

// TestBatchedPublishes: concurrent publishes (batched behind one another)
// of 8 ids, 16 times each, and 32 without an id: each id is enqueued once
// — exactly one of its publishes says so — and every message is delivered
// once.
func TestBatchedPublishes(t *testing.T) {
	ctx := context.Background()
	w, err := pgworld.New(ctx, pgworld.Config{URL: needServer(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var mu sync.Mutex
	got := map[string]int{}
	var n atomic.Int32
	sub, err := w.Consume(ctx, world.ConsumeOptions{Concurrency: 8}, func(_ context.Context, d world.Delivery) error {
		mu.Lock()
		got[d.ID]++
		mu.Unlock()
		n.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop(ctx)
	var fresh [8]atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 * 16 {
		wg.Go(func() {
			dup, err := w.Publish(ctx, world.Message{ID: fmt.Sprintf("m%d", i%8)}, world.PublishOptions{})
			if err != nil {
				t.Error(err)
			}
			if !dup {
				fresh[i%8].Add(1)
			}
		})
	}
	for range 32 {
		wg.Go(func() {
			if dup, err := w.Publish(ctx, world.Message{Run: "anonymous"}, world.PublishOptions{}); err != nil || dup {
				t.Errorf("publish without an id: dup %v, %v", dup, err)
			}
		})
	}
	wg.Wait()
	for i := range fresh {
		if f := fresh[i].Load(); f != 1 {
			t.Errorf("m%d: %d publishes reported as not duplicates, want 1", i, f)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for n.Load() < 8+32 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for i := range 8 {
		if c := got[fmt.Sprintf("m%d", i)]; c != 1 {
			t.Errorf("m%d delivered %d times, want 1", i, c)
		}
	}
	if got[""] != 32 {
		t.Errorf("%d messages without an id delivered, want 32", got[""])
	}
}
