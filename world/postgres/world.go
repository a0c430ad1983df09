// Package pgworld is the PostgreSQL world: the engine's runs, event logs,
// queue, hooks and streams in tables of a PostgreSQL database, as the
// durable engines that keep their state in PostgreSQL do (DBOS, Hatchet,
// River-based ones, the reference SDK's world-postgres).
//
// A world lives in its own schema (Config.Schema, the sweep's per-cell
// prefix), created by New and dropped by Close unless Config.Keep:
//
//	runs       one row per run: status, last_pos (the log's position), pending steps
//	events     the per-run log, PRIMARY KEY (run, pos), UNIQUE (run, id)
//	steps      step entities (run, id, done); hooks: token -> run, unique across runs
//	queue      one row per message: attempt, failures, visible_at
//	published  every message id ever published (the idempotency key)
//	streams    name, next index, closed; chunks: (stream, idx) -> data
//
// Every rule of world.Log is checked in the database by one function call
// per append, under the run row's lock for that statement only: durabench
// holds no lock. A broken rule raises an SQLSTATE that maps to a typed
// error (see errors.go). The queue is claimed with FOR UPDATE SKIP LOCKED;
// consumers sleep until a NOTIFY on the world's channel (a publish, a
// retry), the moment the next delayed or unacknowledged message becomes
// visible, or a slow safety poll. Streams' readers wake on a NOTIFY too.
//
// A call made while the server does not answer fails at once with
// ErrConnectionLost (world.ErrTransient); so do the calls in flight when
// the connection drops.
package pgworld

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/durabench/durabench/world"
)

// Defaults of Config.
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultMaxConns       = 32
)

// acksInFlight is how many ack statements may be in flight at once before
// acks batch; each has a connection of its own, outside the pool of
// Config.MaxConns.
const acksInFlight = 2

// opTimeout bounds every world call whose context has no deadline, so a
// server that stops answering makes calls fail with a typed error instead
// of hanging.
const opTimeout = 10 * time.Second

// publishesInFlight is how many publish statements may be in flight at
// once before publishes batch.
const publishesInFlight = 4

// safetyPoll is how long a consumer sleeps at most without a
// notification: it catches a message whose claim was rolled back (a
// consumer that lost its connection mid-claim) and notifications lost
// while the listening connection was down.
const safetyPoll = 2 * time.Second

// Config configures a PostgreSQL world. Zero values mean defaults.
type Config struct {
	// Options are the settings every world accepts.
	Options world.Options
	// URL of the server (postgres://user:password@host:port/db?...).
	// Required: package pgserver starts a throwaway server for callers
	// that have none.
	URL string
	// Schema names the world's schema and its NOTIFY channel; it must match
	// [a-z0-9_]+ after lowercasing and '-' -> '_'. Default: "durabench_"
	// and 8 random hex digits, so two sweeps, or the leftovers of a crashed
	// one, never mix.
	Schema string
	// Keep leaves the schema in place on Close.
	Keep bool
	// MaxConns is the connection pool's size (default 32); acks have
	// acksInFlight connections of their own besides.
	MaxConns int
	// ConnectTimeout bounds connecting (default 5 s).
	ConnectTimeout time.Duration
	// Unbatched sends every append and every publish in its own
	// statement, instead of batching those that arrive while one is in
	// flight (see World.Append and World.Publish): for comparison.
	Unbatched bool
}

var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func (c Config) withDefaults() (Config, error) {
	c.Options = c.Options.WithDefaults()
	if c.URL == "" {
		return c, errors.New("pgworld: no server URL")
	}
	if c.Schema == "" {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return c, fmt.Errorf("pgworld: random schema: %w", err)
		}
		c.Schema = "durabench_" + hex.EncodeToString(b[:])
	}
	c.Schema = strings.ReplaceAll(strings.ToLower(c.Schema), "-", "_")
	if !schemaRE.MatchString(c.Schema) {
		return c, fmt.Errorf("pgworld: schema %q: must match [a-z_][a-z0-9_]* (at most 63 characters)", c.Schema)
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	switch c.Options.RetryStyle {
	case world.Redeliver, world.Fresh:
	default:
		return c, fmt.Errorf("pgworld: retry style %q: must be %q or %q", c.Options.RetryStyle, world.Redeliver, world.Fresh)
	}
	return c, nil
}

