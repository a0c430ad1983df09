// Package rawpg is the floor of the PostgreSQL world: a world.World whose
// every call is the one raw SQL statement the PostgreSQL world builds on,
// issued directly with pgx (the same driver and pool size) on a server of
// the same configuration, and nothing else — no entity rules, no run row
// to lock and update, no per-run positions, no batching, no table of every
// message id ever published.
//
//	CreateRun  INSERT INTO runs and the run_created event, one statement (the world's own)
//	GetRun     SELECT of the run's row by its primary key
//	Append     INSERT INTO events ... ON CONFLICT (run, id) DO NOTHING: the unique key is the idempotency key
//	Load       SELECT of the run's events, a range of the primary key (run, seq)
//	Publish    INSERT INTO queue ... ON CONFLICT (id) DO NOTHING and pg_notify, one statement
//	Consume    LISTEN; claim: UPDATE ... FOR UPDATE SKIP LOCKED RETURNING; ack: DELETE;
//	           failure: visible again at once and a NOTIFY
//
// Appends to one run are not serialized: without the entity rules nothing
// needs the run's state, so PostgreSQL runs them concurrently and an
// identity column orders them (where the world takes the run row's lock and
// batches the appends that queue behind it). The pending count is kept in
// memory: steps created and not completed, as of the append. Hooks and
// streams are not part of the floor and fail with ErrNotFound.
package rawpg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/durabench/durabench/internal/bench/floor"
	"github.com/durabench/durabench/world"
	pgworld "github.com/durabench/durabench/world/postgres"
)

// safetyPoll is how long a consumer sleeps at most without a notification
// or a freed slot: nothing in the floor's use needs it (every publish and
// failure notifies), it only bounds a lost notification.
const safetyPoll = time.Second

// schemaDDL is the floor's tables; {S} is the schema's quoted name.
const schemaDDL = `
CREATE SCHEMA {S};
CREATE TABLE {S}.runs (id text PRIMARY KEY, input bytea);
CREATE TABLE {S}.events (
	seq    bigint GENERATED ALWAYS AS IDENTITY,
	run    text NOT NULL,
	kind   smallint NOT NULL,
	id     text,
	entity text NOT NULL,
	data   bytea,
	PRIMARY KEY (run, seq),
	UNIQUE (run, id)
);
CREATE TABLE {S}.queue (
	seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id         text UNIQUE,
	run        text NOT NULL,
	body       bytea,
	attempt    int NOT NULL DEFAULT 0,
	visible_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON {S}.queue (visible_at, seq);
`

// Config configures the floor. Zero values mean defaults.
type Config struct {
	// URL of the server; required (a benchmark starts one with pgserver,
	// configured as the world's).
	URL string
	// Schema holds the floor's tables and names its NOTIFY channel; it is
	// created by New and dropped by Close. Default: "rawpg_" and 8 random
	// hex digits.
	Schema string
	// VisibilityTimeout of a claimed message (default
	// world.DefaultVisibilityTimeout).
	VisibilityTimeout time.Duration
	// MaxConns is the pool's size (default pgworld.DefaultMaxConns, the
	// world's).
	MaxConns int
}

// World is the raw SQL floor. Its zero value is not usable; call New.
type World struct {
	floor.Unmeasured // hooks and streams

	schema string
	vt     time.Duration
	q      queries
	pool   *pgxpool.Pool
	rt     *world.Real

	bg     context.Context
	stopBg context.CancelFunc
	bgDone sync.WaitGroup

	mu   sync.Mutex
	subs map[*subscription]struct{}
	runs map[string]*run
}

// run is what the floor remembers of a run to answer an append: the
// positions of the events with an id (for duplicates) and its steps.
type run struct {
	mu  sync.Mutex
	ids map[string]int64
	// steps: 1 created, 2 completed (or failed), 3 both; pending counts
	// the steps created and not completed. Without the entity rules a
	// step's completion may come before its creation; counting steps, not
	// events, makes the last completion see 0 whatever the order.
	steps   map[string]uint8
	pending int
}

// queries are the floor's statements, its schema and channel filled in.
type queries struct {
	createRun, getRun, append, load string
	publish, claim, ack, nak        string
}

