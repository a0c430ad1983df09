package natsworld_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durabench/durabench/world"
	natsworld "github.com/durabench/durabench/world/nats"
	"github.com/durabench/durabench/world/nats/natstest"
	"github.com/durabench/durabench/world/worldtest"
)

// externalFactory runs each subtest on a fresh world (its own random
// prefix) on the server or cluster at url; Close deletes its streams. sole
// declares the world the only writer of its prefix (pipelined appends).
func externalFactory(url string, replicas int, sole bool) worldtest.Factory {
	return func(t *testing.T, opts world.Options) worldtest.Harness {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		w, err := natsworld.New(ctx, natsworld.Config{Options: opts, URL: url, Replicas: replicas, SoleWriter: sole})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() {
			if err := w.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return worldtest.Harness{World: w, Run: worldtest.Direct}
	}
}

// TestConformanceExternal runs the suite against a nats-server in a separate
// process, over TCP loopback.
func TestConformanceExternal(t *testing.T) {
	srv := natstest.Start(t, natstest.Spec{Name: "external"})
	worldtest.Run(t, externalFactory(srv.URL, 1, false))
	t.Run("SoleWriter", func(t *testing.T) { worldtest.Run(t, externalFactory(srv.URL, 1, true)) })
}

// TestConformanceCluster runs the suite against a three-node cluster with
// R3 streams. It is slow, so it runs only with DURABENCH_NATS_CLUSTER=1
// (make test-cluster, CI).
func TestConformanceCluster(t *testing.T) {
	if os.Getenv("DURABENCH_NATS_CLUSTER") != "1" {
		t.Skip("set DURABENCH_NATS_CLUSTER=1 to run the three-node cluster suite")
	}
	urls := natstest.StartCluster(t)
	worldtest.Run(t, externalFactory(urls, 3, false))
	t.Run("SoleWriter", func(t *testing.T) { worldtest.Run(t, externalFactory(urls, 3, true)) })
	t.Run("TwoWriters", func(t *testing.T) { testTwoWriters(t, urls, 3) })
}

func TestUnreachableURL(t *testing.T) {
	const url = "nats://127.0.0.1:1"
	start := time.Now()
	_, err := natsworld.New(context.Background(), natsworld.Config{URL: url})
	took := time.Since(start)
	if !errors.Is(err, natsworld.ErrUnreachable) {
		t.Fatalf("New(%s) error = %v, want ErrUnreachable", url, err)
	}
	if !strings.Contains(err.Error(), url) {
		t.Errorf("error %q does not name the URL %s", err, url)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q is not one line", err)
	}
	if took > 5*time.Second {
		t.Errorf("New took %v, want within 5s", took)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  natsworld.Config
		want string
	}{
		{"storage", natsworld.Config{Storage: "disk"}, `storage "disk"`},
		{"prefix", natsworld.Config{Prefix: "a.b"}, `prefix "a.b"`},
		{"replicas embedded", natsworld.Config{Replicas: 3}, "replicas 3"},
		{"retry style", natsworld.Config{Options: world.Options{RetryStyle: "again"}}, `retry style "again"`},
		{"creds", natsworld.Config{URL: "nats://127.0.0.1:1", Auth: natsworld.Auth{CredsFile: "/nonexistent.creds"}}, "/nonexistent.creds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := natsworld.New(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New error = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// TestServerKilled: once the server dies, world calls fail promptly with a
// typed, retryable error instead of hanging.
func TestServerKilled(t *testing.T) {
	srv := natstest.Start(t, natstest.Spec{Name: "doomed"})
	ctx := context.Background()
	w, err := natsworld.New(ctx, natsworld.Config{URL: srv.URL, ConnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer w.Close()
	if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	delivered := make(chan struct{}, 1)
	sub, err := w.Consume(ctx, world.ConsumeOptions{Concurrency: 2}, func(ctx context.Context, d world.Delivery) error {
		select {
		case delivered <- struct{}{}:
		default:
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Publish(ctx, world.Message{ID: "m1"}, world.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	<-delivered

	srv.Kill()

	calls := map[string]func() error{
		"Append": func() error {
			_, err := w.Append(ctx, "r", world.Event{Kind: world.RunStarted}, world.Precondition{})
			return err
		},
		"Publish": func() error {
			_, err := w.Publish(ctx, world.Message{ID: "m2"}, world.PublishOptions{})
			return err
		},
		"GetRun": func() error { _, err := w.GetRun(ctx, "r"); return err },
		"Load":   func() error { _, err := w.Load(ctx, "r"); return err },
		"ReadChunks": func() error {
			_, _, err := w.ReadChunks(ctx, "s", 0, 0)
			return err
		},
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		if !errors.Is(err, world.ErrTransient) {
			t.Errorf("%s after the server died: error %v, want ErrTransient", name, err)
		}
		if !errors.Is(err, natsworld.ErrConnectionLost) {
			t.Errorf("%s after the server died: error %v, want ErrConnectionLost", name, err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s took %v to fail", name, took)
		}
	}
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sub.Stop(stopCtx); err != nil {
		t.Errorf("Stop after the server died: %v", err)
	}
}

// TestTwoWritersExternal: two worlds (as two processes would) share one
// prefix on an external server and append concurrently to the same run.
// Their caches fence each other through the expected-last-subject-sequence:
// every append lands exactly once, positions are dense, and the pending
// count stays exact.
func TestTwoWritersExternal(t *testing.T) {
	srv := natstest.Start(t, natstest.Spec{Name: "shared"})
	testTwoWriters(t, srv.URL, 1)
}

func testTwoWriters(t *testing.T, url string, replicas int) {
	ctx := context.Background()
	prefix := fmt.Sprintf("durabench_two_%d", time.Now().UnixNano())
	a, err := natsworld.New(ctx, natsworld.Config{URL: url, Prefix: prefix, Replicas: replicas, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := natsworld.New(ctx, natsworld.Config{URL: url, Prefix: prefix, Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateRun(ctx, world.Run{ID: "r"}); !errors.Is(err, world.ErrConflict) {
		t.Fatalf("second CreateRun through the other world: %v, want ErrConflict", err)
	}
	const steps = 40
	var g errgroup
	for i := range steps {
		w := []world.World{a, b}[i%2]
		other := []world.World{b, a}[i%2]
		step := fmt.Sprintf("s%d", i)
		g.Go(func() error {
			if _, err := w.Append(ctx, "r", world.Event{Kind: world.StepCreated, ID: "c-" + step, Entity: step}, world.Precondition{}); err != nil {
				return err
			}
			// The other world completes it: it must see the step_created.
			if _, err := other.Append(ctx, "r", world.Event{Kind: world.StepCompleted, ID: "d-" + step, Entity: step}, world.Precondition{}); err != nil {
				return fmt.Errorf("complete %s through the other world: %w", step, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	res, err := a.Append(ctx, "r", world.Event{Kind: world.RunCompleted}, world.Precondition{})
	if err != nil || res.Pending != 0 || res.Pos != 2*steps+2 {
		t.Fatalf("run_completed = %+v, %v; want Pos %d, Pending 0", res, err, 2*steps+2)
	}
	if _, err := b.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: "late"}, world.Precondition{}); !errors.Is(err, world.ErrGone) {
		t.Fatalf("append through the other world after run_completed: %v, want ErrGone", err)
	}
	evs, err := b.Load(ctx, "r")
	if err != nil || len(evs) != 2*steps+2 {
		t.Fatalf("Load = %d events, %v; want %d", len(evs), err, 2*steps+2)
	}
	for i, ev := range evs {
		if ev.Pos != int64(i+1) {
			t.Fatalf("event %d has Pos %d", i, ev.Pos)
		}
	}
}

// errgroup is a minimal error group (the test avoids a dependency).
type errgroup struct {
	wg   sync.WaitGroup
	once sync.Once
	err  error
}

func (g *errgroup) Go(fn func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := fn(); err != nil {
			g.once.Do(func() { g.err = err })
		}
	}()
}

func (g *errgroup) Wait() error { g.wg.Wait(); return g.err }

// TestCloseDeletesStreams: Close deletes the streams the world created on
// an external server, unless Keep; a world on the same prefix finds what a
// kept world left (idempotent setup).
func TestCloseDeletesStreams(t *testing.T) {
	srv := natstest.Start(t, natstest.Spec{Name: "cleanup"})
	ctx := context.Background()
	streams := func(prefix string) []string { return natstest.Streams(t, srv.URL, prefix+"_") }

	kept, err := natsworld.New(ctx, natsworld.Config{URL: srv.URL, Prefix: "keepme", Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := kept.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := kept.Close(); err != nil {
		t.Fatal(err)
	}
	if got := streams("keepme"); len(got) != 3 {
		t.Fatalf("after Close with Keep: streams %v, want 3", got)
	}
	again, err := natsworld.New(ctx, natsworld.Config{URL: srv.URL, Prefix: "keepme"})
	if err != nil {
		t.Fatalf("New on a kept prefix: %v", err)
	}
	if ids, err := again.ListRuns(ctx); err != nil || len(ids) != 1 || ids[0] != "r" {
		t.Fatalf("ListRuns on the kept prefix = %v, %v", ids, err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	if got := streams("keepme"); len(got) != 0 {
		t.Fatalf("after Close without Keep: streams %v left", got)
	}
}

// TestStoppedConsumerHandsBack: a consumer stopped while messages stream
// in (what a cluster worker does on SIGTERM) hands back every message it
// holds — buffered, and those the server sent for its outstanding pull
// requests — so a consumer in another process takes them at once. The
// visibility timeout is a minute: a message left to it fails the test.
func TestStoppedConsumerHandsBack(t *testing.T) {
	srv := natstest.Start(t, natstest.Spec{Name: "handback"})
	testStoppedConsumerHandsBack(t, srv.URL, srv.URL, 1)
}

// TestStoppedConsumerHandsBackCluster: the same with R3 streams, the two
// consumers on different nodes of a three-node cluster.
func TestStoppedConsumerHandsBackCluster(t *testing.T) {
	if os.Getenv("DURABENCH_NATS_CLUSTER") != "1" {
		t.Skip("set DURABENCH_NATS_CLUSTER=1 to run the three-node cluster suite")
	}
	urls := strings.Split(natstest.StartCluster(t), ",")
	testStoppedConsumerHandsBack(t, urls[0], urls[2], 3)
}

func testStoppedConsumerHandsBack(t *testing.T, urlA, urlB string, replicas int) {
	ctx := context.Background()
	opts := world.Options{VisibilityTimeout: time.Minute}
	prefix := fmt.Sprintf("handback%d", time.Now().UnixNano())
	open := func(url string) *natsworld.World {
		w, err := natsworld.New(ctx, natsworld.Config{Options: opts, URL: url, Replicas: replicas, Prefix: prefix})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { _ = w.Close() })
		return w
	}
	wa, wb := open(urlA), open(urlB)
	const n = 200
	for round := range 5 {
		var mu sync.Mutex
		seen := map[string]bool{}
		done := make(chan struct{})
		h := func(_ context.Context, d world.Delivery) error {
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			seen[d.Message.ID] = true
			if len(seen) == n {
				close(done)
			}
			return nil
		}
		a, err := wa.Consume(ctx, world.ConsumeOptions{Concurrency: 4}, h)
		if err != nil {
			t.Fatal(err)
		}
		b, err := wb.Consume(ctx, world.ConsumeOptions{Concurrency: 4}, h)
		if err != nil {
			t.Fatal(err)
		}
		stopped := make(chan struct{})
		for i := range n {
			m := world.Message{ID: fmt.Sprintf("m%d.%d", round, i), Run: "r", Body: []byte("x")}
			if _, err := wb.Publish(ctx, m, world.PublishOptions{}); err != nil {
				t.Fatal(err)
			}
			if i == n/4+round*10 {
				go func() { _ = a.Stop(ctx); close(stopped) }()
			}
		}
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			mu.Lock()
			t.Fatalf("round %d: %d of %d messages handled 20 s on: the rest wait for the visibility timeout", round, len(seen), n)
		}
		<-stopped
		if err := b.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSameIDRaceCluster: two processes writing the same event, or
// publishing the same message, at the same moment through different nodes
// of a three-node cluster (a lazily resumed hook's hook_received is written
// by the resumer and re-ensured by the worker that picks up its message).
// The stream leader answers the second "duplicate message id is in process"
// while the first is being proposed. That answer decides nothing: both
// calls must succeed, exactly one of them reporting that it stored the
// event, and the log must hold the event once.
func TestSameIDRaceCluster(t *testing.T) {
	if os.Getenv("DURABENCH_NATS_CLUSTER") != "1" {
		t.Skip("set DURABENCH_NATS_CLUSTER=1 to run the three-node cluster suite")
	}
	urls := strings.Split(natstest.StartCluster(t), ",")
	ctx := context.Background()
	prefix := fmt.Sprintf("durabench_race_%d", time.Now().UnixNano())
	open := func(url string, keep bool) *natsworld.World {
		w, err := natsworld.New(ctx, natsworld.Config{URL: url, Prefix: prefix, Replicas: 3, Keep: keep})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		return w
	}
	// b closes first (cleanups run last-in first-out), a deletes the streams.
	a, b := open(urls[0], false), open(urls[2], true)
	const runs = 60
	// stored[k][i]: world k's append to run i stored the event (it was not
	// a duplicate); published likewise for the message.
	var stored, published [2][runs]bool
	var g errgroup
	for i := range runs {
		run := fmt.Sprintf("r%d", i)
		if err := a.CreateRun(ctx, world.Run{ID: run}); err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		for k, w := range []*natsworld.World{a, b} {
			g.Go(func() error {
				<-start
				res, err := w.Append(ctx, run, world.Event{Kind: world.StepCreated, ID: "c-" + run, Entity: "s"}, world.Precondition{})
				if err != nil {
					return fmt.Errorf("append to %s: %w", run, err)
				}
				dup, err := w.Publish(ctx, world.Message{ID: "m-" + run, Run: run, Body: []byte("x")}, world.PublishOptions{})
				if err != nil {
					return fmt.Errorf("publish for %s: %w", run, err)
				}
				stored[k][i], published[k][i] = !res.Duplicate, !dup
				return nil
			})
		}
		close(start)
		if i%10 == 9 {
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for i := range runs {
		if stored[0][i] == stored[1][i] || published[0][i] == published[1][i] {
			t.Errorf("r%d: append stored by a %v, by b %v; publish stored by a %v, by b %v; want exactly one of each",
				i, stored[0][i], stored[1][i], published[0][i], published[1][i])
		}
		evs, err := a.Load(ctx, fmt.Sprintf("r%d", i))
		if err != nil || len(evs) != 2 {
			t.Errorf("r%d: Load = %d events, %v; want 2 (run_created, step_created)", i, len(evs), err)
		}
	}
}
