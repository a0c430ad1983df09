package cluster

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	natsworld "github.com/durabench/durabench/world/nats"
	pgworld "github.com/durabench/durabench/world/postgres"
	"github.com/durabench/durabench/world/profile"
)

// Defaults of WorkerConfig.
const (
	// DefaultFlushInterval is how often a worker publishes the records it
	// buffered: recording stays an append under a lock on the engine's hot
	// path, and one NATS message carries many records.
	DefaultFlushInterval = 5 * time.Millisecond
	// heartbeatEvery is how often a worker with nothing to send still
	// publishes an empty batch, so the driver's watermark of it advances
	// (see Session.release).
	heartbeatEvery = 25 * time.Millisecond
	// maxBatch is the size at which a batch is published at once.
	maxBatch = 256 << 10
)

// WorkerConfig configures a worker.
type WorkerConfig struct {
	// URL of the NATS server or cluster; Auth its TLS and credentials.
	URL  string
	Auth natsworld.Auth
	// ID names the worker in records and results (default host-pid); it is
	// sanitised into one subject token.
	ID string
	// Concurrency is the engine's delivery concurrency (default
	// engine.DefaultConcurrency).
	Concurrency int
	// Subject is the control subject root (default DefaultSubject).
	Subject string
	// FlushInterval is how often buffered records are published (default
	// DefaultFlushInterval).
	FlushInterval time.Duration
	// StopTimeout bounds stopping a cell's engine (running handlers finish,
	// buffered messages are nak'ed) on a signal or at cell end (default 30 s).
	StopTimeout time.Duration
	// Log receives one line per event (nil: none).
	Log io.Writer
	// StatusEvery, when > 0, logs each open cell's counts that often, so a
	// stuck worker shows where it is stuck.
	StatusEvery time.Duration
}

func (c *WorkerConfig) defaults() error {
	if c.URL == "" {
		return fmt.Errorf("cluster: worker needs a NATS URL")
	}
	if c.ID == "" {
		host, _ := os.Hostname()
		c.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	c.ID = SanitizeID(c.ID)
	if c.Concurrency <= 0 {
		c.Concurrency = engine.DefaultConcurrency
	}
	if c.Subject == "" {
		c.Subject = DefaultSubject
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = 30 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

// Worker runs cells announced by drivers.
type Worker struct {
	cfg   WorkerConfig
	nc    *nats.Conn
	errs  *asyncErrors
	hello Hello

	mu     sync.Mutex
	cells  map[string]*workerCell
	closed bool
	// owner is the sweep the worker serves while claims (its open cells
	// and those opening) is above 0.
	owner  string
	claims int

	dropped atomic.Int64
}

// errStopping refuses a cell while the worker stops.
var errStopping = errors.New("worker is stopping")

// Dropped is the number of messages the worker dropped or refused: they
// did not decode, or did not belong to a cell of the sweep it serves.
func (w *Worker) Dropped() int64 { return w.dropped.Load() }

// drop counts a message that is not run and logs why (the first ten, then
// every thousandth: a flood of garbage must not flood the log).
func (w *Worker) drop(subject, why string) {
	if n := w.dropped.Add(1); n <= 10 || n%1000 == 0 {
		w.logf("dropped a message on %s: %s (%d dropped so far)", subject, why, n)
	}
}

// claim makes the worker serve sweep for one more cell, unless it serves
// another; release undoes a claim.
func (w *Worker) claim(sweep string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errStopping
	}
	if w.claims > 0 && w.owner != sweep {
		return fmt.Errorf("worker %s serves sweep %s (another driver)", w.cfg.ID, w.owner)
	}
	w.owner = sweep
	w.claims++
	return nil
}

func (w *Worker) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.claims--; w.claims == 0 {
		w.owner = ""
	}
}

// serving is the sweep the worker serves now ("" when free).
func (w *Worker) serving() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.owner
}

