package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/durabench/durabench/world"
)

// streamWriter writes the stage's chunks, each when it is due (one every
// interval, or at its cadence offset), then closes the stream and records
// stream_closed in the run's log.
func (e *Engine) streamWriter(ctx context.Context, run string, s int, spec *StreamSpec) error {
	name := streamName(run, s)
	start := e.rt.Now()
	for i := 0; i < spec.ChunkCount(); i++ {
		// Pace against the schedule, not the previous write, so slow writes
		// do not stretch the generation window.
		if wait := start + spec.Due(i) - e.rt.Now(); wait > 0 {
			if err := e.rt.Sleep(ctx, wait); err != nil {
				return err
			}
		}
		c := world.Chunk{Index: i, Data: ChunkData(spec, i), WrittenAt: e.rt.Now()}
		if err := e.w.WriteChunk(ctx, name, c); err != nil && !errors.Is(err, world.ErrConflict) {
			return fmt.Errorf("stream %s: write %d: %w", name, i, err)
		}
	}
	if err := e.w.CloseStream(ctx, name); err != nil {
		return fmt.Errorf("stream %s: close: %w", name, err)
	}
	_, err := e.w.Append(ctx, run, world.Event{Kind: world.StreamClosed, ID: "sc/" + name, Entity: name}, world.Precondition{})
	if err != nil && !errors.Is(err, world.ErrGone) {
		return fmt.Errorf("stream %s: stream_closed: %w", name, err)
	}
	return nil
}

// readWait is how long one read waits for a chunk before asking again.
const readWait = 500 * time.Millisecond

// streamReader drains the stream until it is closed, reporting each chunk
// (the transform's stream in a pipeline).
func (e *Engine) streamReader(ctx context.Context, run string, s int, spec *StreamSpec) error {
	name := streamName(run, s)
	if spec.Transform {
		name = transformedName(run, s)
	}
	next := 0
	for {
		chunks, closed, err := e.w.ReadChunks(ctx, name, next, readWait)
		if err != nil && !errors.Is(err, world.ErrNotFound) {
			return fmt.Errorf("stream %s: read from %d: %w", name, next, err)
		}
		now := e.rt.Now()
		for _, c := range chunks {
			e.obs.StreamChunk(run, ChunkSpan{Stage: s, Index: c.Index, Written: c.WrittenAt, Read: now, Bytes: len(c.Data)})
			next = c.Index + 1
		}
		if closed {
			return nil
		}
		if err != nil || len(chunks) == 0 {
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
}

// ChunkData is chunk i of the stream: a text delta or a small structured
// object, or exactly ChunkBytes(i) bytes when the spec sets sizes.
func ChunkData(spec *StreamSpec, i int) []byte {
	if n := spec.ChunkBytes(i); n > 0 {
		return sizedChunk(i, n)
	}
	return chunkData(i, spec.Structured)
}

// sizedChunk is chunk i of exactly n bytes (n >= 1): printable filler that
// differs from chunk to chunk, so no layer can deduplicate or compress it
// away to nothing.
func sizedChunk(i, n int) []byte {
	b := make([]byte, n)
	x := uint32(i)*2654435761 + 1
	for j := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[j] = 'a' + byte(x%26)
	}
	return b
}

// streamTransform drains the writer's stream, upper-cases each chunk's
// letters and writes it to the transformed stream with the writer's
// timestamp (so the reader's round trips run from the writer), then closes
// the transformed stream and records its stream_closed.
func (e *Engine) streamTransform(ctx context.Context, run string, s int) error {
	in, out := streamName(run, s), transformedName(run, s)
	next := 0
	for {
		chunks, closed, err := e.w.ReadChunks(ctx, in, next, readWait)
		if err != nil && !errors.Is(err, world.ErrNotFound) {
			return fmt.Errorf("stream %s: read from %d: %w", in, next, err)
		}
		for _, c := range chunks {
			c.Data = bytes.ToUpper(c.Data)
			if err := e.w.WriteChunk(ctx, out, c); err != nil && !errors.Is(err, world.ErrConflict) {
				return fmt.Errorf("stream %s: write %d: %w", out, c.Index, err)
			}
			next = c.Index + 1
		}
		if closed {
			break
		}
		if (err != nil || len(chunks) == 0) && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if err := e.w.CloseStream(ctx, out); err != nil {
		return fmt.Errorf("stream %s: close: %w", out, err)
	}
	_, err := e.w.Append(ctx, run, world.Event{Kind: world.StreamClosed, ID: "sc/" + out, Entity: out}, world.Precondition{})
	if err != nil && !errors.Is(err, world.ErrGone) {
		return fmt.Errorf("stream %s: stream_closed: %w", out, err)
	}
	return nil
}

// chunkData is a text delta or a small structured object, as an LLM stream.
func chunkData(i int, structured bool) []byte {
	if structured {
		return []byte(`{"type":"text-delta","id":"` + strconv.Itoa(i) + `","text":"token ` + strconv.Itoa(i) + ` "}`)
	}
	return []byte("token " + strconv.Itoa(i) + " ")
}
