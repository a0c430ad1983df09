// Package rawjs is the floor of the NATS world: a world.World whose every
// call is the one raw JetStream operation the NATS world builds on, issued
// directly with nats.go on an embedded server of the same configuration,
// and nothing else — no event encoding beyond a kind byte and the entity,
// no entity rules, no cache catch-up.
//
//	CreateRun  guarded publish (expected last subject sequence 0) + run index publish
//	GetRun     direct get of the run subject's last message
//	Append     guarded publish (expected last subject sequence, Nats-Msg-Id when the event has an ID)
//	Load       one batched direct get of the run subject
//	Publish    work-queue publish with Nats-Msg-Id
//	Consume    durable pull consumer (Messages), ack on success, nak on failure
//
// Appends to one run are serialized by a per-run lock, as the NATS world's
// compare-and-swap on the run's last sequence serializes them. Hooks and
// streams are not part of the floor and fail with ErrNotFound.
package rawjs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/durabench/durabench/internal/bench/floor"
	"github.com/durabench/durabench/world"
	natsworld "github.com/durabench/durabench/world/nats"
)

// Stream and subject names on the floor's own server.
const (
	logStream   = "raw_log"
	queueStream = "raw_queue"
	subjLog     = "raw.log."
	subjRuns    = "raw.runs"
	subjReady   = "raw.q.ready"
	subjAnchor  = "raw.q.anchor"
)

// maxPull is the pull batch of the NATS world's consumer.
const maxPull = 16

// loadBatch is how many events one Load reads: the floor's logs (fan-outs
// up to 1,365 branches) fit in one batch.
const loadBatch = 4096

// World is the raw JetStream floor. Its zero value is not usable; call New.
type World struct {
	floor.Unmeasured // hooks and streams

	srv *server.Server
	dir string
	nc  *nats.Conn
	js  jetstream.JetStream
	rt  *world.Real

	ready jetstream.Consumer

	mu   sync.Mutex
	runs map[string]*run
}

type run struct {
	mu      sync.Mutex
	subj    string
	lastSeq uint64
	count   int64
	ids     map[string]int64 // event ID -> position, to report duplicates
	pending int              // step_created minus step terminal events
}

var _ world.World = (*World)(nil)

// New starts an embedded server configured as the NATS world's (file
// storage in a temporary directory, no listener, in-process connection) and
// creates the log and work-queue streams and the pull consumer.
func New(ctx context.Context, visibilityTimeout time.Duration) (*World, error) {
	dir, err := os.MkdirTemp("", "durabench-rawjs-")
	if err != nil {
		return nil, err
	}
	w := &World{Unmeasured: floor.Unmeasured{Name: "rawjs"}, dir: dir, rt: world.NewReal(), runs: make(map[string]*run)}
	s, err := server.NewServer(&server.Options{ServerName: "durabench-rawjs", DontListen: true,
		JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("rawjs: server: %w", err)
	}
	w.srv = s
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		w.Close()
		return nil, errors.New("rawjs: server did not start within 10s")
	}
	if w.nc, err = nats.Connect("", nats.InProcessServer(s)); err != nil {
		w.Close()
		return nil, fmt.Errorf("rawjs: connect: %w", err)
	}
	if w.js, err = jetstream.New(w.nc); err != nil {
		w.Close()
		return nil, err
	}
	if err := w.setup(ctx, visibilityTimeout); err != nil {
		w.Close()
		return nil, fmt.Errorf("rawjs: setup: %w", err)
	}
	return w, nil
}

func (w *World) setup(ctx context.Context, vt time.Duration) error {
	if vt <= 0 {
		vt = world.DefaultVisibilityTimeout
	}
	for _, sc := range []jetstream.StreamConfig{
		{Name: logStream, Subjects: []string{subjLog + ">", subjRuns}, Storage: jetstream.FileStorage,
			Duplicates: 10 * time.Minute, AllowDirect: true},
		{Name: queueStream, Subjects: []string{subjReady, subjAnchor}, Retention: jetstream.WorkQueuePolicy,
			Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute},
	} {
		if _, err := w.js.CreateOrUpdateStream(ctx, sc); err != nil {
			return err
		}
	}
	// The same anchor as the NATS world's queue, so both stores have the
	// same layout.
	if _, err := w.js.Publish(ctx, subjAnchor, nil); err != nil {
		return err
	}
	var err error
	w.ready, err = w.js.CreateOrUpdateConsumer(ctx, queueStream, jetstream.ConsumerConfig{
		Durable: "ready", FilterSubject: subjReady, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: vt, MaxDeliver: -1, MaxAckPending: 100_000,
	})
	return err
}

