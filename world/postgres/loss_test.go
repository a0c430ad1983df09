package pgworld_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/durabench/durabench/world"
	pgworld "github.com/durabench/durabench/world/postgres"
	"github.com/durabench/durabench/world/postgres/pgserver"
)

// TestServerKilled: once the server dies, every call fails at once with
// ErrConnectionLost (transient), and the world counts the disconnect.
func TestServerKilled(t *testing.T) {
	needServer(t)
	s, err := pgserver.Start(context.Background(), pgserver.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ctx := context.Background()
	w, err := pgworld.New(ctx, pgworld.Config{URL: s.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var delivered atomic.Int32
	sub, err := w.Consume(ctx, world.ConsumeOptions{Concurrency: 4}, func(context.Context, world.Delivery) error {
		delivered.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop(ctx)
	if err := w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Publish(ctx, world.Message{ID: "m", Run: "r"}, world.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	// The first calls find out; from then on calls fail without trying.
	deadline := time.Now().Add(10 * time.Second)
	for w.Incidents().Disconnects == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no disconnect counted 10 s after the server died; incidents %+v", w.Incidents())
		}
		_, err := w.Append(ctx, "r", world.Event{Kind: world.RunStarted}, world.Precondition{})
		if err == nil {
			continue // the server's backends have not noticed yet
		}
		if !errors.Is(err, pgworld.ErrConnectionLost) || !world.IsTransient(err) {
			t.Fatalf("Append after the server died: %v, want ErrConnectionLost (transient)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	calls := map[string]func() error{
		"Append": func() error {
			_, err := w.Append(ctx, "r", world.Event{Kind: world.RunStarted}, world.Precondition{})
			return err
		},
		"Load":    func() error { _, err := w.Load(ctx, "r"); return err },
		"GetRun":  func() error { _, err := w.GetRun(ctx, "r"); return err },
		"Publish": func() error { _, err := w.Publish(ctx, world.Message{ID: "n"}, world.PublishOptions{}); return err },
		"ReadChunks": func() error {
			_, _, err := w.ReadChunks(ctx, "s", 0, time.Second)
			return err
		},
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		if !errors.Is(err, pgworld.ErrConnectionLost) {
			t.Errorf("%s: %v, want ErrConnectionLost", name, err)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("%s took %v to fail: want at once", name, d)
		}
	}
	if inc := w.Incidents(); inc.Transient == 0 || inc.Last == "" {
		t.Errorf("incidents %+v: want transient failures and the last error", inc)
	}
}

// TestBackendsTerminated: when the server ends the world's connections
// (its listening one included) but keeps running, the world carries on: a
// message published afterwards is delivered, woken by a notification
// again, and the world is not marked down.
func TestBackendsTerminated(t *testing.T) {
	url := needServer(t)
	ctx := context.Background()
	w, err := pgworld.New(ctx, pgworld.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got := make(chan string, 16)
	sub, err := w.Consume(ctx, world.ConsumeOptions{Concurrency: 2}, func(_ context.Context, d world.Delivery) error {
		got <- d.ID
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop(ctx)
	if _, err := w.Publish(ctx, world.Message{ID: "before"}, world.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, got, "before", 5*time.Second)

	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var n int
	err = admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
		"durabench "+w.Schema()).Scan(&n)
	if err != nil || n == 0 {
		t.Fatalf("terminated %d backends: %v", n, err)
	}
	// The pool finds its dead connections one call at a time: a call may
	// fail, transiently, until then.
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		_, err := w.Publish(ctx, world.Message{ID: fmt.Sprintf("after-%d", i)}, world.PublishOptions{})
		if err == nil {
			waitFor(t, got, fmt.Sprintf("after-%d", i), 5*time.Second)
			break
		}
		if !world.IsTransient(err) || time.Now().After(deadline) {
			t.Fatalf("Publish after the backends were terminated: %v", err)
		}
	}
	if inc := w.Incidents(); inc.Disconnects != 0 {
		t.Errorf("incidents %+v: the server never stopped answering", inc)
	}
}

func waitFor(t *testing.T, got chan string, id string, limit time.Duration) {
	t.Helper()
	timeout := time.After(limit)
	for {
		select {
		case g := <-got:
			if g == id {
				return
			}
		case <-timeout:
			t.Fatalf("%s not delivered within %v", id, limit)
		}
	}
}
