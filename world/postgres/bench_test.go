package pgworld_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/durabench/durabench/world"
	pgworld "github.com/durabench/durabench/world/postgres"
)

// The benchmarks below put each world operation next to the raw pgx
// statement it wraps, on the package's throwaway server (fsync on). Every
// iteration runs the raw statement and then the world operation on the
// same pool, timing each, so machine noise hits both alike; each benchmark
// reports raw-ns/op, world-ns/op and their ratio world/raw (ns/op is their
// sum). The raw side lives in a schema of its own next to the world's.

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

// report reports per operation; n operations ran on each side.
func (p *pair) report(b *testing.B, n int) {
	raw := float64(p.raw.Nanoseconds()) / float64(n)
	wrapped := float64(p.world.Nanoseconds()) / float64(n)
	b.ReportMetric(raw, "raw-ns/op")
	b.ReportMetric(wrapped, "world-ns/op")
	if raw > 0 {
		b.ReportMetric(wrapped/raw, "world/raw")
	}
}

// rawSchema is the raw side's tables: a log whose primary key is the
// guard, a queue whose primary key is the idempotency key.
const rawSchema = `
CREATE SCHEMA %[1]s;
CREATE TABLE %[1]s.events (run text, pos bigint, kind smallint, data bytea, PRIMARY KEY (run, pos));
CREATE TABLE %[1]s.fan (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, run text, kind smallint, data bytea);
CREATE TABLE %[1]s.queue (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id text UNIQUE, body bytea);
`

// bench is a world and, beside it, the raw schema (named sch in the SQL).
type bench struct {
	w    *pgworld.World
	pool *pgxpool.Pool
	raw  string // the raw schema, quoted
}

func newBench(b *testing.B, opts world.Options) *bench {
	return newBenchConfig(b, pgworld.Config{Options: opts})
}

func newBenchConfig(b *testing.B, cfg pgworld.Config) *bench {
	b.Helper()
	ctx := context.Background()
	cfg.URL = needServer(b)
	w, err := pgworld.New(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	raw := pgx.Identifier{"raw_" + w.Schema()}.Sanitize()
	if _, err := w.Pool().Exec(ctx, fmt.Sprintf(rawSchema, raw)); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = w.Pool().Exec(context.Background(), "DROP SCHEMA "+raw+" CASCADE")
		_ = w.Close()
	})
	return &bench{w: w, pool: w.Pool(), raw: raw}
}

func (x *bench) sql(s string) string { return fmt.Sprintf(s, x.raw) }

