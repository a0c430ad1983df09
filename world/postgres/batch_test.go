package pgworld_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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

// TestAckPastABusyPool: a handler's ack does not wait for the world's pool.
// With every connection of the pool held elsewhere when the handler
// returns, the message is still deleted at once (acks have connections of
// their own); one statement per ack through the pool made a burst's acks
// queue past the visibility timeout, and their messages came back.
func TestAckPastABusyPool(t *testing.T) {
	ctx := context.Background()
	url := needServer(t)
	const conns = 4
	w, err := pgworld.New(ctx, pgworld.Config{URL: url, MaxConns: conns})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	started, release := make(chan struct{}), make(chan struct{})
	sub, err := w.Consume(ctx, world.ConsumeOptions{Concurrency: 1}, func(context.Context, world.Delivery) error {
		close(started)
		<-release
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop(ctx)
	if _, err := w.Publish(ctx, world.Message{ID: "m"}, world.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("m not delivered within 5 s")
	}
	var held []*pgxpool.Conn
	for range conns {
		c, err := w.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	close(release)
	left, deadline := -1, time.Now().Add(2*time.Second)
	for time.Now().Before(deadline) {
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM `+w.Schema()+`.queue`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range held {
		c.Release()
	}
	if left != 0 {
		t.Fatalf("%d messages left in the queue 2 s after the handler returned, with the pool busy: the ack waited for it", left)
	}
}
