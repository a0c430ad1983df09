package worldtest

import (
	"bytes"
	"time"

	"github.com/durabench/durabench/world"
)

var streamTests = []subtest{
	{name: "WriteReadClose", fn: testStreams},
	{name: "LongPoll", fn: testStreamLongPoll},
	{name: "LargeData", fn: testLargeData},
}

// testLargeData: a 512 KB chunk and a 512 KB event (a payload scenario's
// step input) are stored and read back byte for byte.
func testLargeData(c *env) {
	big := make([]byte, 512<<10)
	for i := range big {
		big[i] = byte(i*7 + i>>9)
	}
	c.NoErr(c.W.WriteChunk(c.Ctx, "big", world.Chunk{Index: 0, Data: big, WrittenAt: time.Millisecond}), "WriteChunk 512 KB")
	got, _ := c.read("big", 0, time.Second)
	if len(got) != 1 || !bytes.Equal(got[0].Data, big) {
		c.Fatalf("read back %d chunks, the first %d bytes; want the 512 KB chunk intact", len(got), len(got[0].Data))
	}
	c.createRun("r")
	_, err := c.W.Append(c.Ctx, "r", world.Event{Kind: world.StepCreated, ID: "c/0.0", Entity: "0.0", Data: big}, world.Precondition{})
	c.NoErr(err, "Append a 512 KB event")
	events, err := c.W.Load(c.Ctx, "r")
	c.NoErr(err, "Load")
	if n := len(events); n != 2 || !bytes.Equal(events[1].Data, big) {
		c.Fatalf("loaded %d events; want run_created and the 512 KB step_created intact", n)
	}
}

func (c *env) write(stream string, i int, data string) {
	c.T.Helper()
	c.NoErr(c.W.WriteChunk(c.Ctx, stream, world.Chunk{Index: i, Data: []byte(data), WrittenAt: time.Duration(i+1) * time.Millisecond}), "WriteChunk")
}

func (c *env) read(stream string, from int, wait time.Duration) ([]world.Chunk, bool) {
	c.T.Helper()
	chunks, closed, err := c.W.ReadChunks(c.Ctx, stream, from, wait)
	c.NoErr(err, "ReadChunks")
	return chunks, closed
}

func (c *env) wantChunks(got []world.Chunk, from int, data ...string) {
	c.T.Helper()
	if len(got) != len(data) {
		c.Fatalf("read %d chunks from %d, want %d: %+v", len(got), from, len(data), got)
	}
	for i, ch := range got {
		if ch.Index != from+i || string(ch.Data) != data[i] || ch.WrittenAt != time.Duration(from+i+1)*time.Millisecond {
			c.Fatalf("chunk %d = %+v, want index %d data %q", i, ch, from+i, data[i])
		}
	}
}

// testStreams: chunks are read back from any index; indexes must be dense;
// a closed stream reports closed and refuses writes.
func testStreams(c *env) {
	c.write("s", 0, "a")
	c.write("s", 1, "b")
	got, closed := c.read("s", 0, 0)
	c.wantChunks(got, 0, "a", "b")
	if closed {
		c.Fatalf("open stream reported closed")
	}
	got, _ = c.read("s", 1, 0)
	c.wantChunks(got, 1, "b")
	got, closed = c.read("s", 2, 0)
	if len(got) != 0 || closed {
		c.Fatalf("read past the end = %+v closed=%v, want nothing, open", got, closed)
	}
	c.IsErr(c.W.WriteChunk(c.Ctx, "s", world.Chunk{Index: 1, Data: []byte("dup")}), world.ErrConflict, "WriteChunk with a used index")
	c.IsErr(c.W.WriteChunk(c.Ctx, "s", world.Chunk{Index: 5, Data: []byte("gap")}), world.ErrConflict, "WriteChunk skipping indexes")
	c.write("s", 2, "c")
	c.NoErr(c.W.CloseStream(c.Ctx, "s"), "CloseStream")
	c.NoErr(c.W.CloseStream(c.Ctx, "s"), "second CloseStream")
	c.IsErr(c.W.WriteChunk(c.Ctx, "s", world.Chunk{Index: 3, Data: []byte("late")}), world.ErrGone, "WriteChunk after close")
	got, closed = c.read("s", 0, 0)
	c.wantChunks(got, 0, "a", "b", "c")
	if !closed {
		c.Fatalf("closed stream read from 0 did not report closed")
	}
	got, closed = c.read("s", 3, time.Second)
	if len(got) != 0 || !closed {
		c.Fatalf("read at the end of a closed stream = %+v closed=%v, want nothing, closed", got, closed)
	}
	// Streams are independent.
	got, closed = c.read("other", 0, 0)
	if len(got) != 0 || closed {
		c.Fatalf("unwritten stream = %+v closed=%v", got, closed)
	}
}

// testStreamLongPoll: a waiting reader wakes on a write and on a close, and
// returns empty after its wait when nothing comes.
func testStreamLongPoll(c *env) {
	start := c.RT.Now()
	got, closed := c.read("idle", 0, 30*time.Millisecond)
	if len(got) != 0 || closed {
		c.Fatalf("idle read = %+v closed=%v", got, closed)
	}
	if waited := c.RT.Now() - start; waited < 15*time.Millisecond {
		c.Fatalf("idle read returned after %v, want about its 30ms wait", waited)
	}

	writer := c.RT.NewGroup()
	writer.Go(func() error {
		if err := c.RT.Sleep(c.Ctx, 20*time.Millisecond); err != nil {
			return err
		}
		if err := c.W.WriteChunk(c.Ctx, "s", world.Chunk{Index: 0, Data: []byte("a"), WrittenAt: time.Millisecond}); err != nil {
			return err
		}
		if err := c.RT.Sleep(c.Ctx, 20*time.Millisecond); err != nil {
			return err
		}
		return c.W.CloseStream(c.Ctx, "s")
	})
	start = c.RT.Now()
	got, _ = c.read("s", 0, deadline)
	c.wantChunks(got, 0, "a")
	if waited := c.RT.Now() - start; waited >= deadline/2 {
		c.Fatalf("long poll did not wake on the write (waited %v)", waited)
	}
	got, closed = c.read("s", 1, deadline)
	if len(got) != 0 || !closed {
		c.Fatalf("long poll at the end = %+v closed=%v, want woken by the close", got, closed)
	}
	c.NoErr(writer.Wait(), "writer")
}
