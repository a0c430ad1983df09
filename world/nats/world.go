// Package natsworld is the NATS JetStream world: durabench's default backend.
//
// Embedded (Config.URL empty) it runs nats-server in-process with JetStream
// on a temporary store directory and no listening port, and connects through
// an in-process pipe. External (Config.URL set) it connects to a running
// server or cluster and creates its streams under a per-sweep prefix,
// deleting them on Close unless Config.Keep.
//
// Layout, for a prefix P (P is a valid subject token and stream-name part):
//
//	stream P_log     subjects P.log.<run>   one subject per run: the event log
//	                          P.runs        run index, one message per run, in creation order
//	                          P.hook.<tok>  hook token -> run, create-only (expected subject seq 0)
//	stream P_queue   subjects P.q.ready     work queue, durable pull consumer "ready"
//	                          P.q.delayed   delayed messages, durable pull consumer "delayed"
//	                          P.q.anchor    one message nobody consumes (keeps the store's block)
//	stream P_chunks  subjects P.chunk.<s>   one subject per durabench stream
//
// Event log: each append is a publish to the run's subject with the
// expected-last-subject-sequence header set to the run's last sequence as
// the client's cache knows it, and Nats-Msg-Id when the event has an ID.
// The cache (per run: positions, IDs, steps, hooks, pending count) enforces
// the Append rules of world.Log without reading the log; the header makes
// the publish a compare-and-swap, so a lost race costs an incremental read
// and a retry, and a retried append is reported as a duplicate whether the
// server answers "wrong last sequence" (one server) or "duplicate" (R3).
// Embedded, this process is the log's only writer and appends are
// pipelined (see logSequencer); external, each append waits for its ack
// before the run's next one is sent.
//
// Queue: AckWait is the visibility timeout and NumDelivered the attempt.
// Redeliver naks with RetryDelay doubling per failure, capped at the
// visibility timeout. Fresh publishes a new message (attempt 1, delayed by
// the same backoff) and leaves the original unacknowledged, so it returns
// only after the visibility timeout. A delayed publish goes to P.q.delayed;
// every Consume also runs a mover that naks a delayed message with the time
// it still has to wait and, once it is due, republishes it to P.q.ready, so
// its attempts count from 1 like any message's.
//
// Every NATS failure maps to the world's typed errors; a call made while the
// connection is down fails at once with ErrConnectionLost (which is
// world.ErrTransient).
package natsworld

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/durabench/durabench/world"
)

// Storage kinds for Config.Storage.
const (
	StorageFile   = "file"
	StorageMemory = "memory"
)

// DefaultConnectTimeout bounds connecting to an external server.
const DefaultConnectTimeout = 5 * time.Second

// opTimeout bounds every world call whose context has no deadline, so a dead
// server makes calls fail with a typed error instead of hanging.
const opTimeout = 10 * time.Second