// Name returns "rawjs".
func (w *World) Name() string { return "rawjs" }

// Capabilities: no guard, redelivery, default visibility timeout.
func (w *World) Capabilities() world.Capabilities {
	return world.Capabilities{RetryStyle: world.Redeliver, VisibilityTimeout: world.DefaultVisibilityTimeout}
}

// Runtime is the real clock and goroutines.
func (w *World) Runtime() world.Runtime { return w.rt }

// Close stops the connection and the server and removes the store.
func (w *World) Close() error {
	if w.nc != nil {
		w.nc.Close()
	}
	if w.srv != nil {
		w.srv.Shutdown()
		w.srv.WaitForShutdown()
	}
	return os.RemoveAll(w.dir)
}

func (w *World) run(id string) *run {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.runs[id]
	if r == nil {
		r = &run{subj: subjLog + id, ids: make(map[string]int64)}
		w.runs[id] = r
	}
	return r
}

// CreateRun publishes the run's first event guarded by "no message on the
// subject yet", then the run index entry.
func (w *World) CreateRun(ctx context.Context, r world.Run) error {
	rs := w.run(r.ID)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	m := nats.NewMsg(rs.subj)
	m.Data = append([]byte{byte(world.RunCreated)}, r.Input...)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	ack, err := w.js.PublishMsg(ctx, m)
	if err != nil {
		return err
	}
	rs.lastSeq, rs.count = ack.Sequence, 1
	idx := nats.NewMsg(subjRuns)
	idx.Data = []byte(r.ID)
	idx.Header.Set(jetstream.MsgIDHeader, "run/"+r.ID)
	_, err = w.js.PublishMsg(ctx, idx)
	return err
}

// GetRun is one direct get of the run subject's last message.
func (w *World) GetRun(ctx context.Context, id string) (world.Run, error) {
	m, err := w.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+logStream+"."+subjLog+id, nil)
	if err != nil {
		return world.Run{}, err
	}
	if len(m.Data) == 0 && m.Header.Get("Status") != "" {
		return world.Run{}, fmt.Errorf("rawjs: run %q: %w", id, world.ErrNotFound)
	}
	return world.Run{ID: id, Status: world.StatusRunning}, nil
}

// ListRuns is not part of the floor.
func (w *World) ListRuns(context.Context) ([]string, error) { return nil, nil }

// Append is one guarded publish on the run's subject.
func (w *World) Append(ctx context.Context, runID string, ev world.Event, _ world.Precondition) (world.AppendResult, error) {
	rs := w.run(runID)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if ev.ID != "" {
		if pos, ok := rs.ids[ev.ID]; ok {
			return world.AppendResult{Pos: pos, Duplicate: true, Pending: rs.pending}, nil
		}
	}
	m := nats.NewMsg(rs.subj)
	m.Data = append([]byte{byte(ev.Kind)}, ev.Entity...)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rs.lastSeq, 10))
	if ev.ID != "" {
		m.Header.Set(jetstream.MsgIDHeader, runID+"/"+ev.ID)
	}
	ack, err := w.js.PublishMsg(ctx, m)
	if err != nil {
		return world.AppendResult{}, err
	}
	rs.lastSeq = ack.Sequence
	rs.count++
	if ev.ID != "" {
		rs.ids[ev.ID] = rs.count
	}
	switch ev.Kind {
	case world.StepCreated:
		rs.pending++
	case world.StepCompleted, world.StepFailed:
		rs.pending--
	}
	return world.AppendResult{Pos: rs.count, Pending: rs.pending}, nil
}

