package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/nats/natstest"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestWorkerRunsOnlyItsDriversCells: a worker drops and counts every
// message that does not decode or does not belong — garbage, an unknown
// operation, a cell not under its sweep or naming another driver subject
// or a world it does not open (an unknown one, postgres without a URL),
// the clock of a cell it does not have — and never opens a cell for one;
// while it runs a cell of one sweep it refuses another sweep's and says
// in its hello whom it serves; once that cell ends, the other sweep may
// have it.
func TestWorkerRunsOnlyItsDriversCells(t *testing.T) {
	url := natstest.Start(t, natstest.Spec{Name: "strangers"}).URL
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log lockedBuffer
	w, err := Connect(ctx, WorkerConfig{URL: url, ID: "w1", Concurrency: 2, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	root := DefaultSubject
	subj := subjWorker(root, "w1")
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), "ready on"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("worker not ready: %s", log.String())
		}
	}
	request := func(op string, data []byte) []byte {
		t.Helper()
		m, err := nc.Request(subj+"."+op, data, 30*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		return m.Data
	}
	cellOn := func(sweep, prefix, driver, world string, settings map[string]string) Reply {
		t.Helper()
		spec := CellSpec{Sweep: sweep, Prefix: prefix, Driver: driver, Features: mustVersion(t, "baseline").Features,
			Options: worldOptions, World: world, Settings: settings}
		b, _ := json.Marshal(spec)
		var r Reply
		if err := json.Unmarshal(request("cell", b), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	cell := func(sweep, prefix, driver string) Reply {
		t.Helper()
		return cellOn(sweep, prefix, driver, "", nil)
	}
	hello := func() Hello {
		t.Helper()
		m, err := nc.Request(subjDiscover(root), nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var h Hello
		_ = json.Unmarshal(m.Data, &h)
		return h
	}

	// Strangers: each is dropped and counted, none opens a cell.
	for _, r := range []Reply{
		func() Reply { var r Reply; _ = json.Unmarshal(request("cell", []byte("{not json")), &r); return r }(),
		cell("durabench_aaaa_", "elsewhere_1234", subjDriver(root, "elsewhere_1234")),
		cell("durabench_aaaa_", "durabench_aaaa_1234", subjDriver(root, "durabench_bbbb_1234")),
		cell("orders.>", "orders.>x", subjDriver(root, "orders.>x")),
		cellOn("durabench_aaaa_", "durabench_aaaa_1234", subjDriver(root, "durabench_aaaa_1234"), "mysql", nil),
		cellOn("durabench_aaaa_", "durabench_aaaa_1234", subjDriver(root, "durabench_aaaa_1234"), WorldPostgres, nil),
	} {
		if r.OK || !strings.HasPrefix(r.Error, "refused") {
			t.Errorf("a stranger's cell was answered %+v", r)
		}
	}
	if b := request("clock", []byte("durabench_aaaa_1234")); len(b) != 0 {
		t.Errorf("the clock of a cell the worker does not have: %q", b)
	}
	if b := request("shift", []byte{1, 2}); len(b) != 0 {
		t.Errorf("a shift that does not decode: %q", b)
	}
	_ = nc.Publish(subj+".exec", []byte("rm -rf /"))
	_ = nc.Flush()
	for deadline := time.Now().Add(5 * time.Second); w.Dropped() < 9; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			break
		}
	}
	if got := w.Dropped(); got != 9 {
		t.Errorf("dropped %d messages, want 9; log:\n%s", got, log.String())
	}
	if len(w.cells) != 0 || hello().Serving != "" {
		t.Fatalf("a stranger opened a cell: %v", w.cells)
	}

	// Sweep A owns the worker while its cell is open.
	const a, b = "durabench_aaaa1111_", "durabench_bbbb2222_"
	if r := cell(a, a+"c1", subjDriver(root, a+"c1")); !r.OK {
		t.Fatalf("sweep A's cell: %+v; log:\n%s", r, log.String())
	}
	if h := hello(); h.Serving != a {
		t.Errorf("hello says it serves %q, want %q", h.Serving, a)
	}
	if r := cell(b, b+"c1", subjDriver(root, b+"c1")); r.OK || !strings.Contains(r.Error, "serves sweep "+a) {
		t.Errorf("sweep B's cell while A's is open: %+v", r)
	}
	// B's driver does not count it, and says why.
	d, err := Dial(ctx, CoordinatorConfig{URL: url, Expect: 1, Wait: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Workers(ctx, b); !errors.Is(err, ErrNoWorkers) || !strings.Contains(err.Error(), "busy: w1 serves sweep "+a) {
		t.Errorf("B's driver: %v", err)
	}
	if hs, err := d.Workers(ctx, a); err != nil || len(hs) != 1 {
		t.Errorf("A's driver: %v %v", hs, err)
	}
	d.Close()
	if w.Dropped() != 10 {
		t.Errorf("dropped %d, want 10", w.Dropped())
	}
	if r := cell(a, a+"c1", subjDriver(root, a+"c1")); !r.OK {
		t.Errorf("a repeated announcement of A's cell: %+v", r)
	}
	var st WorkerStats
	if err := json.Unmarshal(request("end", []byte(a+"c1")), &st); err != nil || st.ID != "w1" {
		t.Fatalf("end: %+v %v", st, err)
	}
	// Free again: sweep B may have it.
	if r := cell(b, b+"c1", subjDriver(root, b+"c1")); !r.OK {
		t.Errorf("sweep B's cell once A's ended: %+v", r)
	}
	request("end", []byte(b+"c1"))
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
}

// worldOptions are the test cells' world options.
var worldOptions = world.Options{RetryStyle: world.Redeliver, VisibilityTimeout: 5 * time.Second}

func mustVersion(t *testing.T, name string) engine.Version {
	t.Helper()
	v, err := engine.LookupVersion(name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