// Connect connects a worker to NATS and returns it; Run serves cells. The
// error wraps natsworld.ErrUnreachable when no server answers.
func Connect(ctx context.Context, cfg WorkerConfig) (*Worker, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	var errs asyncErrors
	nc, err := dial(ctx, cfg.URL, cfg.Auth, "durabench worker "+cfg.ID, &errs)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	return &Worker{cfg: cfg, nc: nc, errs: &errs, cells: map[string]*workerCell{},
		hello: Hello{ID: cfg.ID, Protocol: Protocol, Host: host, PID: os.Getpid(), Concurrency: cfg.Concurrency}}, nil
}

// asyncErrors counts the asynchronous errors nats.go reports on a
// connection (a slow consumer, a permissions violation) instead of
// printing each to stderr, as its default handler would.
type asyncErrors struct {
	n    atomic.Int64
	last atomic.Pointer[string]
}

func (a *asyncErrors) handle(_ *nats.Conn, sub *nats.Subscription, err error) {
	msg := err.Error()
	if sub != nil {
		msg += " (subscription " + sub.Subject + ")"
	}
	a.last.Store(&msg)
	a.n.Add(1)
}

// since returns the errors counted after a count of before, as incidents.
func (a *asyncErrors) since(before int64) world.Incidents {
	inc := world.Incidents{AsyncErrors: a.n.Load() - before}
	if p := a.last.Load(); p != nil && inc.AsyncErrors > 0 {
		inc.Last = *p
	}
	return inc
}

// dial connects to url within natsworld.DefaultConnectTimeout; errs counts
// the connection's asynchronous errors. The error wraps
// natsworld.ErrUnreachable or natsworld.ErrAuth and names the server,
// never a secret.
func dial(ctx context.Context, url string, auth natsworld.Auth, name string, errs *asyncErrors) (*nats.Conn, error) {
	nc, err := natsworld.Dial(ctx, url, auth, natsworld.DefaultConnectTimeout, nats.Name(name),
		nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond), nats.ErrorHandler(errs.handle))
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return nc, nil
}

// ID is the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

func (w *Worker) logf(format string, a ...any) {
	fmt.Fprintf(w.cfg.Log, "durabench worker %s: "+format+"\n", append([]any{w.cfg.ID}, a...)...)
}

// Run announces the worker and serves cells until ctx is done; then it
// stops every open cell cleanly (no new fetches, running handlers finish,
// buffered messages are nak'ed so other workers get them at once), says
// bye and closes the connection.
func (w *Worker) Run(ctx context.Context) error {
	defer w.nc.Close()
	hello, _ := json.Marshal(w.hello)
	root := w.cfg.Subject
	subs := []*nats.Subscription{}
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	s, err := w.nc.Subscribe(subjDiscover(root), func(m *nats.Msg) {
		h := w.hello
		h.Serving = w.serving()
		b, _ := json.Marshal(h)
		_ = m.Respond(b)
	})
	if err != nil {
		return fmt.Errorf("cluster: subscribe: %w", err)
	}
	subs = append(subs, s)
	// Each request is served on its own goroutine: opening a cell takes a
	// few JetStream calls and must not delay clock probes of another cell.
	s, err = w.nc.Subscribe(subjWorker(root, w.cfg.ID)+".*", func(m *nats.Msg) { go w.serve(ctx, m) })
	if err != nil {
		return fmt.Errorf("cluster: subscribe: %w", err)
	}
	subs = append(subs, s)
	if err := w.nc.Publish(subjHello(root), hello); err != nil {
		return fmt.Errorf("cluster: hello: %w", err)
	}
	if err := w.nc.Flush(); err != nil {
		return fmt.Errorf("cluster: hello: %w", err)
	}
	w.logf("ready on %s (concurrency %d)", natsworld.RedactURL(w.nc.ConnectedUrl()), w.cfg.Concurrency)

	<-ctx.Done()
	for _, s := range subs {
		_ = s.Unsubscribe()
	}
	subs = nil
	w.mu.Lock()
	w.closed = true
	cells := make([]*workerCell, 0, len(w.cells))
	for _, c := range w.cells {
		cells = append(cells, c)
	}
	w.mu.Unlock()
	var wg sync.WaitGroup
	var byeMu sync.Mutex
	bye := Bye{Hello: w.hello, Cells: map[string]WorkerStats{}}
	for _, c := range cells {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := c.stop(w.cfg.StopTimeout)
			w.logf("stopped cell %s on signal: %d deliveries, %d redeliveries, %d step bodies", c.spec.Prefix,
				st.Deliveries, st.Redeliveries, st.Steps)
			byeMu.Lock()
			bye.Cells[c.spec.Prefix] = st
			byeMu.Unlock()
		}()
	}
	wg.Wait()
	// After the cells' last records (one connection keeps the order): the
	// driver stops waiting for this worker's records when it reads this.
	b, _ := json.Marshal(bye)
	_ = w.nc.Publish(subjBye(root), b)
	_ = w.nc.FlushTimeout(time.Second)
	return nil
}

