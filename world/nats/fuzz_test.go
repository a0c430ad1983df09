package natsworld

import (
	"bytes"
	"testing"

	"github.com/durabench/durabench/world"
)

// The bodies below are what the world reads back from JetStream: another
// process (a worker of another build, a user with the nats CLI) may have
// written them. Each decodes or is rejected; what decodes is well formed.

// FuzzEventBody: an event body decodes into an event at a position >= 1,
// and encodes back to the same body.
func FuzzEventBody(f *testing.F) {
	f.Add(encodeEvent(world.Event{Kind: world.RunCreated, ID: "r", Entity: "run", Data: []byte(`{"stages":[]}`)}, 1,
		world.StatusRunning, runMeta{Deployment: "v1", SpecVersion: 3}))
	f.Add(encodeEvent(world.Event{Kind: world.StepCompleted, ID: "0.12", Entity: "0.12"}, 42, world.StatusRunning, runMeta{}))
	f.Add([]byte{eventVersion, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, status, meta, err := decodeEvent(b)
		if err != nil {
			return
		}
		if ev.Pos < 1 {
			t.Fatalf("position %d", ev.Pos)
		}
		again := encodeEvent(ev, ev.Pos, status, meta)
		ev2, _, meta2, err := decodeEvent(again)
		if err != nil || ev2.ID != ev.ID || ev2.Entity != ev.Entity || ev2.Pos != ev.Pos || meta2 != meta || !bytes.Equal(ev2.Data, ev.Data) {
			t.Fatalf("round trip: %+v -> %+v, %v", ev, ev2, err)
		}
	})
}

// FuzzChunkBody: a stream chunk decodes with an index >= 0.
func FuzzChunkBody(f *testing.F) {
	f.Add(encodeChunk(chunkData, world.Chunk{Index: 3, WrittenAt: 12345, Data: []byte("x")}))
	f.Add(encodeChunk(chunkClose, world.Chunk{Index: 0}))
	f.Add([]byte{chunkData, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, c, err := decodeChunk(b)
		if err != nil {
			return
		}
		if c.Index < 0 {
			t.Fatalf("chunk index %d", c.Index)
		}
	})
}

// FuzzQueueBody: a queue message decodes or is rejected.
func FuzzQueueBody(f *testing.F) {
	f.Add(encodeMessage(world.Message{ID: "m1", Run: "r", Body: []byte("w\x00r\x000\x00")}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b)
		if err != nil {
			return
		}
		m2, err := decodeMessage(encodeMessage(m))
		if err != nil || m2.ID != m.ID || m2.Run != m.Run || !bytes.Equal(m2.Body, m.Body) {
			t.Fatalf("round trip: %+v -> %+v, %v", m, m2, err)
		}
	})
}
