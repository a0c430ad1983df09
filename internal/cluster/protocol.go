// Package cluster spreads a sweep's engine over machines that share a NATS
// cluster: `durabench worker` processes run the engine's orchestrator and
// step consumers against the cell's world — the cluster's JetStream streams
// (the nats world, under each cell's prefix), or one PostgreSQL server the
// driver names (the postgres world, a schema per cell) — and the driver,
// which only starts runs, collects the timeline records the workers publish
// back over core NATS.
//
// Protocol (core NATS subjects under Subject, default "durabench.cluster"):
//
//	<S>.hello               worker -> all: a worker came up (Hello, JSON)
//	<S>.bye                 worker -> all: a worker stopped (Bye, JSON)
//	<S>.discover            driver request; every worker replies with its Hello
//	<S>.w.<id>.cell         driver request: open a cell (CellSpec) -> Reply
//	<S>.w.<id>.clock        driver request (prefix) -> the worker's cell clock, 8 bytes
//	<S>.w.<id>.shift        driver request (offset, prefix): the worker's cell clock
//	                        is shifted onto the driver's from now on -> "ok"
//	<S>.w.<id>.end          driver request (prefix) -> WorkerStats (JSON)
//	<S>.rec.<prefix>        worker -> driver: record batches (binary, see appendBatchHeader)
//	<S>.d.<prefix>          worker request, the driver answers while the cell lasts
//
// A worker serves one driver at a time: the sweep whose cell it opens
// first (CellSpec.Sweep, the prefix of every cell of that sweep) owns it
// until its last open cell ends, and it says so in its hello (Serving). An
// announcement whose prefix is not under its sweep, whose driver subject is
// not its cell's, or that comes from another sweep while the worker is
// owned, is refused; a message that does not decode, names an operation it
// does not know or a cell it does not have is dropped. Either way nothing
// runs, and the worker counts it (Worker.Dropped, its log). The driver
// counts record batches that do not decode or come from a worker that is
// not in the cell (Report.BadBatches). Who may publish on these subjects at
// all is the NATS server's business: give workers and drivers their own
// users with permissions on <S>.> (docs/security.md).
//
// Clocks: at cell start the driver estimates each worker's clock offset
// from round trips (EstimateOffset, the min-RTT sample) and sends it back;
// the worker's engine then takes every timestamp on the driver's clock
// (its cell runtime is shifted by the offset), so records — each batch
// names its worker — and the chunk write times workers read back from one
// another's streams share one clock, good to RTT/2. A second estimate at
// cell end reports the drift.
package cluster

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/world"
)

// DefaultSubject is the root of the cluster's control subjects.
const DefaultSubject = "durabench.cluster"

// ErrNoWorkers is returned when fewer workers than expected answered
// before the wait timed out.
var ErrNoWorkers = errors.New("not enough durabench workers")

// ErrWorker is returned when a worker refused or failed a cell.
var ErrWorker = errors.New("durabench worker failed")

// Protocol versions the messages below and the record batches; a driver
// uses only workers that speak its version. 5: a cell names its world
// (nats or postgres).
const Protocol = 5

// Hello is what a worker says about itself.
type Hello struct {
	ID          string `json:"id"`
	Protocol    int    `json:"protocol"`
	Host        string `json:"host,omitempty"`
	PID         int    `json:"pid,omitempty"`
	Concurrency int    `json:"concurrency"`
	// Serving is the sweep whose cells the worker runs now ("" when it
	// is free): a driver of another sweep does not count it.
	Serving string `json:"serving,omitempty"`
}

// Bye is what a worker says when it stops (on a signal): its counts in
// each cell it was serving, which it stopped cleanly.
type Bye struct {
	Hello
	Cells map[string]WorkerStats `json:"cells,omitempty"`
}