func (w *Worker) serve(ctx context.Context, m *nats.Msg) {
	op := m.Subject[len(subjWorker(w.cfg.Subject, w.cfg.ID))+1:]
	switch op {
	case "cell":
		spec, err := decodeCellSpec(w.cfg.Subject, m.Data)
		if err != nil {
			w.drop(m.Subject, "cell announcement "+err.Error())
			respondJSON(m, Reply{Error: "refused: " + err.Error()})
			return
		}
		if err := w.open(ctx, spec); err != nil {
			w.logf("cell %s: %v", spec.Prefix, err)
			respondJSON(m, Reply{Error: err.Error()})
			return
		}
		respondJSON(m, Reply{OK: true})
	case "clock":
		c := w.cell(string(m.Data))
		if c == nil {
			w.drop(m.Subject, "clock of a cell it does not have")
			_ = m.Respond(nil)
			return
		}
		// The unshifted clock: the driver's estimate is of this clock.
		_ = m.Respond(binary.BigEndian.AppendUint64(nil, uint64(c.rt.Runtime.Now())))
	case "shift":
		prefix, off, ok := decodeShift(m.Data)
		c := w.cell(prefix)
		if !ok || c == nil {
			w.drop(m.Subject, "clock shift that does not decode or names a cell it does not have")
			_ = m.Respond(nil)
			return
		}
		c.rt.shift.Store(int64(off))
		_ = m.Respond([]byte("ok"))
	case "end":
		c := w.cell(string(m.Data))
		if c == nil {
			// A cell that stopped already (its driver went silent) or
			// never opened here: nothing to stop, the answer says so.
			if !prefixRE.Match(m.Data) {
				w.drop(m.Subject, "end of something that is not a cell")
			}
			respondJSON(m, WorkerStats{ID: w.cfg.ID})
			return
		}
		st := c.stop(w.cfg.StopTimeout)
		w.logf("cell %s ended: %d deliveries, %d redeliveries, %d step bodies", c.spec.Prefix,
			st.Deliveries, st.Redeliveries, st.Steps)
		respondJSON(m, st)
	default:
		w.drop(m.Subject, fmt.Sprintf("unknown operation %.40q", op))
	}
}

func respondJSON(m *nats.Msg, v any) {
	b, _ := json.Marshal(v)
	_ = m.Respond(b)
}

func (w *Worker) cell(prefix string) *workerCell {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cells[prefix]
}