// World is the PostgreSQL world. It is safe for concurrent use.
type World struct {
	cfg  Config
	rt   *world.Real
	caps world.Capabilities
	q    queries
	pool *pgxpool.Pool
	// ackPool holds the connections reserved for acks (acksInFlight):
	// an ack never waits behind the pool's other statements, nor for a
	// connection to be dialed while a burst holds them all.
	ackPool *pgxpool.Pool

	incidents incidents

	// bg is cancelled by Close: it ends the listener and the connection
	// watcher.
	bg     context.Context
	stopBg context.CancelFunc
	bgDone sync.WaitGroup

	// conn is cancelled while the server does not answer (see callCtx).
	connMu   sync.Mutex
	conn     context.Context
	connDown context.CancelCauseFunc
	down     atomic.Bool
	watching atomic.Bool // a watcher checks the server

	// appends batches the appends to a run, publishes all publishes, acks
	// all acks (see World.Append, World.Publish, World.settle).
	appends   *coalescer[*appendReq]
	publishes *coalescer[*publishReq]
	acks      *coalescer[*ackReq]

	mu      sync.Mutex
	closed  bool
	subs    map[*subscription]struct{}
	readers map[string]map[chan struct{}]struct{} // stream -> waiting readers
}

var _ world.World = (*World)(nil)
var _ world.IncidentCounter = (*World)(nil)

// New connects to the server, creates the world's schema (idempotently:
// a second world with the same schema shares it) and starts listening on
// its channel.
func New(ctx context.Context, cfg Config) (*World, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("pgworld: URL %s: %w", redactURL(cfg.URL), err)
	}
	pc.MaxConns = int32(cfg.MaxConns)
	pc.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	pc.ConnConfig.RuntimeParams["application_name"] = "durabench " + cfg.Schema // which world a backend serves, in pg_stat_activity
	w := &World{
		cfg: cfg,
		rt:  world.NewReal(),
		caps: world.Capabilities{
			Guard:             cfg.Options.Guard,
			RetryStyle:        cfg.Options.RetryStyle,
			VisibilityTimeout: cfg.Options.VisibilityTimeout,
		},
		q:       newQueries(cfg.Schema, cfg.Schema, cfg.Options.VisibilityTimeout.Microseconds()),
		subs:    make(map[*subscription]struct{}),
		readers: make(map[string]map[chan struct{}]struct{}),
	}
	// One batch of a run's appends at a time: the run row's lock would
	// order them anyway. Publishes are not ordered by a row, only their
	// commits by NOTIFY's lock: a few overlap.
	w.appends = newCoalescer(maxBatch, 1, w.appendBatch)
	w.publishes = newCoalescer(maxBatch, publishesInFlight, w.publishBatch)
	w.acks = newCoalescer(maxBatch, acksInFlight, w.ackBatch)
	w.bg, w.stopBg = context.WithCancel(context.Background())
	w.conn, w.connDown = context.WithCancelCause(context.Background())
	if w.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, fmt.Errorf("pgworld: %s: %w", redactURL(cfg.URL), err)
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	if err := w.pool.Ping(cctx); err != nil {
		w.pool.Close()
		w.stopBg()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("pgworld: connect to %s: %w", redactURL(cfg.URL), ctx.Err())
		}
		// pgx says the same thing for each address and TLS mode it tried:
		// the network's own error is enough.
		var oe *net.OpError
		if errors.As(err, &oe) {
			err = oe
		}
		return nil, fmt.Errorf("pgworld: connect to %s: %w: %w", redactURL(cfg.URL), ErrUnreachable, err)
	}
	if err := w.setup(cctx); err != nil {
		w.pool.Close()
		w.stopBg()
		return nil, err
	}
	ac := pc.Copy()
	ac.MaxConns, ac.MinConns = acksInFlight, acksInFlight // dialed now, in the background
	if w.ackPool, err = pgxpool.NewWithConfig(ctx, ac); err != nil {
		w.pool.Close()
		w.stopBg()
		return nil, fmt.Errorf("pgworld: %s: %w", redactURL(cfg.URL), err)
	}
	l, err := w.listen(cctx)
	if err != nil {
		w.closePools()
		w.stopBg()
		return nil, fmt.Errorf("pgworld: listen on %s: %w", cfg.Schema, mapErr("listen", err, false))
	}
	w.bgDone.Add(1)
	go w.listenLoop(l)
	return w, nil
}