// CellSpec announces one cell to a worker: everything it needs to open the
// cell's world and engine.
type CellSpec struct {
	// Sweep begins the prefix of every cell of the driver's sweep: the
	// worker serves one sweep at a time. Prefix is the world prefix of
	// the cell (its streams, or its schema): Sweep and more.
	Sweep  string `json:"sweep"`
	Prefix string `json:"prefix"`
	// Label is the cell's description, for the worker's log.
	Label    string          `json:"label,omitempty"`
	Version  string          `json:"version,omitempty"`
	Features engine.Features `json:"features"`
	Options  world.Options   `json:"options"`
	// World is the cell's world: WorldNATS ("" too) — the cell's streams,
	// on the NATS server the worker is connected to — or WorldPostgres —
	// the cell's schema (Prefix) on the server at Settings["url"].
	World string `json:"world,omitempty"`
	// Settings are the world's settings that results record (the driver's
	// values; a credential setting is never among them). A postgres cell
	// needs its url: the driver's --postgres-url, which every worker
	// connects to.
	Settings map[string]string `json:"settings,omitempty"`
	// Storage and Replicas of a nats cell's streams.
	Storage  string `json:"storage,omitempty"`
	Replicas int    `json:"replicas,omitempty"`
	// Profile is a latency/fault profile: a built-in name ("none", "lan",
	// "cloud") or a file on the driver; Faults are the plan's overrides.
	// ProfileFiles carries every file the driver read to resolve them (the
	// profile file, the recorded-distribution files it or the overrides
	// name), by the path the driver read: a worker reads no file of its own
	// for the driver's profile (profile.Resolve with ShippedFiles).
	Profile      string            `json:"profile,omitempty"`
	ProfileFiles map[string][]byte `json:"profile_files,omitempty"`
	Faults       string            `json:"faults,omitempty"`
	Seed         int64             `json:"seed"`
	// NoSpans tells the worker's engine to record no spans (sweep --spans
	// off): a worker that does not know it records them, and the driver
	// drops them.
	NoSpans bool `json:"no_spans,omitempty"`
	// Driver is a subject the driver answers while the cell lasts: a
	// worker that gets no answer for DriverTimeout stops the cell by itself
	// (the driver died).
	Driver string `json:"driver,omitempty"`
}

// The worlds a cell may run on (the names of the worlds registry).
const (
	WorldNATS     = "nats"
	WorldPostgres = "postgres"
)

// prefixRE is what a sweep's and a cell's prefix are made of: one subject
// token, and a stream name's part.
var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// check reports why an announcement is not one this worker may run: its
// prefixes are not names, its cell is not under its sweep, its driver
// subject is not its cell's under root, or its world is not one a worker
// opens.
func (s CellSpec) check(root string) error {
	switch {
	case !prefixRE.MatchString(s.Sweep) || !prefixRE.MatchString(s.Prefix):
		return fmt.Errorf("sweep %q or cell %q is not a prefix", s.Sweep, s.Prefix)
	case !strings.HasPrefix(s.Prefix, s.Sweep) || s.Prefix == s.Sweep:
		return fmt.Errorf("cell %s is not under its sweep %s", s.Prefix, s.Sweep)
	case s.Driver != subjDriver(root, s.Prefix):
		return fmt.Errorf("cell %s names driver subject %q, not its own", s.Prefix, s.Driver)
	case s.World != "" && s.World != WorldNATS && s.World != WorldPostgres:
		return fmt.Errorf("cell %s: world %.40q is not %s or %s", s.Prefix, s.World, WorldNATS, WorldPostgres)
	case s.World == WorldPostgres && s.Settings["url"] == "":
		return fmt.Errorf("cell %s: world postgres without a server url", s.Prefix)
	}
	return nil
}

// decodeCellSpec decodes and checks an announcement on root.
func decodeCellSpec(root string, b []byte) (CellSpec, error) {
	var spec CellSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return spec, fmt.Errorf("does not decode: %w", err)
	}
	return spec, spec.check(root)
}

// DriverTimeout is how long a worker keeps a cell open without an answer
// from its driver.
const DriverTimeout = 6 * time.Second