// open opens the cell's world (the driver's streams, kept on close: the
// driver owns them) and starts an engine on it, unless the worker serves
// another sweep.
func (w *Worker) open(ctx context.Context, spec CellSpec) (err error) {
	if c := w.cell(spec.Prefix); c != nil && c.spec.Sweep == spec.Sweep {
		return nil // a repeated announcement: the cell is open
	}
	if err := w.claim(spec.Sweep); err != nil {
		if !errors.Is(err, errStopping) {
			w.drop(subjWorker(w.cfg.Subject, w.cfg.ID)+".cell", "cell "+spec.Prefix+": "+err.Error())
		}
		return err
	}
	claimed := true // until a cell holds the claim: its stop releases it
	defer func() {
		if err != nil && claimed {
			w.release()
		}
	}()
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nw, err := w.openWorld(octx, spec)
	if err != nil {
		return fmt.Errorf("open world: %w", err)
	}
	var base world.World = nw
	if spec.Profile != "" && spec.Profile != "none" || spec.Faults != "" {
		// A profile file, and the hdr files it names, are the driver's:
		// the worker reads the copies it shipped, never a file of its own.
		prof, err := profile.Resolve(spec.Profile, spec.Faults, profile.ShippedFiles(spec.ProfileFiles))
		if err != nil {
			nw.Close()
			return fmt.Errorf("profile %s: %w", spec.Profile, err)
		}
		base = profile.Wrap(nw, prof, spec.Seed)
	}
	c := &workerCell{spec: spec, w: w, inner: nw, rt: &shiftedRuntime{Runtime: base.Runtime()}, stopped: make(chan struct{}),
		errs0: w.errs.n.Load()}
	c.world = &countingWorld{World: base, c: c}
	c.batch = newBatcher(w.nc, subjRecords(w.cfg.Subject, spec.Prefix), w.cfg.ID, c.rt, w.cfg.FlushInterval, &c.records)
	c.obs = &recordingObserver{b: c.batch, steps: &c.steps}
	var obs engine.Observer = c.obs
	if spec.NoSpans {
		obs = spanless{c.obs} // an engine.Observer that takes no spans: the engine records none
	}
	eng, err := engine.New(engine.Config{World: c.world, Features: spec.Features, Observer: obs,
		Concurrency: w.cfg.Concurrency, Seed: spec.Seed})
	if err != nil {
		nw.Close()
		return err
	}
	c.eng = eng
	c.batch.pending = eng.Pending
	// The engine works until the cell ends, not until this request does.
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	c.batch.start()
	if err := eng.Start(c.ctx); err != nil {
		c.batch.stop()
		c.cancel()
		nw.Close()
		return err
	}
	w.mu.Lock()
	if w.closed { // a signal came while the cell was opening
		w.mu.Unlock()
		claimed = false
		c.stop(w.cfg.StopTimeout) // releases the claim
		return errStopping
	}
	w.cells[spec.Prefix] = c
	w.mu.Unlock()
	if spec.Driver != "" {
		go c.watchDriver()
	}
	if w.cfg.StatusEvery > 0 {
		go c.status(w.cfg.StatusEvery)
	}
	w.logf("cell %s started (%s)", spec.Prefix, spec.Label)
	return nil
}

// openWorld opens the cell's world, kept on close (the driver owns it):
// the cell's streams on the NATS server this worker is connected to, or
// the cell's schema on the PostgreSQL server the driver named.
func (w *Worker) openWorld(ctx context.Context, spec CellSpec) (world.World, error) {
	if spec.World == WorldPostgres {
		return pgworld.New(ctx, pgworld.Config{Options: spec.Options, URL: spec.Settings["url"], Schema: spec.Prefix, Keep: true})
	}
	return natsworld.New(ctx, natsworld.Config{Options: spec.Options, URL: w.cfg.URL, Auth: w.cfg.Auth,
		Storage: spec.Storage, Replicas: spec.Replicas, Prefix: spec.Prefix, Keep: true})
}

// status logs the cell's counts every interval until it stops.
func (c *workerCell) status(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.stopped:
			return
		case <-t.C:
		}
		c.w.logf("cell %s: %d deliveries (%d in flight), %d redeliveries, %d step bodies, %d records sent",
			c.spec.Prefix, c.deliveries.Load(), c.inflight.Load(), c.redeliveries.Load(), c.steps.Load(), c.records.Load())
	}
}

// watchDriver stops the cell when its driver stops answering for
// DriverTimeout: a driver that died leaves no one to end the cell.
func (c *workerCell) watchDriver() {
	const every = time.Second
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-c.stopped:
			return
		case <-t.C:
		}
		if _, err := c.w.nc.Request(c.spec.Driver, nil, every); err == nil {
			last = time.Now()
			continue
		}
		if time.Since(last) >= DriverTimeout {
			c.w.logf("cell %s: no answer from its driver for %v; stopping the cell", c.spec.Prefix, DriverTimeout)
			st := c.stop(c.w.cfg.StopTimeout)
			c.w.logf("cell %s stopped: %d deliveries, %d redeliveries, %d step bodies", c.spec.Prefix,
				st.Deliveries, st.Redeliveries, st.Steps)
			return
		}
	}
}