var _ world.World = (*World)(nil)

// New connects to the server at cfg.URL, creates the floor's schema and
// listens on its channel.
func New(ctx context.Context, cfg Config) (*World, error) {
	if cfg.URL == "" {
		return nil, errors.New("rawpg: no server URL")
	}
	if cfg.Schema == "" {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		cfg.Schema = "rawpg_" + hex.EncodeToString(b[:])
	}
	if cfg.VisibilityTimeout <= 0 {
		cfg.VisibilityTimeout = world.DefaultVisibilityTimeout
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = pgworld.DefaultMaxConns
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("rawpg: %w", err)
	}
	pc.MaxConns = int32(cfg.MaxConns)
	w := &World{Unmeasured: floor.Unmeasured{Name: "rawpg"}, schema: cfg.Schema, vt: cfg.VisibilityTimeout, rt: world.NewReal(),
		q: newQueries(cfg.Schema), subs: make(map[*subscription]struct{}), runs: make(map[string]*run)}
	if w.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, fmt.Errorf("rawpg: %w", err)
	}
	if _, err := w.pool.Exec(ctx, strings.ReplaceAll(schemaDDL, "{S}", pgx.Identifier{cfg.Schema}.Sanitize())); err != nil {
		w.pool.Close()
		return nil, fmt.Errorf("rawpg: create schema %s: %w", cfg.Schema, err)
	}
	l, err := pgx.ConnectConfig(ctx, pc.ConnConfig.Copy())
	if err == nil {
		_, err = l.Exec(ctx, "LISTEN "+pgx.Identifier{cfg.Schema}.Sanitize())
	}
	if err != nil {
		w.drop()
		w.pool.Close()
		return nil, fmt.Errorf("rawpg: listen: %w", err)
	}
	w.bg, w.stopBg = context.WithCancel(context.Background())
	w.bgDone.Add(1)
	go w.listen(l)
	return w, nil
}

func newQueries(schema string) queries {
	r := strings.NewReplacer("{S}", pgx.Identifier{schema}.Sanitize(), "{CH}", "'"+schema+"'")
	return queries{
		createRun: r.Replace(`WITH r AS (INSERT INTO {S}.runs (id, input) VALUES ($1, $2) RETURNING id)
INSERT INTO {S}.events (run, kind, entity) SELECT id, 1, '' FROM r`),
		getRun: r.Replace(`SELECT input FROM {S}.runs WHERE id = $1`),
		append: r.Replace(`INSERT INTO {S}.events (run, kind, id, entity, data) VALUES ($1, $2, nullif($3, ''), $4, $5)
ON CONFLICT (run, id) DO NOTHING RETURNING seq`),
		load: r.Replace(`SELECT kind, coalesce(id, ''), entity, data FROM {S}.events WHERE run = $1 ORDER BY seq`),
		publish: r.Replace(`WITH q AS (
	INSERT INTO {S}.queue (id, run, body) VALUES (nullif($1, ''), $2, $3) ON CONFLICT (id) DO NOTHING RETURNING 1)
SELECT 1 FROM q, (SELECT pg_notify({CH}, 'q') WHERE EXISTS (SELECT 1 FROM q)) n`),
		claim: r.Replace(`UPDATE {S}.queue q SET attempt = q.attempt + 1, visible_at = now() + $2::bigint * interval '1 microsecond'
FROM (SELECT seq FROM {S}.queue WHERE visible_at <= now() ORDER BY visible_at, seq LIMIT $1 FOR UPDATE SKIP LOCKED) c
WHERE q.seq = c.seq RETURNING q.seq, q.run, q.body, q.attempt`),
		ack: r.Replace(`DELETE FROM {S}.queue WHERE seq = $1`),
		nak: r.Replace(`WITH u AS (UPDATE {S}.queue SET visible_at = now() WHERE seq = $1 RETURNING 1)
SELECT pg_notify({CH}, 'q') FROM u`),
	}
}

// Name returns "rawpg".
func (w *World) Name() string { return "rawpg" }

