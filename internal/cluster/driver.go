package cluster

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
	natsworld "github.com/durabench/durabench/world/nats"
)

// Defaults of CoordinatorConfig.
const (
	// DefaultWait is how long a driver waits for the expected workers
	// before a cell.
	DefaultWait = 30 * time.Second
	// DefaultClockProbes is the number of round trips per worker behind a
	// clock offset estimate.
	DefaultClockProbes = 16
	// DefaultSilence is how long a worker may publish nothing (not even a
	// heartbeat, due every 25 ms) before the driver stops waiting for its
	// records: long enough that a loaded machine's late heartbeat is not
	// taken for a death (that would release run ends before the slow
	// worker's step records), short next to a visibility timeout. Waiting
	// longer delays when the driver sees runs end, never their timestamps.
	DefaultSilence = 3 * time.Second
)

// CoordinatorConfig configures the driver side.
type CoordinatorConfig struct {
	// URL of the NATS server or cluster; Auth its TLS and credentials.
	URL  string
	Auth natsworld.Auth
	// Expect is the number of workers a cell needs (>= 1).
	Expect int
	// Wait bounds the wait for them (default DefaultWait).
	Wait time.Duration
	// Subject is the control subject root (default DefaultSubject).
	Subject string
	// ClockProbes is the number of clock round trips per worker (default
	// DefaultClockProbes).
	ClockProbes int
	// Silence: see DefaultSilence.
	Silence time.Duration
}

// Coordinator is the driver process's side of the cluster: it finds workers,
// announces cells to them and collects their records (package driver runs
// the cell itself).
type Coordinator struct {
	cfg  CoordinatorConfig
	nc   *nats.Conn
	errs asyncErrors
}