// Config configures a NATS world. Zero values mean defaults.
type Config struct {
	// Options are the settings every world accepts.
	Options world.Options
	// URL of an external server or cluster (comma-separated URLs allowed).
	// Empty runs an embedded server in-process.
	URL string
	// Auth secures and authenticates the external connection (TLS, and
	// user/password, a token, an NKey or a credentials file).
	Auth Auth
	// Storage is StorageFile (default) or StorageMemory.
	Storage string
	// Replicas is the replica count of every stream (default 1; must be 1
	// when embedded).
	Replicas int
	// Prefix names durabench's subjects and streams; it must match
	// [A-Za-z0-9_-]+. Default: "durabench_" and 8 random hex digits, so two
	// sweeps, or the leftovers of a crashed one, never mix.
	Prefix string
	// Keep leaves the streams in place on Close (external servers only; an
	// embedded server's store is always removed).
	Keep bool
	// SoleWriter declares, for an external server, that this process is
	// the only writer under Prefix (no durabench workers elsewhere): log
	// appends are pipelined (on single-replica streams) and the run caches
	// trusted, as on the embedded server. On replicated streams appends
	// stay one round trip each: a leader answers a chained check of a
	// message still being proposed with "wrong last sequence", so chains
	// broke all the time and every break drained the pipeline (1,024-branch
	// R3 fan-outs: pending-count TTLS 5.0 s pipelined vs 2.2 s not,
	// resilient-inband 13 s with append timeouts vs 6.9 s without). A sweep sets it unless its engine runs in external workers.
	// Should another writer show up after all, the pipeline notices the
	// sequence it did not predict and falls back to one round trip per
	// append; the server still checks every expected sequence.
	SoleWriter bool
	// ConnectTimeout bounds connecting to an external server (default 5 s).
	ConnectTimeout time.Duration
	// Embedded, when set (and URL is empty), is an embedded server the
	// world shares with others (each under its own Prefix) instead of
	// starting its own; the world does not shut it down.
	Embedded *Embedded
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// withDefaults validates c and fills in defaults.
func (c Config) withDefaults() (Config, error) {
	c.Options = c.Options.WithDefaults()
	switch c.Storage {
	case "":
		c.Storage = StorageFile
	case StorageFile, StorageMemory:
	default:
		return c, fmt.Errorf("natsworld: storage %q: must be %q or %q", c.Storage, StorageFile, StorageMemory)
	}
	if c.Replicas < 0 {
		return c, fmt.Errorf("natsworld: replicas %d: must be >= 1", c.Replicas)
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.URL == "" && c.Replicas != 1 {
		return c, fmt.Errorf("natsworld: replicas %d: the embedded server is a single node, use 1", c.Replicas)
	}
	if c.URL == "" && c.Auth != (Auth{}) {
		return c, errors.New("natsworld: TLS and credentials apply to an external server (a URL)")
	}
	if c.Prefix == "" {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return c, fmt.Errorf("natsworld: random prefix: %w", err)
		}
		c.Prefix = "durabench_" + hex.EncodeToString(b[:])
	} else if !prefixRE.MatchString(c.Prefix) {
		return c, fmt.Errorf("natsworld: prefix %q: must match [A-Za-z0-9_-]+", c.Prefix)
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	switch c.Options.RetryStyle {
	case world.Redeliver, world.Fresh:
	default:
		return c, fmt.Errorf("natsworld: retry style %q: must be %q or %q", c.Options.RetryStyle, world.Redeliver, world.Fresh)
	}
	return c, nil
}

// World is the NATS JetStream world. It is safe for concurrent use.
type World struct {
	cfg  Config
	rt   *world.Real
	caps world.Capabilities

	srv   *server.Server // embedded only
	store *store         // embedded only
	nc    *nats.Conn
	js    jetstream.JetStream

	// Stream names and subjects.
	logStream, queueStream, chunkStream string
	subjLog, subjRuns, subjHook         string
	subjReady, subjDelayed, subjChunk   string
	subjAnchor                          string

	ready, delayed jetstream.Consumer

	// replies routes the replies of batched log reads (flow-controlled;
	// see replyMux), and incidents counts what went wrong on the
	// connection.
	replies   *replyMux
	incidents incidents

	// seq pipelines log appends when this process is the log's only
	// writer (embedded, or Config.SoleWriter); nil otherwise.
	seq *logSequencer

	// shared is set when other processes may write under the same prefix
	// (external servers, unless Config.SoleWriter). Then a rule violation found in a cache is
	// confirmed by a read before it is reported; embedded, this process is
	// the only writer and its caches are authoritative.
	shared bool

	// conn is cancelled while the connection is down (see opCtx).
	connMu   sync.Mutex
	conn     context.Context
	connDown context.CancelFunc

	mu      sync.Mutex
	closed  bool
	runs    map[string]*runState
	hooks   map[string]uint64 // hook token -> sequence of its claim, for read-your-writes
	writers map[string]*chunkWriter
	readers map[string]*chunkReader
	subs    map[*subscription]struct{}
	// retired are the last finished runs whose caches are kept (a ring);
	// older ones are dropped so a long sweep's memory stays flat. A
	// dropped run's cache is rebuilt from its log if it is touched again.
	retired     [maxRetired]string
	retiredNext int
}

// maxRetired is how many finished runs keep their caches.
const maxRetired = 1024

// retire notes that run id finished; the cache of the run that finished
// maxRetired runs earlier is dropped.
func (w *World) retire(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old := w.retired[w.retiredNext]; old != "" {
		delete(w.runs, old)
	}
	w.retired[w.retiredNext] = id
	w.retiredNext = (w.retiredNext + 1) % maxRetired
}

// dedupWindow is how long the streams remember message ids: twice the
// visibility timeout (a retry or a recovery republish comes within one),
// at least a minute, at most ten. The server keeps an entry per id for the
// window, so a longer one only grows its memory.
func dedupWindow(vt time.Duration) time.Duration {
	return min(max(2*vt, time.Minute), 10*time.Minute)
}

var _ world.World = (*World)(nil)

// New starts (embedded) or connects to (external) NATS and creates the
// world's streams and consumers idempotently under cfg.Prefix.
func New(ctx context.Context, cfg Config) (*World, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &World{
		cfg: cfg,
		rt:  world.NewReal(),
		caps: world.Capabilities{
			Guard:             cfg.Options.Guard,
			RetryStyle:        cfg.Options.RetryStyle,
			VisibilityTimeout: cfg.Options.VisibilityTimeout,
		},
		runs:    make(map[string]*runState),
		hooks:   make(map[string]uint64),
		writers: make(map[string]*chunkWriter),
		readers: make(map[string]*chunkReader),
		subs:    make(map[*subscription]struct{}),
	}
	w.shared = cfg.URL != "" && !cfg.SoleWriter
	if !w.shared && cfg.Replicas <= 1 { // see Config.SoleWriter
		w.seq = newLogSequencer(w)
	}
	w.conn, w.connDown = context.WithCancel(context.Background())
	p := cfg.Prefix
	w.logStream, w.queueStream, w.chunkStream = p+"_log", p+"_queue", p+"_chunks"
	w.subjLog, w.subjRuns, w.subjHook = p+".log.", p+".runs", p+".hook."
	w.subjReady, w.subjDelayed, w.subjChunk = p+".q.ready", p+".q.delayed", p+".chunk."
	w.subjAnchor = p + ".q.anchor"

	switch {
	case cfg.URL == "" && cfg.Embedded != nil:
		err = w.connectEmbedded(cfg.Embedded.srv)
	case cfg.URL == "":
		err = w.startEmbedded()
	default:
		err = w.connect(ctx)
	}
	if err != nil {
		w.shutdown()
		return nil, err
	}
	if w.replies, err = newReplyMux(w); err != nil {
		w.shutdown()
		return nil, err
	}
	// At most 16384 publishes await their acks; the ack subscription's
	// default pending limits (512 Ki messages, 64 MiB) hold them all.
	js, err := jetstream.New(w.nc, jetstream.WithDefaultTimeout(opTimeout),
		jetstream.WithPublishAsyncTimeout(opTimeout), jetstream.WithPublishAsyncMaxPending(16384))
	if err != nil {
		w.shutdown()
		return nil, fmt.Errorf("natsworld: jetstream: %w", err)
	}
	w.js = js
	total := max(cfg.ConnectTimeout, 10*time.Second)
	sctx, cancel := context.WithTimeout(ctx, total)
	defer cancel()
	// A cluster that just started answers 503 until it elected its
	// JetStream meta leader; retry transient failures until the deadline.
	// Each attempt has a third of it: a request whose reply never came
	// (an embedded server's first stream request, about once in 6,000
	// worlds started on a fresh server) is asked again, not waited for
	// until the whole deadline passed. Setup is idempotent.
	for {
		actx, acancel := context.WithTimeout(sctx, total/3)
		err := w.setup(actx)
		acancel()
		if err == nil {
			break
		}
		if !world.IsTransient(err) || sctx.Err() != nil {
			w.shutdown()
			return nil, err
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-sctx.Done():
		}
	}
	return w, nil
}

// EmbeddedMaxPayload is the largest message the embedded server takes.
const EmbeddedMaxPayload = 8 << 20

func (w *World) startEmbedded() error {
	s, st, err := startServer()
	if st != nil {
		w.store = st
	}
	if s != nil {
		w.srv = s
	}
	if err != nil {
		return err
	}
	return w.connectEmbedded(s)
}

// connectEmbedded connects the world to the embedded server s in-process.
func (w *World) connectEmbedded(s *server.Server) error {
	nc, err := nats.Connect("", append(w.connOptions(), nats.InProcessServer(s), nats.Name("durabench"),
		nats.MaxReconnects(-1), nats.ReconnectBufSize(-1))...)
	if err != nil {
		return fmt.Errorf("natsworld: in-process connection: %w", err)
	}
	w.nc = nc
	return nil
}

// Embedded is an embedded server several worlds share (Config.Embedded),
// each under its own prefix: an interleaved sweep runs a pair's two cells
// on one server, so that the server's state is the same for both (two
// servers are two environment draws that last a whole cell).
type Embedded struct {
	srv   *server.Server
	store *store
}

// StartEmbedded starts an embedded server to share; Close shuts it down
// and removes its store.
func StartEmbedded() (*Embedded, error) {
	s, st, err := startServer()
	e := &Embedded{srv: s, store: st}
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Close shuts the shared server down and removes its store. The worlds on
// it are closed first.
func (e *Embedded) Close() error {
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	}
	if e.store != nil {
		e.store.remove()
	}
	return nil
}

// startServer starts an embedded server on a fresh store; what it
// returns besides an error is what was made and must be removed.
func startServer() (*server.Server, *store, error) {
	st, err := newStore()
	if err != nil {
		return nil, nil, err
	}
	opts := &server.Options{
		ServerName: "durabench-embedded",
		DontListen: true,
		JetStream:  true,
		StoreDir:   st.dir,
		NoSigs:     true,
		NoLog:      true,
		// The engine drives hundreds of concurrent publishes; the default
		// 64 MB per-client pending limit is plenty, keep it.
		// An event is one message: a step's 1 MB payload (the payload
		// scenario) plus its header is over NATS's 1 MB default.
		MaxPayload: EmbeddedMaxPayload,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, st, fmt.Errorf("natsworld: embedded server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		return s, st, errors.New("natsworld: embedded server did not start within 10s")
	}
	return s, st, nil
}

func (w *World) connect(ctx context.Context) error {
	nc, err := Dial(ctx, w.cfg.URL, w.cfg.Auth, w.cfg.ConnectTimeout, append([]nats.Option{
		nats.Name("durabench"),
		// Calls made while disconnected fail at once (ErrConnectionLost)
		// instead of queueing in a reconnect buffer.
		nats.ReconnectBufSize(-1),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
	}, w.connOptions()...)...)
	if err != nil {
		return err
	}
	w.nc = nc
	return nil
}

// setup creates the streams and consumers; CreateOrUpdate makes it
// idempotent, so a second world with the same prefix shares them.
func (w *World) setup(ctx context.Context) error {
	storage := jetstream.FileStorage
	if w.cfg.Storage == StorageMemory {
		storage = jetstream.MemoryStorage
	}
	vt := w.cfg.Options.VisibilityTimeout
	streams := []jetstream.StreamConfig{{
		Name:        w.logStream,
		Description: "durabench event logs, run index and hook tokens",
		Subjects:    []string{w.subjLog + ">", w.subjRuns, w.subjHook + ">"},
		Storage:     storage,
		Replicas:    w.cfg.Replicas,
		Duplicates:  dedupWindow(vt),
		AllowDirect: true,
	}, {
		Name:        w.queueStream,
		Description: "durabench work queue",
		Subjects:    []string{w.subjReady, w.subjDelayed, w.subjAnchor},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     storage,
		Replicas:    w.cfg.Replicas,
		Duplicates:  dedupWindow(vt),
	}, {
		Name:        w.chunkStream,
		Description: "durabench streams (chunks)",
		Subjects:    []string{w.subjChunk + ">"},
		Storage:     storage,
		Replicas:    w.cfg.Replicas,
		AllowDirect: true,
	}}
	for _, sc := range streams {
		if _, err := w.js.CreateOrUpdateStream(ctx, sc); err != nil {
			return w.setupErr("stream "+sc.Name, err)
		}
	}
	// One message no consumer reads keeps the work queue's file store from
	// emptying: otherwise every ack of the last message deletes the message
	// block file and the next publish creates a new one (two file system
	// calls per message, most of a publish-to-consume round trip).
	anchor := nats.NewMsg(w.subjAnchor)
	anchor.Header.Set(jetstream.MsgIDHeader, "anchor")
	if _, err := w.publish(ctx, anchor); err != nil {
		return w.setupErr("queue anchor", err)
	}
	var err error
	w.ready, err = w.js.CreateOrUpdateConsumer(ctx, w.queueStream, jetstream.ConsumerConfig{
		Durable:       "ready",
		FilterSubject: w.subjReady,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       vt,
		MaxDeliver:    -1,
		// Abandoned and fresh-retried originals hold an ack slot for a
		// whole visibility timeout; the default 1000 would throttle a
		// 256-branch fan-out with failures.
		MaxAckPending: 100_000,
		Replicas:      w.cfg.Replicas,
	})
	if err != nil {
		return w.setupErr("consumer ready", err)
	}
	w.delayed, err = w.js.CreateOrUpdateConsumer(ctx, w.queueStream, jetstream.ConsumerConfig{
		Durable:       "delayed",
		FilterSubject: w.subjDelayed,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1,
		MaxAckPending: 100_000,
		Replicas:      w.cfg.Replicas,
	})
	if err != nil {
		return w.setupErr("consumer delayed", err)
	}
	for _, c := range []struct {
		name string
		c    jetstream.Consumer
	}{{"ready", w.ready}, {"delayed", w.delayed}} {
		if err := w.awaitLeader(ctx, c.c); err != nil {
			return w.setupErr("consumer "+c.name, err)
		}
	}
	return nil
}

// awaitLeader waits until a replicated consumer has elected its leader. A
// pull request sent before that has no one to answer it: the jetstream
// iterator counts its messages as requested all the same and asks for no
// more, so the consumer would deliver nothing until the request's
// heartbeat is missed (seen on an R3 cluster: a fresh-retried message
// undelivered for seconds).
func (w *World) awaitLeader(ctx context.Context, c jetstream.Consumer) error {
	if w.cfg.Replicas <= 1 {
		return nil
	}
	for {
		info, err := c.Info(ctx)
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return fmt.Errorf("no leader elected: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (w *World) setupErr(what string, err error) error {
	where := "embedded server"
	if w.cfg.URL != "" {
		where = RedactURL(w.cfg.URL)
	}
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("natsworld: %s: JetStream is not enabled on %s: %w", what, where, err)
	}
	return fmt.Errorf("natsworld: create %s on %s: %w", what, where, mapErr("setup", err, false))
}

// Name returns "nats".
func (w *World) Name() string { return "nats" }

// Capabilities declares the guard, retry style and visibility timeout.
func (w *World) Capabilities() world.Capabilities { return w.caps }

// Runtime is the real clock and goroutines.
func (w *World) Runtime() world.Runtime { return w.rt }

// Streams returns the names of the JetStream streams the world uses.
func (w *World) Streams() []string { return []string{w.logStream, w.queueStream, w.chunkStream} }

// Close stops consumers and stream readers, deletes the streams unless
// Config.Keep (external servers), and shuts an embedded server down,
// removing its store.
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
	readers := make([]*chunkReader, 0, len(w.readers))
	for _, r := range w.readers {
		readers = append(readers, r)
	}
	w.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range subs {
		s.cancel()
		_ = s.Stop(ctx)
	}
	for _, r := range readers {
		r.stop()
	}
	var err error
	if w.srv == nil && !w.cfg.Keep && w.js != nil && !w.nc.IsClosed() {
		for _, name := range w.Streams() {
			if derr := w.js.DeleteStream(ctx, name); derr != nil && !errors.Is(derr, jetstream.ErrStreamNotFound) {
				err = errors.Join(err, fmt.Errorf("natsworld: delete stream %s: %w", name, derr))
			}
		}
	}
	w.shutdown()
	return err
}

// shutdown closes the connection and an embedded server and removes its
// store.
func (w *World) shutdown() {
	if w.nc != nil {
		w.nc.Close()
	}
	if w.srv != nil {
		w.srv.Shutdown()
		w.srv.WaitForShutdown()
	}
	if w.store != nil {
		w.store.remove()
	}
}

// isClosed reports whether Close was called.
func (w *World) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// err maps err for op (see mapErr); any failure while the connection is
// down is ErrConnectionLost.
func (w *World) err(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	closed := w.isClosed()
	lost := !w.nc.IsConnected() || errors.Is(context.Cause(ctx), ErrConnectionLost)
	if !closed && lost && !errors.Is(err, ErrConnectionLost) {
		err = fmt.Errorf("natsworld: %s: %w (%w)", op, ErrConnectionLost, err)
	} else {
		err = mapErr(op, err, closed)
	}
	if !closed && !errors.Is(err, context.Canceled) {
		w.count(err)
	}
	return err
}

// opCtx bounds ctx by opTimeout when it has no deadline, and cancels it
// when the connection drops: nats.go does not fail requests in flight on a
// disconnect, so without this a call would wait for its timeout.
func (w *World) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return w.callCtx(ctx, true)
}

// readCtx is opCtx for a log read, whose replies stream in: instead of a
// deadline on the whole read, the read fails when its replies stop for
// opTimeout (readCall.wait), so a long log that a loaded server streams
// slowly is read, not timed out and read again.
func (w *World) readCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return w.callCtx(ctx, false)
}

func (w *World) callCtx(ctx context.Context, deadline bool) (context.Context, context.CancelFunc) {
	cancelTimeout := context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok && deadline {
		ctx, cancelTimeout = context.WithTimeout(ctx, opTimeout)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	w.connMu.Lock()
	conn := w.conn
	w.connMu.Unlock()
	stop := context.AfterFunc(conn, func() { cancel(ErrConnectionLost) })
	return ctx, func() { stop(); cancel(nil); cancelTimeout() }
}

// connUp and connDown track the connection for opCtx.
func (w *World) connUp() {
	w.connMu.Lock()
	defer w.connMu.Unlock()
	if w.conn.Err() != nil {
		w.conn, w.connDown = context.WithCancel(context.Background())
	}
}

func (w *World) connLost() {
	w.connMu.Lock()
	defer w.connMu.Unlock()
	w.connDown()
}

// connOptions keep opCtx informed of the connection's state, count its
// incidents, and take nats.go's asynchronous errors (a slow consumer, say)
// into the world's error mapping instead of its default handler, which
// prints each to stderr.
func (w *World) connOptions() []nats.Option {
	return []nats.Option{
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if !w.isClosed() {
				w.incidents.disconnect.Add(1)
				// The cell's report names it (a reset, a server gone).
				msg := "natsworld: disconnected"
				if err != nil {
					msg += ": " + err.Error()
				}
				w.incidents.last.Store(&msg)
			}
			w.connLost()
		}),
		nats.ClosedHandler(func(*nats.Conn) { w.connLost() }),
		nats.ReconnectHandler(func(*nats.Conn) {
			w.incidents.reconnect.Add(1)
			w.connUp()
		}),
		nats.ErrorHandler(w.asyncError),
	}
}

// check returns ErrClosed after Close and ErrConnectionLost while the
// connection is down, so calls fail fast instead of waiting for a timeout.
func (w *World) check(op string) error {
	if w.isClosed() {
		return fmt.Errorf("natsworld: %s: %w", op, world.ErrClosed)
	}
	switch w.nc.Status() {
	case nats.CONNECTED:
		return nil
	case nats.CLOSED:
		return fmt.Errorf("natsworld: %s: %w (connection closed)", op, ErrConnectionLost)
	default:
		return fmt.Errorf("natsworld: %s: %w (%s)", op, ErrConnectionLost, w.nc.Status())
	}
}