// Capabilities: no guard, redelivery, the configured visibility timeout.
func (w *World) Capabilities() world.Capabilities {
	return world.Capabilities{RetryStyle: world.Redeliver, VisibilityTimeout: w.vt}
}

// Runtime is the real clock and goroutines.
func (w *World) Runtime() world.Runtime { return w.rt }

// Schema is the floor's schema (and channel) name.
func (w *World) Schema() string { return w.schema }

// Close stops the consumers, drops the schema and closes the connections.
func (w *World) Close() error {
	w.mu.Lock()
	subs := make([]*subscription, 0, len(w.subs))
	for s := range w.subs {
		subs = append(subs, s)
	}
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range subs {
		_ = s.Stop(ctx)
	}
	w.stopBg()
	w.bgDone.Wait()
	err := w.drop()
	w.pool.Close()
	return err
}

func (w *World) drop() error {
	_, err := w.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{w.schema}.Sanitize()+" CASCADE")
	return err
}

// listen wakes every consumer on each notification of the channel.
func (w *World) listen(c *pgx.Conn) {
	defer w.bgDone.Done()
	defer c.Close(context.Background())
	for {
		if _, err := c.WaitForNotification(w.bg); err != nil {
			return // closed (the floor does not survive a lost connection)
		}
		w.mu.Lock()
		for s := range w.subs {
			s.notify()
		}
		w.mu.Unlock()
	}
}

func (w *World) run(id string) *run {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.runs[id]
	if r == nil {
		r = &run{ids: make(map[string]int64), steps: make(map[string]uint8)}
		w.runs[id] = r
	}
	return r
}

// CreateRun inserts the run and its run_created event in one statement.
func (w *World) CreateRun(ctx context.Context, r world.Run) error {
	if _, err := w.pool.Exec(ctx, w.q.createRun, r.ID, r.Input); err != nil {
		return fmt.Errorf("rawpg: create run %s: %w", r.ID, err)
	}
	return nil
}

// GetRun selects the run's row.
func (w *World) GetRun(ctx context.Context, id string) (world.Run, error) {
	var input []byte
	err := w.pool.QueryRow(ctx, w.q.getRun, id).Scan(&input)
	if errors.Is(err, pgx.ErrNoRows) {
		return world.Run{}, fmt.Errorf("rawpg: run %q: %w", id, world.ErrNotFound)
	}
	if err != nil {
		return world.Run{}, fmt.Errorf("rawpg: get run %s: %w", id, err)
	}
	return world.Run{ID: id, Input: input, Status: world.StatusRunning}, nil
}

// ListRuns is not part of the floor.
func (w *World) ListRuns(context.Context) ([]string, error) { return nil, nil }

// Append inserts the event; an event whose id the run already has inserts
// nothing and is reported as a duplicate. The precondition is ignored (the
// floor declares no guard).
func (w *World) Append(ctx context.Context, runID string, ev world.Event, _ world.Precondition) (world.AppendResult, error) {
	var seq int64
	err := w.pool.QueryRow(ctx, w.q.append, runID, int16(ev.Kind), ev.ID, ev.Entity, ev.Data).Scan(&seq)
	dup := errors.Is(err, pgx.ErrNoRows)
	if err != nil && !dup {
		return world.AppendResult{}, fmt.Errorf("rawpg: append %s to run %s: %w", ev.Kind, runID, err)
	}
	r := w.run(runID)
	r.mu.Lock()
	defer r.mu.Unlock()
	if dup {
		return world.AppendResult{Pos: r.ids[ev.ID], Duplicate: true, Pending: r.pending}, nil
	}
	if ev.ID != "" {
		r.ids[ev.ID] = seq
	}
	old := r.steps[ev.Entity]
	switch ev.Kind {
	case world.StepCreated:
		r.steps[ev.Entity] = old | 1
		if old == 0 {
			r.pending++
		}
	case world.StepCompleted, world.StepFailed:
		r.steps[ev.Entity] = old | 2
		if old == 1 {
			r.pending--
		}
	}
	return world.AppendResult{Pos: seq, Pending: r.pending}, nil
}