// Reply is a worker's answer to a cell announcement.
type Reply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// WorkerStats is what a worker counted in one cell.
type WorkerStats struct {
	ID string `json:"id"`
	// Deliveries are queue deliveries handled; Redeliveries those with
	// attempt > 1 (a nak, or a visibility timeout: another worker died
	// holding the message).
	Deliveries   int64 `json:"deliveries"`
	Redeliveries int64 `json:"redeliveries"`
	// Steps are step bodies run; Records timeline records published, in
	// Batches batches (heartbeats not counted); Unsent records the worker could not publish (its
	// connection refused them): they are lost, and counted.
	Steps   int64  `json:"steps"`
	Records int64  `json:"records"`
	Batches uint64 `json:"batches"`
	Unsent  int64  `json:"unsent,omitempty"`
	// Incidents are the worker's world's (world.Incidents) in the cell.
	Incidents *world.Incidents `json:"incidents,omitempty"`
}

func subjDiscover(root string) string     { return root + ".discover" }
func subjHello(root string) string        { return root + ".hello" }
func subjBye(root string) string          { return root + ".bye" }
func subjWorker(root, id string) string   { return root + ".w." + id }
func subjRecords(root, pfx string) string { return root + ".rec." + pfx }
func subjDriver(root, pfx string) string  { return root + ".d." + pfx }