// Load is one batched direct get of the run's subject (the NATS world's
// read, without headers).
func (w *World) Load(ctx context.Context, runID string) ([]world.Event, error) {
	req, _ := json.Marshal(struct {
		Seq     uint64 `json:"seq"`
		NextFor string `json:"next_by_subj"`
		Batch   int    `json:"batch"`
		NoHdr   bool   `json:"no_hdr"`
	}{1, subjLog + runID, loadBatch, true})
	inbox := w.nc.NewInbox()
	// One slot per reply the batch can bring (and its end-of-batch
	// status), so the client never has to drop one.
	ch := make(chan *nats.Msg, loadBatch+1)
	sub, err := w.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := w.nc.PublishRequest("$JS.API.DIRECT.GET."+logStream, inbox, req); err != nil {
		return nil, err
	}
	var evs []world.Event
	for {
		select {
		case m := <-ch:
			if m.Header == nil || m.Header.Get("Status") == "" {
				ev := world.Event{Pos: int64(len(evs) + 1)}
				if len(m.Data) > 0 {
					ev.Kind, ev.Entity = world.EventKind(m.Data[0]), string(m.Data[1:])
				}
				evs = append(evs, ev)
				continue
			}
			if s := m.Header.Get("Status"); s != "204" && s != "404" {
				return nil, fmt.Errorf("rawjs: direct get: status %s", s)
			}
			if d, _ := sub.Dropped(); d > 0 {
				return nil, fmt.Errorf("rawjs: load %q: %d replies dropped: %w", runID, d, world.ErrTransient)
			}
			if len(evs) >= loadBatch {
				return nil, fmt.Errorf("rawjs: load %q: the log is longer than one batch (%d): the floor reads one", runID, loadBatch)
			}
			if len(evs) == 0 {
				return nil, fmt.Errorf("rawjs: load %q: %w", runID, world.ErrNotFound)
			}
			return evs, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Publish is one work-queue publish with a message id; the run rides in
// front of the body.
func (w *World) Publish(ctx context.Context, msg world.Message, _ world.PublishOptions) (bool, error) {
	m := nats.NewMsg(subjReady)
	m.Data = append(append([]byte(msg.Run), 0), msg.Body...)
	if msg.ID != "" {
		m.Header.Set(jetstream.MsgIDHeader, msg.ID)
	}
	ack, err := w.js.PublishMsg(ctx, m)
	if err != nil {
		return false, err
	}
	return ack.Duplicate, nil
}

// Consume pulls from the work queue as the NATS world does (Messages with
// a pull batch of min(concurrency, 16)), handing each message to h on its
// own goroutine, at most opt.Concurrency at once; ack on success, nak
// otherwise.
func (w *World) Consume(ctx context.Context, opt world.ConsumeOptions, h world.Handler) (world.Subscription, error) {
	conc := max(opt.Concurrency, 1)
	it, err := w.ready.Messages(jetstream.PullMaxMessages(min(conc, maxPull)))
	if err != nil {
		return nil, err
	}
	s := &subscription{it: it, slots: make(chan struct{}, conc), done: make(chan struct{})}
	hctx := context.WithoutCancel(ctx)
	go func() {
		defer close(s.done)
		for {
			s.slots <- struct{}{}
			// The NATS world's wait (natsworld.NextWait): a Next that
			// began while the iterator's previous pull request was still
			// being sent would otherwise wait, with messages pending, until
			// something else arrived — and the floor would be slower than
			// what it bounds.
			msg, err := it.Next(jetstream.NextMaxWait(natsworld.NextWait))
			if err != nil {
				<-s.slots
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					return // stopped
				}
				// A timeout, or a missed heartbeat on a loaded machine:
				// the iterator goes on pulling, and so does the floor.
				continue
			}
			s.handlers.Add(1)
			go func() {
				defer s.handlers.Done()
				defer func() { <-s.slots }()
				meta, err := msg.Metadata()
				if err != nil {
					_ = msg.Nak()
					return
				}
				data := msg.Data()
				i := bytes.IndexByte(data, 0)
				if i < 0 {
					_ = msg.Term()
					return
				}
				d := world.Delivery{Message: world.Message{Run: string(data[:i]), Body: data[i+1:]}, Attempt: int(meta.NumDelivered)}
				if h(hctx, d) == nil {
					_ = msg.Ack()
				} else {
					_ = msg.Nak()
				}
			}()
		}
	}()
	return s, nil
}

type subscription struct {
	it       jetstream.MessagesContext
	slots    chan struct{}
	done     chan struct{}
	handlers sync.WaitGroup
}

// Stop stops pulling and waits for running handlers.
func (s *subscription) Stop(ctx context.Context) error {
	s.it.Stop()
	finished := make(chan struct{})
	go func() {
		<-s.done
		s.handlers.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
