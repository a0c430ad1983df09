package natsworld

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/nats/natstest"
)

// The benchmarks below put each world operation on the embedded server next
// to the raw JetStream operation it wraps. Every iteration runs the raw
// operation and then the world operation on the same connection, timing
// each, so machine noise hits both alike; each benchmark reports
// raw-ns/op, world-ns/op and their ratio world/raw (ns/op is their sum).

// pair times one raw and one world operation per iteration.
type pair struct{ raw, world time.Duration }

func (p *pair) time(raw, wrapped func() error) error {
	t0 := time.Now()
	if err := raw(); err != nil {
		return fmt.Errorf("raw: %w", err)
	}
	t1 := time.Now()
	if err := wrapped(); err != nil {
		return fmt.Errorf("world: %w", err)
	}
	p.raw += t1.Sub(t0)
	p.world += time.Since(t1)
	return nil
}

func (p *pair) report(b *testing.B) {
	raw := float64(p.raw.Nanoseconds()) / float64(b.N)
	wrapped := float64(p.world.Nanoseconds()) / float64(b.N)
	b.ReportMetric(raw, "raw-ns/op")
	b.ReportMetric(wrapped, "world-ns/op")
	if raw > 0 {
		b.ReportMetric(wrapped/raw, "world/raw")
	}
}

func benchWorld(b *testing.B, opts world.Options) *World {
	b.Helper()
	w, err := New(context.Background(), Config{Options: opts})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close() })
	return w
}