// setup creates the schema; two worlds creating the same one at once may
// collide on the catalog's keys, so it tries again once.
func (w *World) setup(ctx context.Context) error {
	var err error
	for range 2 {
		if _, err = w.pool.Exec(ctx, w.q.ddl); err == nil || !(isCode(err, "23505") || isCode(err, "42P07") || isCode(err, "XX000")) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("pgworld: create schema %s on %s: %w", w.cfg.Schema, redactURL(w.cfg.URL), mapErr("setup", err, false))
	}
	return nil
}

// redactURL hides a password in u for messages.
func redactURL(u string) string {
	pu, err := url.Parse(u)
	if err != nil || pu.User == nil {
		return u
	}
	return pu.Redacted()
}

// Name returns "postgres".
func (w *World) Name() string { return "postgres" }

// Capabilities declares the guard, retry style and visibility timeout.
func (w *World) Capabilities() world.Capabilities { return w.caps }

// Runtime is the real clock and goroutines.
func (w *World) Runtime() world.Runtime { return w.rt }

// Schema is the world's schema (and NOTIFY channel) name.
func (w *World) Schema() string { return w.cfg.Schema }

// Pool is the world's connection pool (for benchmarks that put a raw
// statement next to a world call).
func (w *World) Pool() *pgxpool.Pool { return w.pool }

// Close stops consumers and stream readers, drops the schema unless
// Config.Keep, and closes the connections.
func (w *World) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	subs := make([]*subscription, 0, len(w.subs))
	for s := range w.subs {
		subs = append(subs, s)
	}
	for _, rs := range w.readers {
		for ch := range rs {
			wake(ch)
		}
	}
	w.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range subs {
		s.cancel()
		_ = s.Stop(ctx)
	}
	w.stopBg()
	w.bgDone.Wait()
	var err error
	if !w.cfg.Keep && !w.down.Load() {
		if _, derr := w.pool.Exec(ctx, w.q.drop); derr != nil {
			err = fmt.Errorf("pgworld: drop schema %s: %w", w.cfg.Schema, derr)
		}
	}
	w.closePools()
	return err
}

func (w *World) closePools() {
	w.pool.Close()
	w.ackPool.Close()
}

func (w *World) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// check fails a call at once after Close (ErrClosed) and while the server
// does not answer (ErrConnectionLost).
func (w *World) check(op string) error {
	if w.isClosed() {
		return fmt.Errorf("pgworld: %s: %w", op, world.ErrClosed)
	}
	if w.down.Load() {
		return fmt.Errorf("pgworld: %s: %w (the server does not answer)", op, ErrConnectionLost)
	}
	return nil
}

// callCtx bounds ctx by opTimeout when it has no deadline, and cancels it
// when the server is found gone, so calls in flight fail at once.
func (w *World) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	cancelTimeout := context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok {
		ctx, cancelTimeout = context.WithTimeout(ctx, opTimeout)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	w.connMu.Lock()
	conn := w.conn
	w.connMu.Unlock()
	stop := context.AfterFunc(conn, func() { cancel(ErrConnectionLost) })
	return ctx, func() { stop(); cancel(nil); cancelTimeout() }
}

// err maps err of a call made with ctx for op (see mapErr), counts it
// among the incidents, and has the server checked when the connection
// broke.
func (w *World) err(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	closed := w.isClosed()
	if !closed && errors.Is(context.Cause(ctx), ErrConnectionLost) && !errors.Is(err, ErrConnectionLost) {
		err = fmt.Errorf("pgworld: %s: %w (%w)", op, ErrConnectionLost, err)
	} else {
		err = mapErr(op, err, closed)
	}
	if closed || errors.Is(err, context.Canceled) {
		return err
	}
	if errors.Is(err, ErrConnectionLost) {
		w.suspect()
	}
	w.count(err)
	return err
}