// workerCell is one cell a worker serves.
type workerCell struct {
	spec   CellSpec
	w      *Worker
	inner  world.World // the cell's world, without the profile
	world  world.World
	rt     *shiftedRuntime
	eng    *engine.Engine
	obs    *recordingObserver
	batch  *batcher
	ctx    context.Context
	cancel context.CancelFunc

	deliveries, redeliveries, steps, records, inflight atomic.Int64

	stopOnce sync.Once
	stopped  chan struct{}
	final    WorkerStats
	errs0    int64 // the connection's async errors when the cell opened
}

// stop stops the cell's engine (handlers finish, buffered messages are
// nak'ed), publishes the last records and closes the cell's world. Calls
// after the first wait for it and return the same stats.
func (c *workerCell) stop(timeout time.Duration) WorkerStats {
	c.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := c.eng.Stop(ctx); err != nil {
			c.w.logf("cell %s: stop: %v", c.spec.Prefix, err)
		}
		c.cancel()
		c.batch.stop()
		_ = c.world.Close()
		c.final = WorkerStats{ID: c.w.cfg.ID, Deliveries: c.deliveries.Load(), Redeliveries: c.redeliveries.Load(),
			Steps: c.steps.Load(), Records: c.records.Load(), Batches: c.batch.seq.Load(), Unsent: c.batch.unsent.Load()}
		if inc := world.IncidentsOf(c.inner).Add(c.w.errs.since(c.errs0)); inc.Total() > 0 {
			c.final.Incidents = &inc
		}
		c.w.mu.Lock()
		delete(c.w.cells, c.spec.Prefix)
		c.w.mu.Unlock()
		c.w.release()
		close(c.stopped)
	})
	<-c.stopped
	return c.final
}

// shiftedRuntime is a worker cell's runtime: the world's real clock minus
// the offset the driver estimated, so every timestamp the engine takes —
// the records, and the chunk write times other workers read back from the
// streams — is on the driver's clock.
type shiftedRuntime struct {
	world.Runtime
	shift atomic.Int64 // ns
}

// Now is the driver's clock as this worker estimates it.
func (r *shiftedRuntime) Now() time.Duration {
	return r.Runtime.Now() - time.Duration(r.shift.Load())
}

// countingWorld counts the deliveries its consumer handles, and those with
// attempt > 1.
type countingWorld struct {
	world.World
	c *workerCell
}

// Runtime is the shifted runtime: the engine takes its timestamps here.
func (cw *countingWorld) Runtime() world.Runtime { return cw.c.rt }

func (cw *countingWorld) Consume(ctx context.Context, opt world.ConsumeOptions, h world.Handler) (world.Subscription, error) {
	return cw.World.Consume(ctx, opt, func(ctx context.Context, d world.Delivery) error {
		cw.c.deliveries.Add(1)
		if d.Attempt > 1 {
			cw.c.redeliveries.Add(1)
		}
		cw.c.inflight.Add(1)
		defer cw.c.inflight.Add(-1)
		return h(ctx, d)
	})
}

// spanless hides its Observer's Spans method (CellSpec.NoSpans).
type spanless struct{ engine.Observer }

// recordingObserver is the worker engine's Observer: every callback is
// appended to the batcher.
type recordingObserver struct {
	b     *batcher
	steps *atomic.Int64
}

func (o *recordingObserver) StepBody(run string, s engine.StepSpan) {
	o.steps.Add(1)
	b := o.b
	b.mu.Lock()
	b.buf = appendStep(b.buf, run, s)
	b.added()
}

func (o *recordingObserver) HookCreated(run, token string, at time.Duration) {
	b := o.b
	b.mu.Lock()
	b.buf = appendHook(b.buf, run, token, at)
	b.added()
}

