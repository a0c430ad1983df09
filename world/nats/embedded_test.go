package natsworld

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/durabench/durabench/world"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestSharedEmbedded: two worlds on one shared embedded server (an
// interleaved pair's) keep apart under their prefixes, closing them leaves
// the server up, and closing the server removes its store.
func TestSharedEmbedded(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	e, err := StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var worlds []*World
	for _, p := range []string{"pair_a", "pair_b"} {
		w, err := New(ctx, Config{Prefix: p, Embedded: e, SoleWriter: true})
		if err != nil {
			t.Fatal(err)
		}
		worlds = append(worlds, w)
	}
	if err := worlds[0].CreateRun(ctx, world.Run{ID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := worlds[1].GetRun(ctx, "r1"); err == nil {
		t.Error("world b sees world a's run")
	}
	if err := worlds[1].CreateRun(ctx, world.Run{ID: "r1"}); err != nil {
		t.Errorf("world b cannot create its own r1: %v", err)
	}
	if err := worlds[0].Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := worlds[1].GetRun(ctx, "r1"); err != nil {
		t.Errorf("world b after a closed: %v", err)
	}
	if err := worlds[1].Close(); err != nil {
		t.Fatal(err)
	}
	dir := e.store.dir
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the shared store went with its worlds: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("store %s left after Close: %v", dir, err)
	}
}

// TestSetupAsksAgain: a setup request whose answer never comes is asked
// again within the setup's deadline. Seen once in about 6,000 worlds set
// up on a freshly started embedded server: the log stream's create got
// no reply and the world failed after 10 s. Here a subscriber takes the
// first JetStream request (the log stream's update) on a server whose
// JetStream is not on yet and answers nothing; then JetStream is turned
// on and the subscriber leaves, so only a second request can be answered.
func TestSetupAsksAgain(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	st, err := newStore()
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.NewServer(&server.Options{ServerName: "setup-again", DontListen: true, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server did not start")
	}
	e := &Embedded{srv: s, store: st}
	defer e.Close()
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	taken := make(chan struct{})
	var once sync.Once
	sub, err := nc.Subscribe("$JS.API.>", func(*nats.Msg) { once.Do(func() { close(taken) }) })
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	go func() {
		<-taken
		if err := s.EnableJetStream(&server.JetStreamConfig{StoreDir: st.dir}); err != nil {
			t.Error(err)
		}
		_ = sub.Unsubscribe()
		_ = nc.Flush()
	}()
	t0 := time.Now()
	w, err := New(context.Background(), Config{Prefix: "again", Embedded: e, SoleWriter: true})
	if err != nil {
		t.Fatalf("setup after an unanswered request: %v (after %v)", err, time.Since(t0).Round(time.Millisecond))
	}
	defer w.Close()
	select {
	case <-taken:
	default:
		t.Fatal("the first JetStream request was not taken: the test tested nothing")
	}
	if err := w.CreateRun(context.Background(), world.Run{ID: "r1"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("set up in %v, the first request unanswered", time.Since(t0).Round(time.Millisecond))
}
