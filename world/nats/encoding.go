package natsworld

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/durabench/durabench/world"
)

// token turns an arbitrary id into one subject token (and KV-style key).
// Ids made of [A-Za-z0-9_-] are used as they are, so subjects stay readable
// in `nats stream view`; any other id becomes "=" and its base64url form,
// which cannot collide with a plain id because plain ids never contain "=".
func token(id string) string {
	if id != "" && len(id) <= 128 {
		plain := true
		for i := 0; i < len(id); i++ {
			c := id[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				plain = false
				break
			}
		}
		if plain {
			return id
		}
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// Event body layout (version 1), chosen over headers because the engine
// loads whole logs and parsing a few varints is much cheaper than a header
// map per event:
//
//	byte    version (2)
//	byte    kind
//	byte    run status after this event (statusCode)
//	uvarint position of the event in its run's log (1-based)
//	uvarint len, id
//	uvarint len, entity
//	run_created only: uvarint len, deployment; varint spec version
//	rest    data
//
// The position is known when the event is published: every append is a
// compare-and-swap on the run's last sequence, so it lands right after the
// event the writer's cache holds as the last one. A reader checks that the
// positions it gets run 1, 2, 3, … without a hole (see checkPositions): a
// read that lost a message fails instead of returning a log with a gap.
const eventVersion = 2

var errBadEvent = errors.New("natsworld: malformed event body")

// ErrGap is returned (wrapped in world.ErrTransient) by a log read whose
// events do not run 1, 2, 3, … in position: a message was lost on the way
// (or deleted from the stream by hand). The read is never returned with the
// hole; the caller retries.
var ErrGap = fmt.Errorf("gap in a run's log read: %w", world.ErrTransient)

// checkPosition reports a gap when ev is not at want.
func checkPosition(subj string, ev world.Event, want int64) error {
	if ev.Pos != want {
		return fmt.Errorf("natsworld: %s: %w: event at position %d where %d was due", subj, ErrGap, ev.Pos, want)
	}
	return nil
}

func statusCode(s world.RunStatus) byte {
	switch s {
	case world.StatusPending:
		return 1
	case world.StatusRunning:
		return 2
	case world.StatusCompleted:
		return 3
	case world.StatusFailed:
		return 4
	}
	return 0
}

func statusOf(b byte) world.RunStatus {
	switch b {
	case 1:
		return world.StatusPending
	case 2:
		return world.StatusRunning
	case 3:
		return world.StatusCompleted
	case 4:
		return world.StatusFailed
	}
	return ""
}

// runMeta is what run_created carries beyond the event itself.
type runMeta struct {
	Deployment  string
	SpecVersion int
}

func encodeEvent(ev world.Event, pos int64, status world.RunStatus, meta runMeta) []byte {
	n := 3 + 3*binary.MaxVarintLen64 + len(ev.ID) + len(ev.Entity) + len(ev.Data)
	if ev.Kind == world.RunCreated {
		n += 2*binary.MaxVarintLen64 + len(meta.Deployment)
	}
	b := make([]byte, 0, n)
	b = append(b, eventVersion, byte(ev.Kind), statusCode(status))
	b = binary.AppendUvarint(b, uint64(pos))
	b = binary.AppendUvarint(b, uint64(len(ev.ID)))
	b = append(b, ev.ID...)
	b = binary.AppendUvarint(b, uint64(len(ev.Entity)))
	b = append(b, ev.Entity...)
	if ev.Kind == world.RunCreated {
		b = binary.AppendUvarint(b, uint64(len(meta.Deployment)))
		b = append(b, meta.Deployment...)
		b = binary.AppendVarint(b, int64(meta.SpecVersion))
	}
	return append(b, ev.Data...)
}

// decodeEvent parses a body written by encodeEvent; ev.Pos is the position
// the writer stored. Data aliases b.
func decodeEvent(b []byte) (ev world.Event, status world.RunStatus, meta runMeta, err error) {
	if len(b) < 3 || b[0] != eventVersion {
		return ev, "", meta, errBadEvent
	}
	ev.Kind = world.EventKind(b[1])
	status = statusOf(b[2])
	b = b[3:]
	pos, k := binary.Uvarint(b)
	if k <= 0 || pos == 0 || pos > math.MaxInt64 {
		return ev, "", meta, errBadEvent
	}
	ev.Pos = int64(pos)
	b = b[k:]
	str := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	var ok bool
	if ev.ID, ok = str(); !ok {
		return ev, "", meta, errBadEvent
	}
	if ev.Entity, ok = str(); !ok {
		return ev, "", meta, errBadEvent
	}
	if ev.Kind == world.RunCreated {
		if meta.Deployment, ok = str(); !ok {
			return ev, "", meta, errBadEvent
		}
		v, k := binary.Varint(b)
		if k <= 0 {
			return ev, "", meta, errBadEvent
		}
		meta.SpecVersion = int(v)
		b = b[k:]
	}
	if len(b) > 0 {
		ev.Data = b
	}
	return ev, status, meta, nil
}

// Chunk body layout: byte type (chunkData | chunkClose), uvarint index,
// varint written-at (ns), rest data.
const (
	chunkData  = 'd'
	chunkClose = 'c'
)

func encodeChunk(typ byte, c world.Chunk) []byte {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(c.Data))
	b = append(b, typ)
	b = binary.AppendUvarint(b, uint64(c.Index))
	b = binary.AppendVarint(b, int64(c.WrittenAt))
	return append(b, c.Data...)
}

func decodeChunk(b []byte) (typ byte, c world.Chunk, err error) {
	if len(b) < 1 {
		return 0, c, fmt.Errorf("natsworld: empty chunk body")
	}
	typ = b[0]
	b = b[1:]
	idx, k := binary.Uvarint(b)
	if k <= 0 || idx > math.MaxInt32 {
		return 0, c, fmt.Errorf("natsworld: malformed chunk body")
	}
	b = b[k:]
	at, k := binary.Varint(b)
	if k <= 0 {
		return 0, c, fmt.Errorf("natsworld: malformed chunk body")
	}
	c.Index, c.WrittenAt = int(idx), time.Duration(at)
	if len(b[k:]) > 0 {
		c.Data = append([]byte(nil), b[k:]...)
	}
	return typ, c, nil
}

// Queue message body layout: uvarint len, id; uvarint len, run; rest body.
func encodeMessage(m world.Message) []byte {
	b := make([]byte, 0, 2*binary.MaxVarintLen64+len(m.ID)+len(m.Run)+len(m.Body))
	b = binary.AppendUvarint(b, uint64(len(m.ID)))
	b = append(b, m.ID...)
	b = binary.AppendUvarint(b, uint64(len(m.Run)))
	b = append(b, m.Run...)
	return append(b, m.Body...)
}

func decodeMessage(b []byte) (world.Message, error) {
	var m world.Message
	for _, dst := range []*string{&m.ID, &m.Run} {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return m, fmt.Errorf("natsworld: malformed queue message")
		}
		*dst = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	if len(b) > 0 {
		m.Body = b
	}
	return m, nil
}
