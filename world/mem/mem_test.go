package mem_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
	"github.com/durabench/durabench/world/worldtest"
)

func factory(t *testing.T, opts world.Options) worldtest.Harness {
	w := mem.New(opts)
	t.Cleanup(func() { _ = w.Close() })
	return worldtest.Harness{World: w, Run: worldtest.Direct}
}

func TestConformance(t *testing.T) { worldtest.Run(t, factory) }

// BenchmarkAppend is one unguarded step_created with an ID, to runs of
// 1024 events (a new run every 1024 appends, as a 1000-branch fan-out).
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	w := mem.New(world.Options{})
	defer w.Close()
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = "s" + strconv.Itoa(i)
	}
	run := ""
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%len(ids) == 0 {
			run = "r" + strconv.Itoa(i)
			if err := w.CreateRun(ctx, world.Run{ID: run}); err != nil {
				b.Fatal(err)
			}
		}
		id := ids[i%len(ids)]
		if _, err := w.Append(ctx, run, world.Event{Kind: world.StepCreated, ID: id, Entity: id}, world.Precondition{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendParallel is appends to one run from GOMAXPROCS goroutines:
// the cost of the run's lock under contention.
func BenchmarkAppendParallel(b *testing.B) {
	ctx := context.Background()
	w := mem.New(world.Options{})
	defer w.Close()
	if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := w.Append(ctx, "r", world.Event{Kind: world.RunStarted}, world.Precondition{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkLoad1000 is loading a run whose log holds 1000 events.
func BenchmarkLoad1000(b *testing.B) {
	ctx := context.Background()
	w := mem.New(world.Options{})
	defer w.Close()
	if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		b.Fatal(err)
	}
	for i := range 999 {
		s := "s" + strconv.Itoa(i)
		if _, err := w.Append(ctx, "r", world.Event{Kind: world.StepCreated, ID: s, Entity: s, Data: []byte(s)}, world.Precondition{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		evs, err := w.Load(ctx, "r")
		if err != nil || len(evs) != 1000 {
			b.Fatal(len(evs), err)
		}
	}
}

// BenchmarkPublishDeliver is the round trip from Publish to the handler,
// one message at a time.
func BenchmarkPublishDeliver(b *testing.B) {
	ctx := context.Background()
	w := mem.New(world.Options{})
	defer w.Close()
	got := make(chan struct{}, 1)
	sub, err := w.Consume(ctx, world.ConsumeOptions{Concurrency: 1}, func(context.Context, world.Delivery) error {
		got <- struct{}{}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Stop(ctx)
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = "m" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := w.Publish(ctx, world.Message{ID: ids[i], Run: "r"}, world.PublishOptions{}); err != nil {
			b.Fatal(err)
		}
		<-got
	}
}

// BenchmarkPublishDeliverBurst is a 256-message burst, as one 256-branch
// fan-out dispatches, consumed by 512 concurrent handlers; per message.
func BenchmarkPublishDeliverBurst(b *testing.B) {
	ctx := context.Background()
	w := mem.New(world.Options{})
	defer w.Close()
	var wg sync.WaitGroup
	sub, err := w.Consume(ctx, world.ConsumeOptions{Concurrency: 512}, func(context.Context, world.Delivery) error {
		wg.Done()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Stop(ctx)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 256 {
		wg.Add(256)
		for j := range 256 {
			if _, err := w.Publish(ctx, world.Message{ID: strconv.Itoa(i + j), Run: "r"}, world.PublishOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
	}
}

// TestCloseWakesReader: Close ends a long poll with ErrClosed.
func TestCloseWakesReader(t *testing.T) {
	w := mem.New(world.Options{})
	errc := make(chan error, 1)
	go func() {
		_, _, err := w.ReadChunks(context.Background(), "s", 0, time.Minute)
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, world.ErrClosed) {
			t.Fatalf("ReadChunks after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the long poll")
	}
}

// TestConsumeContext: cancelling the Consume context stops fetching, as
// Stop does.
func TestConsumeContext(t *testing.T) {
	w := mem.New(world.Options{})
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan world.Delivery, 4)
	sub, err := w.Consume(ctx, world.ConsumeOptions{Concurrency: 1}, func(_ context.Context, d world.Delivery) error {
		got <- d
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop(context.Background())
	cancel()
	time.Sleep(100 * time.Millisecond) // context.AfterFunc runs on its own goroutine
	if _, err := w.Publish(context.Background(), world.Message{ID: "a"}, world.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-got:
		t.Fatalf("delivery %+v after the Consume context was cancelled", d)
	case <-time.After(50 * time.Millisecond):
	}
}
