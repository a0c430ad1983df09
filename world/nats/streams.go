package natsworld

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/durabench/durabench/world"
)

// chunkWriter caches a stream's write position. Writes are serialized per
// stream in-process and fenced against other writers by the
// expected-last-subject-sequence, like log appends.
type chunkWriter struct {
	subj    string
	mu      sync.Mutex
	loaded  bool
	lastSeq uint64
	next    int
	closed  bool
	// known is lastSeq for readers in this process (read-your-writes)
	// without taking mu, which is held across a publish.
	known atomic.Uint64
}

func (w *World) writer(stream string) *chunkWriter {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writerLocked(stream)
}

// writerLocked is writer with w.mu held.
func (w *World) writerLocked(stream string) *chunkWriter {
	cw := w.writers[stream]
	if cw == nil {
		cw = &chunkWriter{subj: w.subjChunk + token(stream)}
		w.writers[stream] = cw
	}
	return cw
}

// load reads the stream's last message into the cache. Caller holds cw.mu.
func (w *World) loadWriter(ctx context.Context, cw *chunkWriter) error {
	m, err := w.lastOnSubject(ctx, w.chunkStream, cw.subj, cw.lastSeq)
	if err != nil {
		return err
	}
	cw.loaded = true
	if m == nil {
		return nil
	}
	typ, c, err := decodeChunk(m.Data)
	if err != nil {
		return err
	}
	cw.lastSeq = m.Seq
	switch typ {
	case chunkClose:
		cw.closed, cw.next = true, c.Index
	default:
		cw.next = c.Index + 1
	}
	return nil
}

// writeChunk publishes one chunk or close marker guarded by the cached last
// sequence. Caller holds cw.mu.
func (w *World) writeChunk(ctx context.Context, cw *chunkWriter, typ byte, c world.Chunk) error {
	for round := 0; round < maxCASRounds; round++ {
		if !cw.loaded {
			if err := w.loadWriter(ctx, cw); err != nil {
				return err
			}
		}
		if cw.closed {
			if typ == chunkClose {
				return nil
			}
			return world.ErrGone
		}
		if typ == chunkClose {
			c.Index = cw.next
		} else if c.Index != cw.next {
			if round == 0 && w.shared {
				cw.loaded = false // another writer may have moved it
				continue
			}
			return fmt.Errorf("chunk index %d, next is %d: %w", c.Index, cw.next, world.ErrConflict)
		}
		msg := nats.NewMsg(cw.subj)
		msg.Data = encodeChunk(typ, c)
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(cw.lastSeq, 10))
		ack, err := w.publish(ctx, msg)
		switch {
		case err == nil:
			cw.lastSeq = ack.Sequence
			cw.known.Store(ack.Sequence)
			if typ == chunkClose {
				cw.closed = true
			} else {
				cw.next++
			}
			return nil
		case isWrongLastSeq(err):
			cw.loaded = false
		default:
			cw.loaded = false
			return err
		}
	}
	return fmt.Errorf("lost %d compare-and-swap rounds: %w", maxCASRounds, world.ErrTransient)
}