func (o *recordingObserver) StreamChunk(run string, c engine.ChunkSpan) {
	b := o.b
	b.mu.Lock()
	b.buf = appendChunk(b.buf, run, c)
	b.added()
}

// Spans makes the worker's engine record where its time went: each task's
// spans travel to the driver like the other records, for the runs'
// critical paths.
func (o *recordingObserver) Spans(run string, spans []engine.Span) {
	b := o.b
	b.mu.Lock()
	b.buf = appendSpans(b.buf, run, spans)
	b.added()
}

func (o *recordingObserver) RunFinished(run string, at time.Duration, failed bool) {
	b := o.b
	b.mu.Lock()
	b.buf = appendFinished(b.buf, run, at, failed)
	b.added()
}

// batcher buffers encoded records and publishes them every flush interval
// (or at once when the buffer is large), with a header carrying the
// watermark.
type batcher struct {
	nc       *nats.Conn
	subject  string
	id       string
	rt       world.Runtime
	interval time.Duration
	records  *atomic.Int64

	// seq numbers the batches published (the driver sees a lost one as a
	// gap); unsent counts records the connection refused.
	seq    atomic.Uint64
	unsent atomic.Int64

	mu   sync.Mutex
	buf  []byte
	n    int // records in buf
	full chan struct{}

	quit chan struct{}
	done chan struct{}

	// pending, when set, is the engine's earliest step completion still in
	// flight: that step's record is yet to come, so the watermark stays
	// below it.
	pending func() (time.Duration, bool)
}

func newBatcher(nc *nats.Conn, subject, id string, rt world.Runtime, interval time.Duration, records *atomic.Int64) *batcher {
	return &batcher{nc: nc, subject: subject, id: id, rt: rt, interval: interval, records: records,
		full: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

// added counts a record the caller appended to buf under mu, and unlocks
// mu; a large buffer is published at once.
func (b *batcher) added() {
	b.n++
	big := len(b.buf) >= maxBatch
	b.mu.Unlock()
	if big {
		select {
		case b.full <- struct{}{}:
		default:
		}
	}
}

func (b *batcher) start() { go b.loop() }

// stop publishes what is left and ends the loop.
func (b *batcher) stop() {
	select {
	case <-b.quit:
	default:
		close(b.quit)
	}
	<-b.done
}

func (b *batcher) loop() {
	defer close(b.done)
	t := time.NewTicker(b.interval)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-t.C:
		case <-b.full:
		case <-b.quit:
			b.flush(true)
			_ = b.nc.FlushTimeout(5 * time.Second)
			return
		}
		if b.flush(time.Since(last) >= heartbeatEvery) {
			last = time.Now()
		}
	}
}

// flush publishes the buffered records; with force it publishes an empty
// batch too (a heartbeat carrying the watermark). It reports whether it
// published.
func (b *batcher) flush(force bool) bool {
	b.mu.Lock()
	if b.n == 0 && !force {
		b.mu.Unlock()
		return false
	}
	// The watermark is read under the lock that every add takes: a record
	// added before this instant is in buf.
	wm := b.rt.Now()
	if b.pending != nil {
		if p, ok := b.pending(); ok && p < wm {
			wm = p
		}
	}
	recs, n := b.buf, b.n
	b.buf, b.n = nil, 0
	b.mu.Unlock()
	// Batches with records are numbered 1, 2, 3, …; a heartbeat carries
	// the number of the last one, so a lost batch shows as a gap even
	// when nothing follows it but heartbeats.
	seq := b.seq.Load()
	if n > 0 {
		seq++
	}
	msg := appendBatchHeader(make([]byte, 0, len(recs)+len(b.id)+24), b.id, seq, wm)
	msg = append(msg, recs...)
	if err := b.nc.Publish(b.subject, msg); err != nil {
		// The records are gone: count them, so the driver reports the
		// loss instead of a cell that looks complete.
		b.unsent.Add(int64(n))
		return false
	}
	b.seq.Store(seq)
	b.records.Add(int64(n))
	return true
}
