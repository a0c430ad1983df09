package natsworld

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/durabench/durabench/world"
)

// maxCASRounds bounds how often one Append re-reads the log after losing a
// compare-and-swap race before it gives up with ErrTransient.
const maxCASRounds = 64

// runState is the client's cache of one run's log, enough to enforce the
// entity rules without reading the log on every append. Appends to one run
// are serialized in-process by mu; other processes are fenced by the
// expected-last-subject-sequence header, which acts as a compare-and-swap on
// lastSeq: on a mismatch the cache catches up from lastSeq and re-checks.
type runState struct {
	subj string

	mu      sync.Mutex // serializes appends and guards the fields below
	dirty   bool       // the log may have moved past lastSeq (catch up first)
	lastSeq uint64     // stream sequence of the run's last known event
	count   int64      // number of known events = position of the last one
	status  world.RunStatus
	ids     map[string]int64 // event ID -> position
	steps   map[string]uint8 // step -> stepOpen | stepDone
	hooks   map[string]bool  // hook tokens created in this run
	pending int              // steps open
	// Pipelined appends only (see appendPipelined): events applied but
	// not acknowledged yet, cond to wait for them, and broken when an
	// applied event may not have been stored (rebuild the cache).
	inflight int
	cond     *sync.Cond
	broken   bool

	// Read without mu, so GetRun and Load never wait behind an append's
	// round trip.
	knownSeq atomic.Uint64             // lastSeq, for read-your-writes checks
	info     atomic.Pointer[world.Run] // immutable part of the run (no Status)
}

const (
	stepOpen = 1
	stepDone = 2
)

func (rs *runState) exists() bool { return rs.count > 0 }

// apply folds one stored event into the state.
func (rs *runState) apply(ev world.Event, seq uint64) {
	rs.count++
	rs.lastSeq = seq
	if ev.ID != "" {
		if _, dup := rs.ids[ev.ID]; !dup {
			rs.ids[ev.ID] = rs.count
		}
	}
	switch ev.Kind {
	case world.RunCreated:
		rs.status = world.StatusPending
	case world.RunStarted:
		if !rs.status.Terminal() {
			rs.status = world.StatusRunning
		}
	case world.RunCompleted:
		rs.status = world.StatusCompleted
	case world.RunFailed:
		rs.status = world.StatusFailed
	case world.StepCreated:
		if rs.steps[ev.Entity] == 0 {
			rs.steps[ev.Entity] = stepOpen
			rs.pending++
		}
	case world.StepCompleted, world.StepFailed:
		if rs.steps[ev.Entity] == stepOpen {
			rs.pending--
		}
		rs.steps[ev.Entity] = stepDone
	case world.HookCreated:
		rs.hooks[ev.Entity] = true
	}
	rs.knownSeq.Store(seq)
}

// appendMsg is the publish that appends ev to the run's subject: a
// compare-and-swap on the run's last sequence, deduplicated by the event ID.
func (rs *runState) appendMsg(run string, ev world.Event) *nats.Msg {
	msg := nats.NewMsg(rs.subj)
	msg.Data = encodeEvent(ev, rs.count+1, rs.statusAfter(ev.Kind), runMeta{})
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rs.lastSeq, 10))
	if ev.ID != "" {
		msg.Header.Set(jetstream.MsgIDHeader, token(run)+"/"+ev.ID)
	}
	return msg
}

// statusAfter is the run status once ev is appended.
func (rs *runState) statusAfter(k world.EventKind) world.RunStatus {
	switch k {
	case world.RunCreated:
		return world.StatusPending
	case world.RunStarted:
		return world.StatusRunning
	case world.RunCompleted:
		return world.StatusCompleted
	case world.RunFailed:
		return world.StatusFailed
	}
	return rs.status
}

// run returns the cache entry of run id, creating an empty one.
func (w *World) run(id string) *runState {
	w.mu.Lock()
	defer w.mu.Unlock()
	rs := w.runs[id]
	if rs == nil {
		rs = &runState{
			subj:  w.subjLog + token(id),
			dirty: true,
			ids:   make(map[string]int64),
			steps: make(map[string]uint8),
			hooks: make(map[string]bool),
		}
		rs.cond = sync.NewCond(&rs.mu)
		w.runs[id] = rs
	}
	return rs
}