// rawStream creates a plain stream next to the world's, for the raw side.
func rawStream(b *testing.B, w *World, name string, retention jetstream.RetentionPolicy) jetstream.Stream {
	b.Helper()
	s, err := w.js.CreateOrUpdateStream(context.Background(), jetstream.StreamConfig{
		Name: name, Subjects: []string{name + ".>"}, Retention: retention, Storage: jetstream.FileStorage,
		Duplicates: 10 * time.Minute, AllowDirect: true,
	})
	if err != nil {
		b.Fatal(err)
	}
	if retention == jetstream.WorkQueuePolicy {
		// The same anchor message as the world's queue (see setup), so
		// both sides have the same store layout.
		if _, err := w.js.Publish(context.Background(), name+".anchor", nil); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkPublish: Queue.Publish (work-queue publish with a message id,
// waiting for the PubAck) vs js.PublishMsg with Nats-Msg-Id.
func BenchmarkPublish(b *testing.B) {
	ctx := context.Background()
	w := benchWorld(b, world.Options{})
	rawStream(b, w, "raw_pub", jetstream.WorkQueuePolicy)
	var p pair
	b.ResetTimer()
	for i := range b.N {
		id := strconv.Itoa(i)
		err := p.time(func() error {
			m := nats.NewMsg("raw_pub.q")
			m.Data = []byte("body")
			m.Header.Set(jetstream.MsgIDHeader, id)
			_, err := w.js.PublishMsg(ctx, m)
			return err
		}, func() error {
			_, err := w.Publish(ctx, world.Message{ID: id, Run: "r", Body: []byte("body")}, world.PublishOptions{})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	p.report(b)
}

// BenchmarkGuardedAppend: Log.Append under the guard (entity rules, cache,
// expected-last-subject-sequence) vs a publish with
// Nats-Expected-Last-Subject-Sequence to a per-run subject.
func BenchmarkGuardedAppend(b *testing.B) {
	ctx := context.Background()
	w := benchWorld(b, world.Options{Guard: true})
	rawStream(b, w, "raw_log", jetstream.LimitsPolicy)
	if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		b.Fatal(err)
	}
	if _, err := w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: "s"}, world.Precondition{}); err != nil {
		b.Fatal(err)
	}
	var lastSeq uint64
	pos := int64(2)
	var p pair
	b.ResetTimer()
	for range b.N {
		err := p.time(func() error {
			m := nats.NewMsg("raw_log.r")
			m.Data = []byte("event-data")
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(lastSeq, 10))
			ack, err := w.js.PublishMsg(ctx, m)
			if err == nil {
				lastSeq = ack.Sequence
			}
			return err
		}, func() error {
			res, err := w.Append(ctx, "r", world.Event{Kind: world.StepRetrying, Entity: "s", Data: []byte("event-data")},
				world.Precondition{Guarded: true, LastPos: pos})
			pos = res.Pos
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	p.report(b)
}

// BenchmarkPublishConsume: one message's trip from Publish to a running
// Consume handler (acked), vs js.PublishMsg to a work-queue stream read by a
// durable pull consumer (Messages, ack).
func BenchmarkPublishConsume(b *testing.B) {
	ctx := context.Background()
	w := benchWorld(b, world.Options{})
	rawStream(b, w, "raw_rt", jetstream.WorkQueuePolicy)
	cons, err := w.js.CreateOrUpdateConsumer(ctx, "raw_rt", jetstream.ConsumerConfig{
		Durable: "raw", FilterSubject: "raw_rt.q", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: -1,
	})
	if err != nil {
		b.Fatal(err)
	}
	rawGot := make(chan struct{}, 1)
	it, err := cons.Messages(jetstream.PullMaxMessages(maxPull))
	if err != nil {
		b.Fatal(err)
	}
	defer it.Stop()
	go func() {
		for {
			m, err := it.Next()
			if err != nil {
				return
			}
			_ = m.Ack()
			rawGot <- struct{}{}
		}
	}()
	worldGot := make(chan struct{}, 1)
	sub, err := w.Consume(ctx, world.ConsumeOptions{Concurrency: 16}, func(ctx context.Context, d world.Delivery) error {
		worldGot <- struct{}{}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sub.Stop(ctx) }()
	var p pair
	b.ResetTimer()
	for i := range b.N {
		id := strconv.Itoa(i)
		err := p.time(func() error {
			m := nats.NewMsg("raw_rt.q")
			m.Data = []byte("body")
			m.Header.Set(jetstream.MsgIDHeader, id)
			if _, err := w.js.PublishMsg(ctx, m); err != nil {
				return err
			}
			<-rawGot
			return nil
		}, func() error {
			if _, err := w.Publish(ctx, world.Message{ID: id, Body: []byte("body")}, world.PublishOptions{}); err != nil {
				return err
			}
			<-worldGot
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	p.report(b)
}

// BenchmarkLoad: Log.Load of a 256-event log vs one batched direct get of
// the same number of raw messages.
func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	w := benchWorld(b, world.Options{})
	rawStream(b, w, "raw_load", jetstream.LimitsPolicy)
	if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		b.Fatal(err)
	}
	if _, err := w.Append(ctx, "r", world.Event{Kind: world.RunStarted}, world.Precondition{}); err != nil {
		b.Fatal(err)
	}
	for i := 2; i < 256; i++ {
		if _, err := w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: strconv.Itoa(i), ID: "c" + strconv.Itoa(i)}, world.Precondition{}); err != nil {
			b.Fatal(err)
		}
	}
	for range 256 {
		if _, err := w.js.Publish(ctx, "raw_load.r", []byte("event-data")); err != nil {
			b.Fatal(err)
		}
	}
	var p pair
	b.ResetTimer()
	for range b.N {
		err := p.time(func() error {
			msgs, _, _, err := w.directBatch(ctx, "raw_load", "raw_load.r", 1, directBatchMax)
			if err == nil && len(msgs) != 256 {
				err = fmt.Errorf("read %d messages", len(msgs))
			}
			return err
		}, func() error {
			evs, err := w.Load(ctx, "r")
			if err == nil && len(evs) != 256 {
				err = fmt.Errorf("loaded %d events", len(evs))
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	p.report(b)
}

// BenchmarkFanOutAppends: 256 concurrent appends to one run (a 256-branch
// fan-out's step_created burst), vs 256 async publishes to one subject
// awaited together (what JetStream can do without per-run rules). ns/op is
// per append.
func BenchmarkFanOutAppends(b *testing.B) {
	fanOutAppends(b, benchWorld(b, world.Options{}))
}

// BenchmarkFanOutAppendsExternal: the same against a nats-server in another
// process over TCP loopback, as a world that may share its prefix with
// other writers (each append waits for the one before it on the run) and
// as the prefix's sole writer (appends pipelined, as embedded): what
// Config.SoleWriter, which a sweep without external workers sets, saves.
func BenchmarkFanOutAppendsExternal(b *testing.B) {
	srv := natstest.Start(b, natstest.Spec{Name: "bench"})
	for _, sole := range []bool{false, true} {
		name := "shared"
		if sole {
			name = "sole-writer"
		}
		b.Run(name, func(b *testing.B) {
			w, err := New(context.Background(), Config{URL: srv.URL, SoleWriter: sole})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = w.Close() })
			if w.pipelined() != sole {
				b.Fatalf("pipelined %v, want %v", w.pipelined(), sole)
			}
			fanOutAppends(b, w)
		})
	}
}

func fanOutAppends(b *testing.B, w *World) {
	const branches = 256
	ctx := context.Background()
	rawStream(b, w, "raw_fan", jetstream.LimitsPolicy)
	var p pair
	b.ResetTimer()
	for i := 0; i < b.N; i += branches {
		run := "r" + strconv.Itoa(i)
		if err := w.CreateRun(ctx, world.Run{ID: run}); err != nil {
			b.Fatal(err)
		}
		err := p.time(func() error {
			futs := make([]jetstream.PubAckFuture, branches)
			for j := range futs {
				f, err := w.js.PublishAsync("raw_fan."+run, []byte("event-data"))
				if err != nil {
					return err
				}
				futs[j] = f
			}
			for _, f := range futs {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					return err
				}
			}
			return nil
		}, func() error {
			errs := make(chan error, branches)
			for j := range branches {
				go func() {
					step := strconv.Itoa(j)
					_, err := w.Append(ctx, run, world.Event{Kind: world.StepCreated, ID: "c" + step, Entity: step, Data: []byte("event-data")}, world.Precondition{})
					errs <- err
				}()
			}
			for range branches {
				if err := <-errs; err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	// Per append, not per burst.
	n := (b.N + branches - 1) / branches * branches
	b.ReportMetric(float64(p.raw.Nanoseconds())/float64(n), "raw-ns/op")
	b.ReportMetric(float64(p.world.Nanoseconds())/float64(n), "world-ns/op")
	b.ReportMetric(float64(p.world)/float64(p.raw), "world/raw")
}
