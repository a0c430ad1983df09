package mem

import (
	"context"
	"fmt"
	"time"

	"github.com/durabench/durabench/world"
)

// stream is one stream's chunks. wake is closed and replaced on every write
// and on close, so long-polling readers wake without polling.
type stream struct {
	chunks []world.Chunk
	closed bool
	wake   chan struct{}
}

// streamLocked returns the named stream, creating it empty: a reader may
// start before the writer's first chunk. w.streamsMu must be held.
func (w *World) streamLocked(name string) *stream {
	s := w.streams[name]
	if s == nil {
		s = &stream{wake: make(chan struct{})}
		w.streams[name] = s
	}
	return s
}

func (s *stream) notify() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// WriteChunk appends c to the stream; c.Index must be the next index.
func (w *World) WriteChunk(ctx context.Context, name string, c world.Chunk) error {
	if err := w.checkOpen(ctx); err != nil {
		return err
	}
	w.streamsMu.Lock()
	defer w.streamsMu.Unlock()
	s := w.streamLocked(name)
	if s.closed {
		return fmt.Errorf("mem: write to closed stream %q: %w", name, world.ErrGone)
	}
	if c.Index != len(s.chunks) {
		return fmt.Errorf("mem: stream %q: chunk index %d, next is %d: %w", name, c.Index, len(s.chunks), world.ErrConflict)
	}
	c.Data = clone(c.Data)
	s.chunks = append(s.chunks, c)
	s.notify()
	return nil
}

// ReadChunks returns the chunks from index from on, waiting up to wait for
// the first one when there is none yet.
func (w *World) ReadChunks(ctx context.Context, name string, from int, wait time.Duration) ([]world.Chunk, bool, error) {
	if from < 0 {
		return nil, false, fmt.Errorf("mem: stream %q: negative index %d", name, from)
	}
	var timeout <-chan time.Time
	for {
		if err := w.checkOpen(ctx); err != nil {
			return nil, false, err
		}
		w.streamsMu.Lock()
		s := w.streamLocked(name)
		if from < len(s.chunks) {
			out := append([]world.Chunk(nil), s.chunks[from:]...)
			closed := s.closed
			w.streamsMu.Unlock()
			return out, closed, nil
		}
		if s.closed || wait <= 0 {
			closed := s.closed
			w.streamsMu.Unlock()
			return nil, closed, nil
		}
		wake := s.wake
		w.streamsMu.Unlock()
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-wake:
		case <-timeout:
			wait = 0 // one last look, then return empty
		case <-ctx.Done():
		case <-w.done:
		}
	}
}

// CloseStream closes the stream and wakes its readers.
func (w *World) CloseStream(ctx context.Context, name string) error {
	if err := w.checkOpen(ctx); err != nil {
		return err
	}
	w.streamsMu.Lock()
	defer w.streamsMu.Unlock()
	s := w.streamLocked(name)
	if !s.closed {
		s.closed = true
		s.notify()
	}
	return nil
}