// WriteChunk appends c to the stream's subject; c.Index must be the next
// index (ErrConflict), and the stream must be open (ErrGone).
func (w *World) WriteChunk(ctx context.Context, stream string, c world.Chunk) error {
	const op = "stream write"
	if err := w.check(op); err != nil {
		return err
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	cw := w.writer(stream)
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if err := w.writeChunk(ctx, cw, chunkData, c); err != nil {
		return w.err(ctx, fmt.Sprintf("%s %q", op, stream), err)
	}
	return nil
}

// CloseStream appends a close marker; closing twice is not an error.
func (w *World) CloseStream(ctx context.Context, stream string) error {
	const op = "stream close"
	if err := w.check(op); err != nil {
		return err
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	cw := w.writer(stream)
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if err := w.writeChunk(ctx, cw, chunkClose, world.Chunk{WrittenAt: w.rt.Now()}); err != nil {
		return w.err(ctx, fmt.Sprintf("%s %q", op, stream), err)
	}
	return nil
}

// chunkReader follows one stream with an ordered consumer (server push), so
// a waiting ReadChunks wakes as soon as a chunk is stored.
type chunkReader struct {
	mu     sync.Mutex
	chunks []world.Chunk
	closed bool
	err    error
	wake   chan struct{} // closed and replaced on every change
	seen   uint64        // stream sequence of the last message delivered
	cc     jetstream.ConsumeContext
	once   sync.Once
}

func (r *chunkReader) stop() {
	r.once.Do(func() {
		if r.cc != nil {
			r.cc.Stop()
		}
	})
}

// fresh reports whether nothing was delivered yet.
func (r *chunkReader) fresh() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen == 0
}

func (r *chunkReader) notify() {
	close(r.wake)
	r.wake = make(chan struct{})
}

func (w *World) reader(ctx context.Context, stream string) (*chunkReader, error) {
	w.mu.Lock()
	r := w.readers[stream]
	if r != nil {
		w.mu.Unlock()
		return r, nil
	}
	r = &chunkReader{wake: make(chan struct{})}
	w.readers[stream] = r
	r.mu.Lock() // held until the consumer runs, so readers wait for it
	w.mu.Unlock()
	defer r.mu.Unlock()

	fail := func(err error) (*chunkReader, error) {
		w.mu.Lock()
		delete(w.readers, stream)
		w.mu.Unlock()
		r.err = err
		return nil, err
	}
	cons, err := w.js.OrderedConsumer(ctx, w.chunkStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{w.subjChunk + token(stream)},
	})
	if err != nil {
		return fail(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		typ, c, err := decodeChunk(m.Data())
		r.mu.Lock()
		defer r.mu.Unlock()
		if meta, merr := m.Metadata(); merr == nil {
			r.seen = meta.Sequence.Stream
		}
		if r.closed {
			return
		}
		switch {
		case err != nil:
			r.err = err
		case typ == chunkClose:
			r.closed = true
			go r.stop()
		case c.Index == len(r.chunks):
			r.chunks = append(r.chunks, c)
		}
		r.notify()
	})
	if err != nil {
		return fail(err)
	}
	r.cc = cc
	return r, nil
}

// ReadChunks returns the chunks from index from on, waiting up to wait for
// at least one. The first read of a stream starts an ordered consumer that
// keeps the stream's chunks in memory until Close.
func (w *World) ReadChunks(ctx context.Context, stream string, from int, wait time.Duration) ([]world.Chunk, bool, error) {
	const op = "stream read"
	if err := w.check(op); err != nil {
		return nil, false, err
	}
	if from < 0 {
		from = 0
	}
	rctx, cancel := w.opCtx(ctx)
	defer cancel()
	r, err := w.reader(rctx, stream)
	if err != nil {
		return nil, false, w.err(rctx, fmt.Sprintf("%s %q", op, stream), err)
	}
	// Everything stored before this read must be in the answer: a sequence
	// this process wrote, or else the subject's last one at the first read.
	need := w.writer(stream).known.Load()
	if need == 0 && r.fresh() {
		last, err := w.lastOnSubject(rctx, w.chunkStream, w.subjChunk+token(stream), 0)
		if err != nil {
			return nil, false, w.err(rctx, fmt.Sprintf("%s %q", op, stream), err)
		}
		if last != nil {
			need = last.Seq
		}
	}
	var timer <-chan time.Time
	for {
		r.mu.Lock()
		if r.err != nil {
			err := r.err
			r.mu.Unlock()
			return nil, false, w.err(rctx, fmt.Sprintf("%s %q", op, stream), err)
		}
		if r.seen < need && !r.closed {
			wake := r.wake
			r.mu.Unlock()
			select {
			case <-wake:
			case <-rctx.Done():
				return nil, false, w.err(rctx, fmt.Sprintf("%s %q", op, stream), rctx.Err())
			}
			continue
		}
		if from < len(r.chunks) || r.closed || wait <= 0 {
			var out []world.Chunk
			if from < len(r.chunks) {
				out = append(out, r.chunks[from:]...)
			}
			closed := r.closed
			r.mu.Unlock()
			return out, closed, nil
		}
		wake := r.wake
		r.mu.Unlock()
		if timer == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-wake:
		case <-timer:
			return nil, false, nil
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}