// suspect starts a watcher, unless one runs, that checks with a fresh
// connection whether the server answers. When it does not, the world is
// down: calls fail at once and calls in flight are cancelled, until the
// watcher reaches the server again.
func (w *World) suspect() {
	if !w.watching.CompareAndSwap(false, true) {
		return
	}
	w.bgDone.Add(1)
	go func() {
		defer w.bgDone.Done()
		defer w.watching.Store(false)
		if w.ping() == nil {
			return // one connection broke; the server answers
		}
		w.setDown()
		for {
			select {
			case <-w.bg.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
			if w.ping() == nil {
				w.setUp()
				return
			}
		}
	}()
}

// ping connects afresh (the pool's connections may all be dead) and closes
// the connection.
func (w *World) ping() error {
	ctx, cancel := context.WithTimeout(w.bg, min(w.cfg.ConnectTimeout, 2*time.Second))
	defer cancel()
	c, err := pgconn.ConnectConfig(ctx, w.pool.Config().ConnConfig.Config.Copy())
	if err != nil {
		return err
	}
	return c.Close(ctx)
}

func (w *World) setDown() {
	w.incidents.disconnect.Add(1)
	w.down.Store(true)
	w.connMu.Lock()
	w.connDown(ErrConnectionLost)
	w.connMu.Unlock()
}

func (w *World) setUp() {
	w.pool.Reset() // their connections died with the server
	w.ackPool.Reset()
	w.connMu.Lock()
	w.conn, w.connDown = context.WithCancelCause(context.Background())
	w.connMu.Unlock()
	w.down.Store(false)
	w.incidents.reconnect.Add(1)
	w.wakeAll() // notifications were lost
}

// listen opens the connection that LISTENs on the world's channel.
func (w *World) listen(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.ConnectConfig(ctx, w.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := c.Exec(ctx, "LISTEN "+quoteIdent(w.cfg.Schema)); err != nil {
		c.Close(context.Background())
		return nil, err
	}
	return c, nil
}

// listenLoop hands notifications to consumers ("q") and stream readers
// ("s<stream>"). When its connection breaks it has the server checked,
// listens again as soon as it can, and wakes everyone: notifications sent
// meanwhile are lost.
func (w *World) listenLoop(c *pgx.Conn) {
	defer w.bgDone.Done()
	for {
		for c != nil {
			n, err := c.WaitForNotification(w.bg)
			if err != nil {
				c.Close(context.Background())
				c = nil
				if w.bg.Err() != nil {
					return
				}
				w.count(mapErr("listen", err, false))
				w.suspect()
				break
			}
			w.dispatch(n.Payload)
		}
		select {
		case <-w.bg.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
		if w.down.Load() {
			continue
		}
		ctx, cancel := context.WithTimeout(w.bg, w.cfg.ConnectTimeout)
		c, _ = w.listen(ctx)
		cancel()
		if c != nil {
			w.wakeAll()
		}
	}
}

func (w *World) dispatch(payload string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if payload == "q" {
		for s := range w.subs {
			s.notify()
		}
		return
	}
	if stream, ok := strings.CutPrefix(payload, "s"); ok {
		for ch := range w.readers[stream] {
			wake(ch)
		}
	}
}

// wakeAll wakes every consumer and stream reader.
func (w *World) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for s := range w.subs {
		s.notify()
	}
	for _, rs := range w.readers {
		for ch := range rs {
			wake(ch)
		}
	}
}

// wake signals ch without blocking (its buffer holds one signal).
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// incidents are the world's incident counters (world.Incidents).
type incidents struct {
	timeouts   atomic.Int64
	disconnect atomic.Int64
	reconnect  atomic.Int64
	transient  atomic.Int64
	last       atomic.Pointer[string]
}

// Incidents returns the world's incident counts so far: calls that timed
// out or failed transiently, and the times the server stopped and started
// answering.
func (w *World) Incidents() world.Incidents {
	i := &w.incidents
	out := world.Incidents{
		Timeouts:    i.timeouts.Load(),
		Disconnects: i.disconnect.Load(),
		Reconnects:  i.reconnect.Load(),
		Transient:   i.transient.Load(),
	}
	if p := i.last.Load(); p != nil {
		out.Last = *p
	}
	return out
}

// count records err among the incidents when it is one (a timeout or a
// transient failure; the rules' typed errors are answers, not incidents).
func (w *World) count(err error) {
	if err == nil {
		return
	}
	timeout := errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err)
	if timeout {
		w.incidents.timeouts.Add(1)
	}
	if errors.Is(err, world.ErrTransient) {
		w.incidents.transient.Add(1)
	} else if !timeout {
		return
	}
	msg := err.Error()
	w.incidents.last.Store(&msg)
}
