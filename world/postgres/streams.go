package pgworld

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/durabench/durabench/world"
)

// WriteChunk appends c to the stream: the schema's write_chunk function
// checks the index (ErrConflict) and the close (ErrGone) under the
// stream row's lock, inserts the chunk and notifies the readers.
func (w *World) WriteChunk(ctx context.Context, stream string, c world.Chunk) error {
	if err := w.check("write chunk"); err != nil {
		return err
	}
	ctx, cancel := w.callCtx(ctx)
	defer cancel()
	_, err := w.pool.Exec(ctx, w.q.writeChunk, stream, int32(c.Index), c.Data, int64(c.WrittenAt))
	return w.err(ctx, fmt.Sprintf("write chunk %d to %q", c.Index, stream), err)
}

// CloseStream closes the stream and notifies its readers.
func (w *World) CloseStream(ctx context.Context, stream string) error {
	if err := w.check("close stream"); err != nil {
		return err
	}
	ctx, cancel := w.callCtx(ctx)
	defer cancel()
	_, err := w.pool.Exec(ctx, w.q.closeStream, stream)
	return w.err(ctx, "close stream "+stream, err)
}

// ReadChunks returns the chunks from index from on. With nothing to return
// it waits up to wait for a notification of the stream (a write or the
// close) and reads again.
func (w *World) ReadChunks(ctx context.Context, stream string, from int, wait time.Duration) ([]world.Chunk, bool, error) {
	if err := w.check("read chunks"); err != nil {
		return nil, false, err
	}
	var woken chan struct{}
	if wait > 0 {
		// Registered before the first read, so a write between the read
		// and the wait is not missed.
		woken = w.addReader(stream)
		defer w.removeReader(stream, woken)
	}
	deadline := time.Now().Add(wait)
	for {
		chunks, closed, err := w.readChunks(ctx, stream, from)
		if err != nil || len(chunks) > 0 || closed {
			return chunks, closed, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, false, nil
		}
		t := time.NewTimer(left)
		select {
		case <-woken:
			t.Stop()
			if err := w.check("read chunks"); err != nil {
				return nil, false, err
			}
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, false, ctx.Err()
		}
	}
}

// readChunks is one read: the chunks from `from` on and whether the stream
// is closed with its last chunk among them, from one snapshot.
func (w *World) readChunks(ctx context.Context, stream string, from int) ([]world.Chunk, bool, error) {
	ctx, cancel := w.callCtx(ctx)
	defer cancel()
	rows, err := w.pool.Query(ctx, w.q.readChunks, stream, int32(from))
	if err != nil {
		return nil, false, w.err(ctx, "read chunks of "+stream, err)
	}
	defer rows.Close()
	var chunks []world.Chunk
	var closed bool
	var next int32
	for rows.Next() {
		var idx pgtype.Int4
		var at pgtype.Int8
		var data []byte
		if err := rows.Scan(&closed, &next, &idx, &data, &at); err != nil {
			return nil, false, w.err(ctx, "read chunks of "+stream, err)
		}
		if !idx.Valid {
			continue // the stream, no chunk from `from` on
		}
		chunks = append(chunks, world.Chunk{Index: int(idx.Int32), Data: data, WrittenAt: time.Duration(at.Int64)})
	}
	if err := rows.Err(); err != nil {
		return nil, false, w.err(ctx, "read chunks of "+stream, err)
	}
	last := from - 1
	if len(chunks) > 0 {
		last = chunks[len(chunks)-1].Index
	}
	return chunks, closed && last >= int(next)-1, nil
}

func (w *World) addReader(stream string) chan struct{} {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.readers[stream] == nil {
		w.readers[stream] = make(map[chan struct{}]struct{})
	}
	w.readers[stream][ch] = struct{}{}
	return ch
}

func (w *World) removeReader(stream string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.readers[stream], ch)
	if len(w.readers[stream]) == 0 {
		delete(w.readers, stream)
	}
}
