package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/durabench/durabench/world"
)

type stream struct {
	chunks  []world.Chunk
	closed  bool
	waiting waiters // readers parked until a chunk or the close
}

func (w *World) stream(name string) *stream {
	st := w.streams[name]
	if st == nil {
		st = &stream{}
		w.streams[name] = st
	}
	return st
}

// WriteChunk appends c to the stream; c.Index must be the next index.
func (w *World) WriteChunk(ctx context.Context, name string, c world.Chunk) error {
	if !w.s.inTask() {
		_, err := outside(w, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, w.WriteChunk(ctx, name, c) })
		return err
	}
	if err := w.enter(ctx); err != nil {
		return err
	}
	if err := w.await(world.OpWriteChunk); err != nil {
		return err
	}
	st := w.stream(name)
	switch {
	case st.closed:
		w.s.record(string(world.OpWriteChunk), "", fmt.Sprintf("%s #%d -> gone", name, c.Index))
		return fmt.Errorf("sim: write to stream %s: closed: %w", name, world.ErrGone)
	case c.Index != len(st.chunks):
		w.s.record(string(world.OpWriteChunk), "", fmt.Sprintf("%s #%d -> conflict", name, c.Index))
		return fmt.Errorf("sim: write chunk %d to stream %s: next index is %d: %w", c.Index, name, len(st.chunks), world.ErrConflict)
	}
	c.Data = append([]byte(nil), c.Data...)
	st.chunks = append(st.chunks, c)
	if w.s.trace != nil {
		w.s.record(string(world.OpWriteChunk), "", fmt.Sprintf("%s #%d", name, c.Index))
	}
	st.waiting.wakeAll(w.s)
	return nil
}

// ReadChunks returns the chunks from index from on, parking up to wait (of
// virtual time) for one when there is none yet.
func (w *World) ReadChunks(ctx context.Context, name string, from int, wait time.Duration) ([]world.Chunk, bool, error) {
	type res struct {
		chunks []world.Chunk
		closed bool
	}
	if !w.s.inTask() {
		r, err := outside(w, ctx, func(ctx context.Context) (res, error) {
			c, closed, err := w.ReadChunks(ctx, name, from, wait)
			return res{c, closed}, err
		})
		return r.chunks, r.closed, err
	}
	if err := w.enter(ctx); err != nil {
		return nil, false, err
	}
	if err := w.await(world.OpReadChunks); err != nil {
		return nil, false, err
	}
	from = max(from, 0)
	st := w.stream(name)
	if from >= len(st.chunks) && !st.closed && wait > 0 {
		st.waiting.add(w.s.cur)
		w.s.wakeAt(w.s.cur, w.s.now+wait)
		w.s.park()
		if w.closed {
			return nil, false, world.ErrClosed
		}
	}
	var out []world.Chunk
	if from < len(st.chunks) {
		out = append(out, st.chunks[from:]...)
	}
	closed := st.closed // every chunk from `from` on is returned
	if w.s.trace != nil {
		w.s.record(string(world.OpReadChunks), "", fmt.Sprintf("%s from=%d -> n=%d closed=%v", name, from, len(out), closed))
	}
	return out, closed, nil
}

// CloseStream closes the stream; closing twice is not an error.
func (w *World) CloseStream(ctx context.Context, name string) error {
	if !w.s.inTask() {
		_, err := outside(w, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, w.CloseStream(ctx, name) })
		return err
	}
	if err := w.enter(ctx); err != nil {
		return err
	}
	if err := w.await(world.OpCloseStream); err != nil {
		return err
	}
	st := w.stream(name)
	st.closed = true
	w.s.record(string(world.OpCloseStream), "", name)
	st.waiting.wakeAll(w.s)
	return nil
}