// BenchmarkPGPublish: Queue.Publish (the id into published, the message
// into queue, a NOTIFY, in one statement) vs an INSERT into a queue table
// whose unique id is the idempotency key.
func BenchmarkPGPublish(b *testing.B) {
	ctx := context.Background()
	x := newBench(b, world.Options{})
	ins := x.sql(`INSERT INTO %s.queue (id, body) VALUES ($1, $2)`)
	var p pair
	b.ResetTimer()
	for i := range b.N {
		id := strconv.Itoa(i)
		err := p.time(func() error {
			_, err := x.pool.Exec(ctx, ins, id, []byte("body"))
			return err
		}, func() error {
			_, err := x.w.Publish(ctx, world.Message{ID: id, Run: "r", Body: []byte("body")}, world.PublishOptions{})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	p.report(b, b.N)
}

// BenchmarkPGGuardedAppend: Log.Append under the guard (every entity rule,
// the position and the pending count in the append function) vs an INSERT
// at the next position, whose primary key (run, pos) is the guard.
func BenchmarkPGGuardedAppend(b *testing.B) {
	ctx := context.Background()
	x := newBench(b, world.Options{Guard: true})
	if err := x.w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		b.Fatal(err)
	}
	res, err := x.w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: "s"}, world.Precondition{})
	if err != nil {
		b.Fatal(err)
	}
	ins := x.sql(`INSERT INTO %s.events (run, pos, kind, data) VALUES ('r', $1, 9, $2)`)
	pos, rawPos := res.Pos, int64(0)
	var p pair
	b.ResetTimer()
	for range b.N {
		err := p.time(func() error {
			rawPos++
			_, err := x.pool.Exec(ctx, ins, rawPos, []byte("event-data"))
			return err
		}, func() error {
			res, err := x.w.Append(ctx, "r", world.Event{Kind: world.StepRetrying, Entity: "s", Data: []byte("event-data")},
				world.Precondition{Guarded: true, LastPos: pos})
			pos = res.Pos
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	p.report(b, b.N)
}

// BenchmarkPGLoad: Log.Load of a 256-event log vs the SELECT of 256 rows
// of a (run, pos) primary key.
func BenchmarkPGLoad(b *testing.B) {
	ctx := context.Background()
	x := newBench(b, world.Options{})
	if err := x.w.CreateRun(ctx, world.Run{ID: "r"}); err != nil {
		b.Fatal(err)
	}
	for i := 2; i <= 256; i++ {
		if _, err := x.w.Append(ctx, "r", world.Event{Kind: world.StepCreated, Entity: strconv.Itoa(i), ID: "c" + strconv.Itoa(i), Data: []byte("event-data")}, world.Precondition{}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := x.pool.Exec(ctx, x.sql(`INSERT INTO %s.events SELECT 'r', g, 5, 'event-data' FROM generate_series(1, 256) g`)); err != nil {
		b.Fatal(err)
	}
	sel := x.sql(`SELECT pos, kind, data FROM %s.events WHERE run = 'r' ORDER BY pos`)
	var p pair
	b.ResetTimer()
	for range b.N {
		err := p.time(func() error {
			rows, err := x.pool.Query(ctx, sel)
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				var pos int64
				var kind int16
				var data []byte
				if err := rows.Scan(&pos, &kind, &data); err != nil {
					return err
				}
				n++
			}
			if err := rows.Err(); err != nil || n != 256 {
				return fmt.Errorf("read %d rows: %v", n, err)
			}
			return nil
		}, func() error {
			evs, err := x.w.Load(ctx, "r")
			if err == nil && len(evs) != 256 {
				err = fmt.Errorf("loaded %d events", len(evs))
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	p.report(b, b.N)
}

// BenchmarkPGPublishConsume: one message's trip from Publish to a running
// Consume handler (claimed, then acknowledged), vs an INSERT with a NOTIFY
// whose listener takes the row with DELETE ... FOR UPDATE SKIP LOCKED.
func BenchmarkPGPublishConsume(b *testing.B) {
	ctx := context.Background()
	x := newBench(b, world.Options{})
	channel := "raw_" + x.w.Schema()
	lc, err := x.pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	listener := lc.Hijack()
	defer listener.Close(ctx)
	if _, err := listener.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		b.Fatal(err)
	}
	take := x.sql(`DELETE FROM %[1]s.queue WHERE seq = (
		SELECT seq FROM %[1]s.queue ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id, body`)
	rawGot := make(chan error, 1)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for {
			if _, err := listener.WaitForNotification(lctx); err != nil {
				return
			}
			var id string
			var body []byte
			rawGot <- x.pool.QueryRow(ctx, take).Scan(&id, &body)
		}
	}()
	ins := x.sql(`WITH q AS (INSERT INTO %s.queue (id, body) VALUES ($1, $2) RETURNING seq) SELECT pg_notify($3, '') FROM q`)
	worldGot := make(chan struct{}, 1)
	sub, err := x.w.Consume(ctx, world.ConsumeOptions{Concurrency: 16}, func(context.Context, world.Delivery) error {
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
			if _, err := x.pool.Exec(ctx, ins, id, []byte("body"), channel); err != nil {
				return err
			}
			return <-rawGot
		}, func() error {
			if _, err := x.w.Publish(ctx, world.Message{ID: id, Body: []byte("body")}, world.PublishOptions{}); err != nil {
				return err
			}
			<-worldGot
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	p.report(b, b.N)
}

// BenchmarkPGFanOutAppends: 256 concurrent appends to one run (a
// 256-branch fan-out's step_created burst; the world batches the appends
// that queue behind the one in flight) vs 256 concurrent INSERTs into a
// table without per-run rules (what PostgreSQL does without them). Per
// append.
func BenchmarkPGFanOutAppends(b *testing.B) { fanOutAppends(b, false) }

// BenchmarkPGFanOutAppendsUnbatched: the same with every append in its own
// statement (Config.Unbatched): each waits for the run row's lock, and the
// commit flush of the one before it.
func BenchmarkPGFanOutAppendsUnbatched(b *testing.B) { fanOutAppends(b, true) }

func fanOutAppends(b *testing.B, unbatched bool) {
	const branches = 256
	ctx := context.Background()
	x := newBenchConfig(b, pgworld.Config{Unbatched: unbatched})
	ins := x.sql(`INSERT INTO %s.fan (run, kind, data) VALUES ($1, 5, $2)`)
	var p pair
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i += branches {
		run := "r" + strconv.Itoa(i)
		if err := x.w.CreateRun(ctx, world.Run{ID: run}); err != nil {
			b.Fatal(err)
		}
		burst := func(one func(j int) error) error {
			errs := make(chan error, branches)
			for j := range branches {
				go func() { errs <- one(j) }()
			}
			for range branches {
				if err := <-errs; err != nil {
					return err
				}
			}
			return nil
		}
		err := p.time(func() error {
			return burst(func(int) error {
				_, err := x.pool.Exec(ctx, ins, run, []byte("event-data"))
				return err
			})
		}, func() error {
			return burst(func(j int) error {
				step := strconv.Itoa(j)
				_, err := x.w.Append(ctx, run, world.Event{Kind: world.StepCreated, ID: "c" + step, Entity: step, Data: []byte("event-data")}, world.Precondition{})
				return err
			})
		})
		if err != nil {
			b.Fatal(err)
		}
		n += branches
	}
	p.report(b, n)
}