// Load selects the run's events in order.
func (w *World) Load(ctx context.Context, runID string) ([]world.Event, error) {
	rows, err := w.pool.Query(ctx, w.q.load, runID)
	if err != nil {
		return nil, fmt.Errorf("rawpg: load %s: %w", runID, err)
	}
	defer rows.Close()
	var evs []world.Event
	for rows.Next() {
		ev := world.Event{Pos: int64(len(evs) + 1)}
		var kind int16
		if err := rows.Scan(&kind, &ev.ID, &ev.Entity, &ev.Data); err != nil {
			return nil, fmt.Errorf("rawpg: load %s: %w", runID, err)
		}
		ev.Kind = world.EventKind(kind)
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rawpg: load %s: %w", runID, err)
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("rawpg: load %q: %w", runID, world.ErrNotFound)
	}
	return evs, nil
}

// Publish inserts the message and notifies the consumers, in one
// statement; a message whose id is in the queue already is a duplicate.
// Delays are not part of the floor.
func (w *World) Publish(ctx context.Context, msg world.Message, _ world.PublishOptions) (bool, error) {
	var one int
	err := w.pool.QueryRow(ctx, w.q.publish, msg.ID, msg.Run, msg.Body).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("rawpg: publish %s: %w", msg.ID, err)
	}
	return false, nil
}

// Consume starts a consumer: it claims up to opt.Concurrency messages at a
// time and runs each handler on its own goroutine; a handler's success
// deletes the message, its failure makes it visible again at once.
func (w *World) Consume(ctx context.Context, opt world.ConsumeOptions, h world.Handler) (world.Subscription, error) {
	s := &subscription{w: w, h: h, conc: max(opt.Concurrency, 1), ctx: context.WithoutCancel(ctx),
		poke: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	w.mu.Lock()
	w.subs[s] = struct{}{}
	w.mu.Unlock()
	go s.run()
	return s, nil
}

type subscription struct {
	w    *World
	h    world.Handler
	conc int
	ctx  context.Context

	running atomic.Int32
	// more: the queue may hold visible messages the last claim did not
	// take (it was full, or a notification came since); a handler that
	// frees its slot then pokes the claimer.
	more atomic.Bool
	poke chan struct{}

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
	handlers sync.WaitGroup
}

func (s *subscription) notify() {
	s.more.Store(true)
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// run claims while slots are free and the queue may have messages, then
// sleeps until a notification, a freed slot or the safety poll.
func (s *subscription) run() {
	defer close(s.done)
	for {
		for free := s.conc - int(s.running.Load()); free > 0; free = s.conc - int(s.running.Load()) {
			s.more.Store(false)
			n, err := s.claim(free)
			if err != nil || n < free {
				break
			}
			s.more.Store(true)
		}
		select {
		case <-s.poke:
		case <-time.After(safetyPoll):
		case <-s.stop:
			return
		}
	}
}

// claim takes up to n visible messages and starts their handlers.
func (s *subscription) claim(n int) (int, error) {
	w := s.w
	rows, err := w.pool.Query(w.bg, w.q.claim, n, w.vt.Microseconds())
	if err != nil {
		return 0, err
	}
	var ds []delivery
	for rows.Next() {
		var d delivery
		var attempt int32
		if err := rows.Scan(&d.seq, &d.Run, &d.Body, &attempt); err != nil {
			rows.Close()
			return 0, err
		}
		d.Attempt = int(attempt)
		ds = append(ds, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, d := range ds {
		s.running.Add(1)
		s.handlers.Add(1)
		go func() {
			defer s.handlers.Done()
			q := w.q.ack
			if s.h(s.ctx, d.Delivery) != nil {
				q = w.q.nak
			}
			_, _ = w.pool.Exec(w.bg, q, d.seq)
			s.running.Add(-1)
			if s.more.Load() {
				select {
				case s.poke <- struct{}{}:
				default:
				}
			}
		}()
	}
	return len(ds), nil
}

type delivery struct {
	world.Delivery
	seq int64
}

// Stop stops claiming and waits for running handlers.
func (s *subscription) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stop) })
	finished := make(chan struct{})
	go func() {
		<-s.done
		s.handlers.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.w.mu.Lock()
	delete(s.w.subs, s)
	s.w.mu.Unlock()
	return nil
}