// Dial connects the driver to NATS.
func Dial(ctx context.Context, cfg CoordinatorConfig) (*Coordinator, error) {
	if cfg.Expect < 1 {
		return nil, fmt.Errorf("cluster: expect %d workers: need at least 1", cfg.Expect)
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.Subject == "" {
		cfg.Subject = DefaultSubject
	}
	if cfg.ClockProbes <= 0 {
		cfg.ClockProbes = DefaultClockProbes
	}
	if cfg.Silence <= 0 {
		cfg.Silence = DefaultSilence
	}
	d := &Coordinator{cfg: cfg}
	nc, err := dial(ctx, cfg.URL, cfg.Auth, "durabench driver", &d.errs)
	if err != nil {
		return nil, err
	}
	d.nc = nc
	return d, nil
}

// Close closes the connection.
func (d *Coordinator) Close() { d.nc.Close() }

// Workers asks every worker to say hello, repeatedly, until at least
// cfg.Expect distinct workers free for sweep (serving none, or sweep)
// answered or cfg.Wait passed. It returns those workers sorted by id; the
// error wraps ErrNoWorkers on timeout and names the busy ones.
func (d *Coordinator) Workers(ctx context.Context, sweep string) ([]Hello, error) {
	inbox := d.nc.NewRespInbox()
	ch := make(chan *nats.Msg, 256)
	sub, err := d.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, fmt.Errorf("cluster: discover: %w", err)
	}
	defer sub.Unsubscribe()
	seen := map[string]Hello{}
	busy := map[string]string{} // worker -> the sweep it serves
	warned := map[string]bool{}
	var mismatched []string
	deadline := time.NewTimer(d.cfg.Wait)
	defer deadline.Stop()
	ask := time.NewTicker(250 * time.Millisecond)
	defer ask.Stop()
	publish := func() error {
		return d.nc.PublishRequest(subjDiscover(d.cfg.Subject), inbox, nil)
	}
	if err := publish(); err != nil {
		return nil, fmt.Errorf("cluster: discover: %w", err)
	}
	// After the expected count answered, a short quiet period lets the
	// other workers that are up answer too: all of them take part.
	var settle <-chan time.Time
	for {
		select {
		case m := <-ch:
			var h Hello
			if json.Unmarshal(m.Data, &h) != nil || h.ID == "" {
				continue
			}
			if h.Protocol != Protocol {
				if !warned[h.ID] {
					warned[h.ID] = true
					mismatched = append(mismatched, fmt.Sprintf("%s speaks protocol %d, not %d", h.ID, h.Protocol, Protocol))
				}
				continue
			}
			if prev, ok := seen[h.ID]; ok && (prev.Host != h.Host || prev.PID != h.PID) {
				// Both would take the cell's requests and tag records alike.
				return nil, fmt.Errorf("%w: two workers answer as %s (%s pid %d and %s pid %d): give them distinct --id",
					ErrWorker, h.ID, prev.Host, prev.PID, h.Host, h.PID)
			}
			if h.Serving != "" && h.Serving != sweep {
				busy[h.ID] = h.Serving
				delete(seen, h.ID)
				continue
			}
			delete(busy, h.ID)
			seen[h.ID] = h
			if len(seen) >= d.cfg.Expect && settle == nil {
				settle = time.After(100 * time.Millisecond)
			}
		case <-settle:
			return sortedHellos(seen), nil
		case <-ask.C:
			if err := publish(); err != nil {
				return nil, fmt.Errorf("cluster: discover: %w", err)
			}
		case <-deadline.C:
			ids := make([]string, 0, len(seen))
			for id := range seen {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			if len(mismatched) > 0 {
				ids = append(ids, "ignored: "+strings.Join(mismatched, ", ")+" (another durabench build)")
			}
			for _, id := range slices.Sorted(maps.Keys(busy)) {
				ids = append(ids, fmt.Sprintf("busy: %s serves sweep %s", id, busy[id]))
			}
			who := ""
			if len(ids) > 0 {
				who = " (" + strings.Join(ids, ", ") + ")"
			}
			return nil, fmt.Errorf("%w: %d of %d answered on %s within %v%s; start them with: durabench worker --nats-url URL",
				ErrNoWorkers, len(seen), d.cfg.Expect, natsworld.RedactURL(d.nc.ConnectedUrl()), d.cfg.Wait, who)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func sortedHellos(m map[string]Hello) []Hello {
	out := make([]Hello, 0, len(m))
	for _, h := range m {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b Hello) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Session is one cell running on workers, from Open to End, seen from the
// driver process. It implements driver.External.
type Session struct {
	d    *Coordinator
	spec CellSpec
	rt   world.Runtime

	mu      sync.Mutex
	workers map[string]*workerState
	order   []string // ids, sorted
	pending []finished
	obs     engine.Observer
	bad     int   // batches that did not decode
	errs0   int64 // the driver connection's async errors when the session began

	// sub stays subscribed past detach, until End: a worker's last
	// batches (published as it stops, at End) are counted, not fed.
	sub    *nats.Subscription
	alive  *nats.Subscription
	stopCh chan struct{}
	loop   sync.WaitGroup
	// detached is set by detach (under mu): nothing is fed to obs after
	// it; feeding counts the batches being fed, which detach waits for.
	detached bool
	feeding  sync.WaitGroup
}

type workerState struct {
	hello Hello
	// clock is the offset estimated at cell start; conv converts the
	// worker's records (zero offset once the worker shifted its clock).
	clock, conv Clock
	// wm is the worker's latest watermark on the driver's clock; seen the
	// driver's clock when its latest batch arrived.
	wm, seen time.Duration
	hasWM    bool
	// bye: the worker said it stops; silent: no batch for cfg.Silence.
	// Either way its records are not waited for.
	bye, silent bool
	// left are the worker's counts when it stopped mid-cell (its bye).
	left *WorkerStats
	// batches is the highest batch number seen; lost counts the numbers
	// skipped (record batches that never arrived).
	batches, lost uint64
	// spanBase sets the top bits of the worker's span IDs, so that two
	// workers' spans of one run never share an ID.
	spanBase uint64
}

// workerSpanShift places a worker's number above the span IDs its engine
// makes (a task's block of 2^20 IDs times its count).
const workerSpanShift = 52

func (ws *workerState) gone() bool { return ws.bye || ws.silent }

// see checks a batch's number against the last one seen: a record batch
// must be the next, a heartbeat repeats the last; anything skipped was
// lost on the way.
func (ws *workerState) see(seq uint64, records bool) {
	want := ws.batches
	if records {
		want++
	}
	if seq > want {
		ws.lost += seq - want
	}
	ws.batches = max(ws.batches, seq)
}

// finished is a RunFinished record held until every other worker's
// records up to it arrived.
type finished struct {
	run    string
	at     time.Duration // driver clock
	failed bool
	from   string
}

// Open waits for the expected workers, announces spec to each, and
// estimates each one's clock offset against rt (the driver's runtime clock,
// on which the cell's anchors are taken). Every worker must accept the cell.
func (d *Coordinator) Open(ctx context.Context, spec CellSpec, rt world.Runtime) (*Session, error) {
	hellos, err := d.Workers(ctx, spec.Sweep)
	if err != nil {
		return nil, err
	}
	c := &Session{d: d, spec: spec, rt: rt, workers: map[string]*workerState{}, stopCh: make(chan struct{}),
		errs0: d.errs.n.Load()}
	// Workers ask this subject whether the driver is still there.
	c.spec.Driver = subjDriver(d.cfg.Subject, spec.Prefix)
	c.alive, err = d.nc.Subscribe(c.spec.Driver, func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	body, _ := json.Marshal(c.spec)
	type answer struct {
		id  string
		err error
	}
	answers := make(chan answer, len(hellos))
	for _, h := range hellos {
		c.workers[h.ID] = &workerState{hello: h, spanBase: uint64(len(c.workers)+1) << workerSpanShift}
		c.order = append(c.order, h.ID)
		go func() {
			actx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			m, err := d.nc.RequestWithContext(actx, subjWorker(d.cfg.Subject, h.ID)+".cell", body)
			if err == nil {
				var r Reply
				if jerr := json.Unmarshal(m.Data, &r); jerr != nil {
					err = jerr
				} else if !r.OK {
					err = errors.New(r.Error)
				}
			}
			answers <- answer{h.ID, err}
		}()
	}
	var errs []error
	for range hellos {
		a := <-answers
		if a.err != nil {
			errs = append(errs, fmt.Errorf("worker %s: %w", a.id, a.err))
		}
	}
	if len(errs) > 0 {
		c.end(ctx, time.Second, false) // release the workers that did open it
		return nil, fmt.Errorf("%w: cell %s: %w", ErrWorker, spec.Prefix, errors.Join(errs...))
	}
	for _, id := range c.order {
		clk, err := d.probe(ctx, id, spec.Prefix, rt)
		if err != nil {
			c.end(ctx, time.Second, false)
			return nil, fmt.Errorf("%w: worker %s: clock: %w", ErrWorker, id, err)
		}
		ws := c.workers[id]
		ws.clock, ws.conv = clk, clk
		// The worker shifts its clock onto the driver's: then even the
		// timestamps that travel between workers (a chunk's write time,
		// read back by another worker) are on one clock. Its records need
		// no conversion once it did.
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := d.nc.RequestWithContext(sctx, subjWorker(d.cfg.Subject, id)+".shift", encodeShift(spec.Prefix, clk.Offset))
		cancel()
		if err == nil && string(m.Data) != "ok" {
			err = fmt.Errorf("the worker has no cell %s", spec.Prefix)
		}
		if err != nil {
			c.end(ctx, time.Second, false)
			return nil, fmt.Errorf("%w: worker %s: clock shift: %w", ErrWorker, id, err)
		}
		ws.conv = Clock{RTT: clk.RTT, Samples: clk.Samples}
	}
	return c, nil
}

// probe estimates worker id's clock offset for the cell.
func (d *Coordinator) probe(ctx context.Context, id, prefix string, rt world.Runtime) (Clock, error) {
	subj := subjWorker(d.cfg.Subject, id) + ".clock"
	var samples []ClockSample
	for range d.cfg.ClockProbes {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		send := rt.Now()
		m, err := d.nc.RequestWithContext(pctx, subj, []byte(prefix))
		recv := rt.Now()
		cancel()
		if err != nil {
			return Clock{}, err
		}
		if len(m.Data) != 8 {
			return Clock{}, fmt.Errorf("the worker has no cell %s", prefix)
		}
		samples = append(samples, ClockSample{Send: send, Recv: recv, Remote: time.Duration(binary.BigEndian.Uint64(m.Data))})
	}
	clk, ok := EstimateOffset(samples)
	if !ok {
		return Clock{}, fmt.Errorf("no usable round trip")
	}
	return clk, nil
}

// Attach subscribes to the cell's records and feeds them to obs, on the
// driver's clock. A RunFinished record is passed on only once every other
// live worker's watermark shows that its records up to that instant
// arrived, so a run is never seen finished while another worker's step
// records of it are still in flight. detach stops feeding.
func (c *Session) Attach(ctx context.Context, obs engine.Observer) (detach func(), err error) {
	c.mu.Lock()
	c.obs = obs
	now := c.rt.Now()
	for _, ws := range c.workers {
		ws.seen = now // silence counts from here
	}
	c.mu.Unlock()
	sub, err := c.d.nc.Subscribe(subjRecords(c.d.cfg.Subject, c.spec.Prefix), c.onBatch)
	if err != nil {
		return nil, fmt.Errorf("cluster: records: %w", err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := c.d.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("cluster: records: %w", err)
	}
	byeSub, err := c.d.nc.Subscribe(subjBye(c.d.cfg.Subject), c.onBye)
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("cluster: bye: %w", err)
	}
	c.sub = sub
	c.loop.Add(1)
	go func() {
		defer c.loop.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				c.release()
			case <-c.stopCh:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(c.stopCh)
			c.loop.Wait()
			_ = byeSub.Unsubscribe()
			c.stopFeeding()
		})
	}, nil
}

// stopFeeding ends what the session passes to its observer: nothing is
// fed once it returns. The records subscription stays until End, which
// counts the batches the workers publish as they stop.
func (c *Session) stopFeeding() {
	c.mu.Lock()
	c.detached = true
	c.mu.Unlock()
	c.feeding.Wait()
}

func (c *Session) onBye(m *nats.Msg) {
	var b Bye
	if json.Unmarshal(m.Data, &b) != nil {
		return
	}
	c.mu.Lock()
	if ws := c.workers[b.ID]; ws != nil {
		ws.bye = true
		if st, ok := b.Cells[c.spec.Prefix]; ok {
			ws.left = &st
		}
	}
	c.mu.Unlock()
	c.release()
}

// onBatch handles one record batch (NATS calls it on one goroutine per
// subscription, in arrival order). The batch's records reach obs before its
// watermark and its run ends are recorded, so a run end released on the
// strength of this watermark never overtakes the records before it.
func (c *Session) onBatch(m *nats.Msg) {
	id, seq, wm, recs, err := decodeBatch(m.Data)
	c.mu.Lock()
	ws := c.workers[id]
	if err != nil || ws == nil {
		c.bad++
		c.mu.Unlock()
		return
	}
	ws.see(seq, len(recs) > 0)
	if c.detached {
		// The cell's runs are over: its records are counted (End), no
		// longer fed.
		c.mu.Unlock()
		return
	}
	c.feeding.Add(1)
	defer c.feeding.Done()
	obs, clk, base := c.obs, ws.conv, ws.spanBase
	c.mu.Unlock()
	so, spans := obs.(engine.SpanObserver)
	ends := 0
	for _, r := range recs {
		switch r.kind {
		case recStep:
			s := r.step
			s.Start, s.End = clk.ToDriver(s.Start), clk.ToDriver(s.End)
			obs.StepBody(r.run, s)
		case recHook:
			obs.HookCreated(r.run, r.token, clk.ToDriver(r.at))
		case recChunk:
			// Written is the writer's clock: right when the writer is this
			// worker (a stream's writer and reader steps may run on
			// different workers; see the package doc).
			ch := r.chunk
			ch.Written, ch.Read = clk.ToDriver(ch.Written), clk.ToDriver(ch.Read)
			obs.StreamChunk(r.run, ch)
		case recSpans:
			if !spans {
				continue
			}
			for i := range r.spans {
				s := &r.spans[i]
				s.Start, s.End = clk.ToDriver(s.Start), clk.ToDriver(s.End)
				s.ID, s.Parent, s.After = workerSpanID(base, s.ID), workerSpanID(base, s.Parent), workerSpanID(base, s.After)
			}
			so.Spans(r.run, r.spans)
		case recFinished:
			ends++
		}
	}
	now := c.rt.Now()
	c.mu.Lock()
	ws.wm, ws.seen, ws.hasWM, ws.silent = clk.ToDriver(wm), now, true, false
	if ends > 0 {
		for _, r := range recs {
			if r.kind == recFinished {
				c.pending = append(c.pending, finished{run: r.run, at: clk.ToDriver(r.at), failed: r.failed, from: id})
			}
		}
	}
	c.mu.Unlock()
	c.release()
}

// workerSpanID is a worker's span id in the session's id space (0 stays 0:
// no span).
func workerSpanID(base, id uint64) uint64 {
	if id == 0 {
		return 0
	}
	return base | id
}

// release passes on the held RunFinished records that no live worker can
// still have records before.
func (c *Session) release() {
	now := c.rt.Now()
	c.mu.Lock()
	if c.detached {
		c.mu.Unlock()
		return
	}
	obs := c.obs
	for _, ws := range c.workers {
		if now-ws.seen > c.d.cfg.Silence {
			ws.silent = true // dead or cut off: its records will not come
		}
	}
	var out []finished
	keep := c.pending[:0]
	for _, f := range c.pending {
		if c.covered(f) {
			out = append(out, f)
		} else {
			keep = append(keep, f)
		}
	}
	c.pending = keep
	c.mu.Unlock()
	for _, f := range out {
		obs.RunFinished(f.run, f.at, f.failed)
	}
}

// covered reports whether every live worker other than f's has sent its
// records up to f (watermark past f.at, allowing for both clocks' error).
func (c *Session) covered(f finished) bool {
	fromErr := c.workers[f.from].clock.RTT / 2
	for id, ws := range c.workers {
		if id == f.from || ws.gone() {
			continue
		}
		if !ws.hasWM || ws.wm-ws.clock.RTT/2 < f.at+fromErr {
			return false
		}
	}
	return true
}

// Report is what a cell's workers did.
type Report struct {
	Workers []WorkerReport
	// BadBatches counts record batches that did not decode.
	BadBatches int
	// Driver are the driver connection's asynchronous errors during the
	// cell.
	Driver world.Incidents
}

// WorkerReport is one worker's part in a cell.
type WorkerReport struct {
	ID string
	// Host and Concurrency are what the worker said in its hello.
	Host        string
	Concurrency int
	Clock       Clock
	// Stats are the worker's counts; Lost is set when it did not answer at
	// the end of the cell (it died or was cut off): its counts are missing.
	Stats WorkerStats
	// Drift is the change of the clock offset between the cell's start and
	// its end (HasDrift: the worker answered the second estimate).
	Drift    time.Duration
	HasDrift bool
	Lost     bool
	// Left is set when the worker stopped on a signal mid-cell (its
	// counts are those it said bye with).
	Left bool
	// LostBatches counts record batches the worker published that never
	// reached the driver: their records are missing from the cell.
	LostBatches uint64
}

// End tells every worker the cell is over (each stops its engine and
// publishes its last records) and returns the report. A worker that does
// not answer within timeout is reported Lost.
func (c *Session) End(ctx context.Context, timeout time.Duration) Report {
	return c.end(ctx, timeout, true)
}

func (c *Session) end(ctx context.Context, timeout time.Duration, reprobe bool) Report {
	type answer struct {
		id    string
		st    *WorkerStats
		clock *Clock
	}
	answers := make(chan answer, len(c.order))
	for _, id := range c.order {
		go func() {
			ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			defer cancel()
			var clk *Clock
			if reprobe {
				// A second estimate at the end shows how far the clocks
				// drifted apart during the cell.
				if k, err := c.d.probe(ectx, id, c.spec.Prefix, c.rt); err == nil {
					clk = &k
				}
			}
			m, err := c.d.nc.RequestWithContext(ectx, subjWorker(c.d.cfg.Subject, id)+".end", []byte(c.spec.Prefix))
			var st *WorkerStats
			if err == nil {
				var s WorkerStats
				if json.Unmarshal(m.Data, &s) == nil {
					st = &s
				}
			}
			answers <- answer{id, st, clk}
		}()
	}
	got := map[string]*WorkerStats{}
	clocks := map[string]*Clock{}
	for range c.order {
		a := <-answers
		got[a.id], clocks[a.id] = a.st, a.clock
	}
	_ = c.alive.Unsubscribe()
	// Every worker published its last batch before it answered; give the
	// records subscription a moment to hand them over before a batch not
	// seen counts as lost.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if c.allBatchesSeen(got) {
			break
		}
	}
	if c.sub != nil {
		_ = c.sub.Unsubscribe()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rep := Report{BadBatches: c.bad, Driver: c.d.errs.since(c.errs0)}
	for _, id := range c.order {
		ws := c.workers[id]
		wr := WorkerReport{ID: id, Host: ws.hello.Host, Concurrency: ws.hello.Concurrency, Clock: ws.clock}
		if k := clocks[id]; k != nil {
			wr.Drift, wr.HasDrift = k.Offset-ws.clock.Offset, true
		}
		switch {
		case got[id] != nil:
			wr.Stats = *got[id]
		case ws.left != nil: // stopped cleanly mid-cell
			wr.Stats, wr.Left = *ws.left, true
		default:
			wr.Lost = true
		}
		wr.LostBatches = ws.lost
		if !wr.Lost && wr.Stats.Batches > ws.batches {
			wr.LostBatches += wr.Stats.Batches - ws.batches
		}
		rep.Workers = append(rep.Workers, wr)
	}
	return rep
}

// allBatchesSeen reports whether every worker that answered got has had
// all its record batches seen.
func (c *Session) allBatchesSeen(got map[string]*WorkerStats) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, st := range got {
		if ws := c.workers[id]; st != nil && ws != nil && ws.batches < st.Batches {
			return false
		}
	}
	return true
}

// Incidents are the cell's incidents as its workers saw them: each
// worker's world's, plus the timeline records lost between a worker and
// the driver (unsent, or published and never seen) as drops.
func (r Report) Incidents() world.Incidents {
	inc := r.Driver
	for _, w := range r.Workers {
		if w.Stats.Incidents != nil {
			inc = inc.Add(*w.Stats.Incidents)
		}
		if lost := int64(w.LostBatches) + w.Stats.Unsent; lost > 0 {
			inc.Dropped += lost
			inc.Last = fmt.Sprintf("worker %s: %d record batches lost, %d records unsent", w.ID, w.LostBatches, w.Stats.Unsent)
		}
	}
	if r.BadBatches > 0 {
		inc.Dropped += int64(r.BadBatches)
		inc.Last = fmt.Sprintf("%d record batches did not decode", r.BadBatches)
	}
	return inc
}

// IDs are the ids of the report's workers.
func (r Report) IDs() []string {
	out := make([]string, len(r.Workers))
	for i, w := range r.Workers {
		out[i] = w.ID
	}
	return out
}

// Redeliveries sums the workers' redelivered deliveries.
func (r Report) Redeliveries() int64 {
	var n int64
	for _, w := range r.Workers {
		n += w.Stats.Redeliveries
	}
	return n
}