// catchUp reads the run's events after lastSeq into the cache. atLeast is a
// sequence known to exist (0 if none), so a stale replica cannot hide it.
// Caller holds rs.mu.
func (w *World) catchUp(ctx context.Context, rs *runState, atLeast uint64) error {
	datas, last, err := w.readSubject(ctx, w.logStream, rs.subj, rs.lastSeq+1, atLeast)
	if err != nil {
		return err
	}
	for i, d := range datas {
		ev, _, meta, err := decodeEvent(d)
		if err != nil {
			return fmt.Errorf("%w: %s event %d", err, rs.subj, rs.count+1)
		}
		if err := checkPosition(rs.subj, ev, rs.count+1); err != nil {
			return err
		}
		if ev.Kind == world.RunCreated && rs.info.Load() == nil {
			rs.info.Store(&world.Run{Deployment: meta.Deployment, SpecVersion: meta.SpecVersion,
				Input: append([]byte(nil), ev.Data...)})
		}
		// Only the last event's sequence is known (from the end of
		// batch); earlier ones need none: lastSeq is what the next
		// compare-and-swap expects.
		seq := rs.lastSeq
		if i == len(datas)-1 {
			seq = last
		}
		rs.apply(ev, seq)
	}
	rs.dirty = false
	return nil
}