// SanitizeID turns s into a worker id usable as one subject token: letters,
// digits, '-' and '_' are kept, anything else becomes '_'.
func SanitizeID(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Record kinds on the wire.
const (
	recStep byte = iota + 1
	recHook
	recChunk
	recFinished
	recSpans
)

// batchVersion is the first byte of every batch (3: span records).
const batchVersion = 3

// record is one decoded timeline record, on the worker's clock.
type record struct {
	kind   byte
	run    string
	step   engine.StepSpan
	chunk  engine.ChunkSpan
	token  string
	at     time.Duration
	failed bool
	spans  []engine.Span
}

// batchHeader starts a batch: version, worker id, the batch's sequence
// number in the worker's cell (batches with records are numbered 1, 2, 3,
// …; a heartbeat repeats the last number, so the driver sees a lost batch
// as a gap), and the watermark — the worker's clock when it cut the batch:
// every record the worker's engine reported before that instant is in this
// batch or an earlier one.
func appendBatchHeader(b []byte, id string, seq uint64, watermark time.Duration) []byte {
	b = append(b, batchVersion)
	b = appendString(b, id)
	b = binary.AppendUvarint(b, seq)
	return binary.AppendVarint(b, int64(watermark))
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStep(b []byte, run string, s engine.StepSpan) []byte {
	b = append(b, recStep)
	b = appendString(b, run)
	b = binary.AppendUvarint(b, uint64(s.Stage))
	b = binary.AppendUvarint(b, uint64(s.Index))
	b = binary.AppendUvarint(b, uint64(s.Seq))
	b = binary.AppendVarint(b, int64(s.Start))
	b = binary.AppendVarint(b, int64(s.End))
	inline := byte(0)
	if s.Inline {
		inline = 1
	}
	b = append(b, inline)
	return binary.AppendUvarint(b, uint64(s.Attempt))
}

func appendHook(b []byte, run, token string, at time.Duration) []byte {
	b = append(b, recHook)
	b = appendString(b, run)
	b = appendString(b, token)
	return binary.AppendVarint(b, int64(at))
}

func appendChunk(b []byte, run string, c engine.ChunkSpan) []byte {
	b = append(b, recChunk)
	b = appendString(b, run)
	b = binary.AppendUvarint(b, uint64(c.Stage))
	b = binary.AppendUvarint(b, uint64(c.Index))
	b = binary.AppendVarint(b, int64(c.Written))
	return binary.AppendVarint(b, int64(c.Read))
}

func appendFinished(b []byte, run string, at time.Duration, failed bool) []byte {
	b = append(b, recFinished)
	b = appendString(b, run)
	b = binary.AppendVarint(b, int64(at))
	f := byte(0)
	if failed {
		f = 1
	}
	return append(b, f)
}

// appendSpans is one task's spans as the engine reported them (its own
// span last): where the worker's time went, for the run's critical path.
func appendSpans(b []byte, run string, spans []engine.Span) []byte {
	b = append(b, recSpans)
	b = appendString(b, run)
	b = binary.AppendUvarint(b, uint64(len(spans)))
	for i := range spans {
		s := &spans[i]
		b = append(b, byte(s.Kind))
		b = appendString(b, string(s.Op.Op()))
		b = binary.AppendVarint(b, int64(s.Start))
		b = binary.AppendVarint(b, int64(s.End))
		b = binary.AppendVarint(b, int64(s.Wait))
		b = binary.AppendVarint(b, int64(s.Stage))
		b = binary.AppendVarint(b, int64(s.Index))
		b = binary.AppendUvarint(b, s.ID)
		b = binary.AppendUvarint(b, s.Parent)
		b = binary.AppendUvarint(b, s.After)
	}
	return b
}

// maxSpansPerRecord bounds a span record's count before anything is
// allocated for it (a corrupt count must not allocate gigabytes).
const maxSpansPerRecord = 1 << 20

// errBatch marks a batch that does not decode.
var errBatch = errors.New("cluster: malformed record batch")

// reader decodes a batch; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errBatch
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errBatch
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int() int { return int(r.uvarint()) }

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errBatch
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil || uint64(len(r.b)) < n {
		r.err = errBatch
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// decodeBatch returns a batch's worker id, sequence number, watermark and
// records.
func decodeBatch(b []byte) (id string, seq uint64, watermark time.Duration, recs []record, err error) {
	r := &reader{b: b}
	if v := r.byte(); r.err == nil && v != batchVersion {
		return "", 0, 0, nil, fmt.Errorf("%w: version %d", errBatch, v)
	}
	id = r.string()
	seq = r.uvarint()
	watermark = time.Duration(r.varint())
	for r.err == nil && len(r.b) > 0 {
		rec := record{kind: r.byte(), run: r.string()}
		switch rec.kind {
		case recStep:
			rec.step = engine.StepSpan{Stage: r.int(), Index: r.int(), Seq: r.int(),
				Start: time.Duration(r.varint()), End: time.Duration(r.varint()), Inline: r.byte() == 1, Attempt: r.int()}
		case recHook:
			rec.token = r.string()
			rec.at = time.Duration(r.varint())
		case recChunk:
			rec.chunk = engine.ChunkSpan{Stage: r.int(), Index: r.int(),
				Written: time.Duration(r.varint()), Read: time.Duration(r.varint())}
		case recFinished:
			rec.at = time.Duration(r.varint())
			rec.failed = r.byte() == 1
		case recSpans:
			n := r.uvarint()
			if n > maxSpansPerRecord || n > uint64(len(r.b)) {
				r.err = fmt.Errorf("%w: %d spans in a record", errBatch, n)
				break
			}
			rec.spans = make([]engine.Span, 0, n)
			for range n {
				s := engine.Span{Kind: engine.SpanKind(r.byte()), Op: engine.OpOf(world.Op(r.string())),
					Start: time.Duration(r.varint()), End: time.Duration(r.varint()), Wait: time.Duration(r.varint()),
					Stage: int32(r.varint()), Index: int32(r.varint()), ID: r.uvarint(), Parent: r.uvarint(), After: r.uvarint()}
				if r.err != nil {
					break
				}
				rec.spans = append(rec.spans, s)
			}
		default:
			if r.err == nil {
				r.err = fmt.Errorf("%w: record kind %d", errBatch, rec.kind)
			}
		}
		if r.err == nil {
			recs = append(recs, rec)
		}
	}
	return id, seq, watermark, recs, r.err
}

// encodeShift is a shift request: the offset (8 bytes) and the prefix.
func encodeShift(prefix string, offset time.Duration) []byte {
	return append(binary.BigEndian.AppendUint64(nil, uint64(offset)), prefix...)
}

func decodeShift(b []byte) (prefix string, offset time.Duration, ok bool) {
	if len(b) < 8 {
		return "", 0, false
	}
	return string(b[8:]), time.Duration(binary.BigEndian.Uint64(b)), true
}
