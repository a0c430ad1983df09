package rawpg_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/internal/bench/fanout"
	"github.com/durabench/durabench/internal/bench/rawpg"
	"github.com/durabench/durabench/world"
	pgworld "github.com/durabench/durabench/world/postgres"
	"github.com/durabench/durabench/world/postgres/pgserver"
)

// The world and the floor each get a throwaway server of the same
// configuration (pgserver's defaults: fsync on), started once for the
// package; DURABENCH_POSTGRES_URL puts both on one server instead.
var (
	worldURL, floorURL string
	noServer           string // why there is none: the tests skip with it
)

func TestMain(m *testing.M) {
	var servers []*pgserver.Server
	worldURL = os.Getenv("DURABENCH_POSTGRES_URL")
	floorURL = worldURL
	if worldURL == "" {
		for _, u := range []*string{&worldURL, &floorURL} {
			s, err := pgserver.Start(context.Background(), pgserver.Options{})
			if err != nil {
				if os.Getenv("CI") != "" {
					// CI installs the binaries (.ci/run): their absence is a failure there.
					fmt.Fprintln(os.Stderr, "rawpg tests: no PostgreSQL server:", err)
					os.Exit(1)
				}
				worldURL, floorURL, noServer = "", "", err.Error()
				break
			}
			servers = append(servers, s)
			*u = s.URL()
		}
	}
	code := m.Run()
	for _, s := range servers {
		s.Stop()
	}
	os.Exit(code)
}

func needServer(t testing.TB) {
	t.Helper()
	if worldURL == "" {
		t.Skipf("skipped: no PostgreSQL server (%s)", noServer)
	}
}

// BenchmarkFanOutPG runs one fan-out per iteration on the PostgreSQL world
// for every version at 20, 64 and 256 branches, and in the same iteration
// the floor: the same operations as raw SQL statements (rawpg.World) on a
// server of the same configuration, at the same concurrency
// (internal/bench/fanout.Floor). The floor also runs on the PostgreSQL world itself,
// which splits the ratio into the engine's share (engine/world-floor) and
// the PostgreSQL world's over raw SQL (world-floor/floor). No target: the
// issue asks for the measurement.
func BenchmarkFanOutPG(b *testing.B) {
	needServer(b)
	newPG := func() (world.World, error) { return pgworld.New(context.Background(), pgworld.Config{URL: worldURL}) }
	newRaw := func() (world.World, error) { return rawpg.New(context.Background(), rawpg.Config{URL: floorURL}) }
	for _, v := range engine.Versions() {
		for _, n := range []int{20, 64, 256} {
			b.Run(fmt.Sprintf("%s/branches=%d", v.Name, n), func(b *testing.B) {
				fanout.Bench(b, v.Features, n, newPG, newRaw, fanout.Options{Warmup: 1, WorldFloor: true})
			})
		}
	}
}

// TestFloorRunsOnRawPostgres runs the floor of a 64-branch fan-out of
// every version on the raw SQL world.
func TestFloorRunsOnRawPostgres(t *testing.T) {
	needServer(t)
	ctx := context.Background()
	w, err := rawpg.New(ctx, rawpg.Config{URL: floorURL})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i, v := range engine.Versions() {
		fl := fanout.NewFloor(w, v.Features, 64, 64)
		if err := fl.Start(ctx, fanout.Concurrency); err != nil {
			t.Fatal(err)
		}
		if _, err := fl.Run(ctx, fmt.Sprintf("r%d", i), fanout.RunTimeout); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if err := fl.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRawOperations checks what the floor promises of each operation:
// duplicates by id, the pending count whatever the order of a step's
// events, a failed delivery coming back with attempt 2, and the schema
// gone after Close.
func TestRawOperations(t *testing.T) {
	needServer(t)
	ctx := context.Background()
	w, err := rawpg.New(ctx, rawpg.Config{URL: floorURL})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			w.Close()
		}
	}()
	if err := w.CreateRun(ctx, world.Run{ID: "r", Input: []byte("in")}); err != nil {
		t.Fatal(err)
	}
	if r, err := w.GetRun(ctx, "r"); err != nil || string(r.Input) != "in" {
		t.Fatalf("GetRun: %+v, %v", r, err)
	}
	if _, err := w.GetRun(ctx, "nope"); !errors.Is(err, world.ErrNotFound) {
		t.Fatalf("GetRun of no run: %v, want ErrNotFound", err)
	}
	appendEv := func(kind world.EventKind, id, entity string) world.AppendResult {
		t.Helper()
		res, err := w.Append(ctx, "r", world.Event{Kind: kind, ID: id, Entity: entity}, world.Precondition{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a := appendEv(world.StepCreated, "c/a", "a")
	if a.Duplicate || a.Pending != 1 {
		t.Fatalf("create a: %+v", a)
	}
	if d := appendEv(world.StepCreated, "c/a", "a"); !d.Duplicate || d.Pos != a.Pos || d.Pending != 1 {
		t.Fatalf("create a again: %+v, want a duplicate at %d", d, a.Pos)
	}
	// b completes before it is created (the floor checks no rule).
	if r := appendEv(world.StepCompleted, "d/b", "b"); r.Pending != 1 {
		t.Fatalf("complete b first: %+v, want pending 1", r)
	}
	if r := appendEv(world.StepCreated, "c/b", "b"); r.Pending != 1 {
		t.Fatalf("create b after: %+v, want pending 1", r)
	}
	if r := appendEv(world.StepCompleted, "d/a", "a"); r.Pending != 0 {
		t.Fatalf("complete a: %+v, want pending 0", r)
	}
	evs, err := w.Load(ctx, "r")
	if err != nil || len(evs) != 5 || evs[0].Kind != world.RunCreated || evs[4].ID != "d/a" {
		t.Fatalf("Load: %d events %+v, %v", len(evs), evs, err)
	}

	if dup, err := w.Publish(ctx, world.Message{ID: "m", Run: "r", Body: []byte("x")}, world.PublishOptions{}); err != nil || dup {
		t.Fatalf("Publish: dup %v, %v", dup, err)
	}
	if dup, err := w.Publish(ctx, world.Message{ID: "m", Run: "r", Body: []byte("x")}, world.PublishOptions{}); err != nil || !dup {
		t.Fatalf("Publish again: dup %v, %v; want a duplicate", dup, err)
	}
	attempts := make(chan int, 4)
	sub, err := w.Consume(ctx, world.ConsumeOptions{Concurrency: 4}, func(_ context.Context, d world.Delivery) error {
		attempts <- d.Attempt
		if d.Attempt == 1 {
			return errors.New("fail the first delivery")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= 2; want++ {
		select {
		case got := <-attempts:
			if got != want {
				t.Fatalf("delivery %d: attempt %d", want, got)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no delivery %d within 5s", want)
		}
	}
	if err := sub.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-attempts:
		t.Fatalf("a delivery after the ack: attempt %d", a)
	default:
	}

	schema := w.Schema()
	closed = true
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	check, err := pgworld.New(ctx, pgworld.Config{URL: floorURL})
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	var n int
	if err := check.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil || n != 0 {
		t.Fatalf("schema %s after Close: %d, %v", schema, n, err)
	}
}