// CreateRun appends run_created (position 1) with the run's deployment, spec
// version and input, guarded by "no message on the run's subject yet", then
// adds the run to the run index.
func (w *World) CreateRun(ctx context.Context, r world.Run) error {
	const op = "create run"
	if err := w.check(op); err != nil {
		return err
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	rs := w.run(r.ID)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.exists() {
		return fmt.Errorf("natsworld: %s %q: %w", op, r.ID, world.ErrConflict)
	}
	ev := world.Event{Kind: world.RunCreated, Data: r.Input}
	msg := nats.NewMsg(rs.subj)
	msg.Data = encodeEvent(ev, 1, world.StatusPending, runMeta{Deployment: r.Deployment, SpecVersion: r.SpecVersion})
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	ack, err := w.logPublish(ctx, msg)
	if err != nil {
		rs.dirty = true
		if isWrongLastSeq(err) {
			return fmt.Errorf("natsworld: %s %q: %w", op, r.ID, world.ErrConflict)
		}
		return w.err(ctx, op, err)
	}
	info := r
	info.Status = ""
	info.Input = append([]byte(nil), r.Input...)
	rs.info.Store(&info)
	rs.apply(ev, ack.Sequence)
	rs.dirty = false

	idx := nats.NewMsg(w.subjRuns)
	idx.Data = []byte(r.ID)
	idx.Header.Set(jetstream.MsgIDHeader, "run/"+token(r.ID))
	if _, err := w.logPublish(ctx, idx); err != nil {
		return w.err(ctx, op+" index", err)
	}
	return nil
}

// GetRun reads the run's last event for its status (one direct get) and its
// first event for the rest, which is cached because it never changes.
func (w *World) GetRun(ctx context.Context, id string) (world.Run, error) {
	const op = "get run"
	if err := w.check(op); err != nil {
		return world.Run{}, err
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	rs := w.run(id)
	last, err := w.lastOrAbsent(ctx, w.logStream, rs.subj, w.mustSee(rs.knownSeq.Load()))
	if err != nil {
		return world.Run{}, w.err(ctx, op, err)
	}
	if last == nil {
		return world.Run{}, fmt.Errorf("natsworld: %s %q: %w", op, id, world.ErrNotFound)
	}
	_, status, _, err := decodeEvent(last.Data)
	if err != nil {
		return world.Run{}, err
	}
	info := rs.info.Load()
	if info == nil {
		first, _, _, err := w.directBatch(ctx, w.logStream, rs.subj, 1, 1)
		if err != nil {
			return world.Run{}, w.err(ctx, op, err)
		}
		if len(first) == 0 && w.cfg.Replicas > 1 {
			// The last event was there, so this replica lags: ask the leader.
			m, err := w.leaderNext(ctx, w.logStream, rs.subj, 1)
			if err != nil {
				return world.Run{}, w.err(ctx, op, err)
			}
			if m != nil {
				first = [][]byte{m.Data}
			}
		}
		if len(first) == 0 {
			return world.Run{}, fmt.Errorf("natsworld: %s %q: %w", op, id, world.ErrNotFound)
		}
		ev, _, meta, err := decodeEvent(first[0])
		if err != nil {
			return world.Run{}, err
		}
		info = &world.Run{Deployment: meta.Deployment, SpecVersion: meta.SpecVersion,
			Input: append([]byte(nil), ev.Data...)}
		rs.info.CompareAndSwap(nil, info)
	}
	out := *info
	out.ID = id
	out.Status = status
	out.Input = append([]byte(nil), info.Input...)
	return out, nil
}

// ListRuns reads the run index.
func (w *World) ListRuns(ctx context.Context) ([]string, error) {
	const op = "list runs"
	if err := w.check(op); err != nil {
		return nil, err
	}
	ctx, cancel := w.readCtx(ctx)
	defer cancel()
	datas, _, err := w.readSubject(ctx, w.logStream, w.subjRuns, 1, 0)
	if err != nil {
		return nil, w.err(ctx, op, err)
	}
	seen := make(map[string]bool, len(datas))
	ids := make([]string, 0, len(datas))
	for _, d := range datas {
		id := string(d)
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Load reads the run's whole log from the server (a batched direct get), so
// its cost grows with the log's length.
func (w *World) Load(ctx context.Context, run string) ([]world.Event, error) {
	const op = "load"
	if err := w.check(op); err != nil {
		return nil, err
	}
	ctx, cancel := w.readCtx(ctx)
	defer cancel()
	rs := w.run(run)
	datas, _, err := w.readSubject(ctx, w.logStream, rs.subj, 1, w.mustSee(rs.knownSeq.Load()))
	if err != nil {
		return nil, w.err(ctx, op, err)
	}
	if len(datas) == 0 {
		return nil, fmt.Errorf("natsworld: %s %q: %w", op, run, world.ErrNotFound)
	}
	evs := make([]world.Event, len(datas))
	for i, d := range datas {
		ev, _, _, err := decodeEvent(d)
		if err != nil {
			return nil, fmt.Errorf("%w: %s event %d", err, rs.subj, i+1)
		}
		if err := checkPosition(rs.subj, ev, int64(i+1)); err != nil {
			return nil, w.err(ctx, op, err)
		}
		evs[i] = ev
	}
	return evs, nil
}

// errStale asks Append to catch up and check again.
var errStale = errors.New("stale cache")

// checkAppend applies the entity rules of world.Log to the cached state.
// It returns a result when the append is a duplicate, errStale when the
// writer saw more than the cache holds, a typed error for a violation, and
// (zero, nil) when the event may be published.
func (w *World) checkAppend(rs *runState, ev world.Event, pre world.Precondition) (world.AppendResult, bool, error) {
	if !rs.exists() {
		return world.AppendResult{}, false, world.ErrNotFound
	}
	if ev.ID != "" {
		if pos, ok := rs.ids[ev.ID]; ok {
			return world.AppendResult{Pos: pos, Duplicate: true, Pending: rs.pending}, true, nil
		}
	}
	if rs.status.Terminal() {
		return world.AppendResult{}, false, world.ErrGone
	}
	if w.caps.Guard && pre.Guarded && pre.LastPos != rs.count {
		if pre.LastPos > rs.count {
			return world.AppendResult{}, false, errStale
		}
		return world.AppendResult{}, false, world.ErrPrecondition
	}
	switch ev.Kind {
	case world.RunCreated:
		return world.AppendResult{}, false, world.ErrConflict
	case world.StepCreated:
		if rs.steps[ev.Entity] != 0 {
			return world.AppendResult{}, false, world.ErrConflict
		}
	case world.StepStarted, world.StepCompleted, world.StepFailed, world.StepRetrying:
		switch rs.steps[ev.Entity] {
		case 0:
			return world.AppendResult{}, false, world.ErrNotFound
		case stepDone:
			return world.AppendResult{}, false, world.ErrConflict
		}
	case world.HookCreated:
		if rs.hooks[ev.Entity] {
			return world.AppendResult{}, false, world.ErrConflict
		}
	case world.HookReceived:
		if !rs.hooks[ev.Entity] {
			return world.AppendResult{}, false, world.ErrNotFound
		}
	}
	return world.AppendResult{}, false, nil
}

// Append enforces the rules documented on world.Log against the run's cached
// state and publishes the event with the run's last known sequence as the
// expected-last-subject-sequence. One publish round trip per append; a lost
// race (another process appended) costs an incremental read and a retry.
func (w *World) Append(ctx context.Context, run string, ev world.Event, pre world.Precondition) (world.AppendResult, error) {
	op := "append " + ev.Kind.String()
	if err := w.check(op); err != nil {
		return world.AppendResult{}, err
	}
	if ev.Kind < world.RunCreated || ev.Kind > world.StreamClosed {
		return world.AppendResult{}, fmt.Errorf("natsworld: append: unknown event kind %d", ev.Kind)
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	rs := w.run(run)
	if w.pipelined() {
		return w.appendPipelined(ctx, rs, run, ev, pre)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	// Pipelining was just turned off: let its appends finish.
	for rs.inflight > 0 {
		rs.cond.Wait()
	}
	if rs.broken {
		rs.reset()
		rs.broken = false
	}

	shared := w.shared
	var claimed bool // hook token claimed by this call
	var atLeast uint64
	for round := 0; round < maxCASRounds; round++ {
		if rs.dirty || !rs.exists() {
			if err := w.catchUp(ctx, rs, atLeast); err != nil {
				rs.dirty = true
				return world.AppendResult{}, w.err(ctx, op, err)
			}
		}
		res, done, err := w.checkAppend(rs, ev, pre)
		if errors.Is(err, errStale) {
			rs.dirty = true
			atLeast = 0
			if round > 0 {
				// Caught up and the writer still claims a longer log:
				// it saw positions that do not exist.
				err = world.ErrPrecondition
			} else {
				continue
			}
		}
		if err != nil && shared && !rs.dirty && round == 0 {
			rs.dirty = true
			continue
		}
		if err != nil {
			w.releaseHook(ctx, claimed, ev.Entity)
			return world.AppendResult{}, fmt.Errorf("natsworld: %s to run %q: %w", op, run, err)
		}
		if done {
			return res, nil
		}
		if err := w.claimNewHook(ctx, run, ev, &claimed); err != nil {
			return world.AppendResult{}, w.err(ctx, op, err)
		}

		msg := rs.appendMsg(run, ev)
		ack, err := w.publish(ctx, msg)
		switch {
		case err == nil && !ack.Duplicate:
			if ack.Sequence <= rs.lastSeq {
				// Cannot happen with a working server; do not corrupt the cache.
				rs.dirty = true
				continue
			}
			rs.apply(ev, ack.Sequence)
			if rs.status.Terminal() && (ev.Kind == world.RunCompleted || ev.Kind == world.RunFailed) {
				w.retire(run)
			}
			return world.AppendResult{Pos: rs.count, Pending: rs.pending}, nil
		case err == nil:
			// The message id is already in the stream: an earlier attempt of
			// this append landed (R3 answers "duplicate" to a retried guarded
			// append). Read up to it and report the duplicate.
			rs.dirty, atLeast = true, ack.Sequence
		case isWrongLastSeq(err):
			// Another writer appended, or a single server answered a retried
			// append with "wrong last sequence": read what is there.
			rs.dirty, atLeast = true, rs.lastSeq+1
		default:
			// The append may or may not have landed.
			rs.dirty = true
			return world.AppendResult{}, w.err(ctx, op, err)
		}
	}
	return world.AppendResult{}, fmt.Errorf("natsworld: %s to run %q: lost %d compare-and-swap rounds: %w",
		op, run, maxCASRounds, world.ErrTransient)
}

// claimNewHook claims a hook_created's token for run before the append is
// published, once per append (claimed records it across retries).
func (w *World) claimNewHook(ctx context.Context, run string, ev world.Event, claimed *bool) error {
	if ev.Kind != world.HookCreated || *claimed {
		return nil
	}
	if err := w.claimHook(ctx, ev.Entity, run); err != nil {
		return err
	}
	*claimed = true
	return nil
}

// claimHook records token -> run, create-only: the hook subject must have no
// message yet. A token already claimed by the same run (a leftover of an
// append that failed after claiming) is claimed again.
func (w *World) claimHook(ctx context.Context, tok, run string) error {
	subj := w.subjHook + token(tok)
	msg := nats.NewMsg(subj)
	msg.Data = []byte(run)
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	ack, err := w.logPublish(ctx, msg)
	if err == nil {
		w.mu.Lock()
		w.hooks[tok] = ack.Sequence
		w.mu.Unlock()
		return nil
	}
	if !isWrongLastSeq(err) {
		return err
	}
	owner, err := w.HookRun(ctx, tok)
	if err != nil {
		return err
	}
	if owner != run {
		return fmt.Errorf("natsworld: hook token %q belongs to run %q: %w", tok, owner, world.ErrConflict)
	}
	return nil
}

// releaseHook undoes a claim whose hook_created was not appended.
func (w *World) releaseHook(ctx context.Context, claimed bool, tok string) {
	if !claimed {
		return
	}
	w.mu.Lock()
	delete(w.hooks, tok)
	w.mu.Unlock()
	if s, err := w.js.Stream(ctx, w.logStream); err == nil {
		_ = s.Purge(ctx, jetstream.WithPurgeSubject(w.subjHook+token(tok)))
	}
}

// HookRun returns the run that created the hook token: one direct get of
// the token's subject. A token claimed by this process is known to exist,
// so a stale replica's answer falls back to the leader.
func (w *World) HookRun(ctx context.Context, tok string) (string, error) {
	const op = "hook lookup"
	if err := w.check(op); err != nil {
		return "", err
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	w.mu.Lock()
	seq := w.hooks[tok]
	w.mu.Unlock()
	m, err := w.lastOrAbsent(ctx, w.logStream, w.subjHook+token(tok), w.mustSee(seq))
	if err != nil {
		return "", w.err(ctx, op, err)
	}
	if m == nil {
		return "", fmt.Errorf("natsworld: %s %q: %w", op, tok, world.ErrNotFound)
	}
	return string(m.Data), nil
}

// mustSee returns seq when reads may be served by a lagging replica (so a
// read must be checked against what this process already wrote), else 0.
func (w *World) mustSee(seq uint64) uint64 {
	if w.cfg.Replicas > 1 {
		return seq
	}
	return 0
}
