package engine

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
)

// msgKind is what a queue message asks the engine to do.
type msgKind byte

const (
	kindWorkflow msgKind = 'w' // invoke the orchestrator (replay the run)
	kindStep     msgKind = 's' // execute one step
)

// message is the engine's queue payload. It is encoded as NUL-separated text:
// cheap to build and parse on the hot path, and readable in traces.
type message struct {
	kind         msgKind
	run          string
	stage, index int
	seq          int
	// stepInput: the message carries the step's input, so a consumer may
	// re-ensure a missing step_created from it (resilient dispatch).
	stepInput bool
	// runContext: the message carries the run identity, so the consumer
	// skips the runs.get before its claim.
	runContext bool
	// recover marks a workflow message handed on by an activation that
	// failed part-way (a continuation hand-off), for traces: its activation
	// recovers like any other, from the log.
	recover bool
	// hookToken, resumeID, payload: a lazy hook resume carried on the
	// orchestrator message, re-ensured by the consumer before replay.
	hookToken, resumeID string
	payload             []byte
}

const sep = 0 // field separator

func (m *message) encode() []byte {
	// One allocation: the fields are appended to a buffer sized for them.
	b := make([]byte, 0, 48+len(m.run)+len(m.hookToken)+len(m.resumeID)+len(m.payload))
	b = append(b, byte(m.kind), sep)
	b = append(b, m.run...)
	b = append(b, sep)
	b = strconv.AppendInt(b, int64(m.stage), 10)
	b = append(b, sep)
	b = strconv.AppendInt(b, int64(m.index), 10)
	b = append(b, sep)
	b = strconv.AppendInt(b, int64(m.seq), 10)
	b = append(b, sep)
	flags := byte('0')
	if m.stepInput {
		flags |= 1
	}
	if m.runContext {
		flags |= 2
	}
	if m.recover {
		flags |= 4
	}
	b = append(b, flags, sep)
	b = append(b, m.hookToken...)
	b = append(b, sep)
	b = append(b, m.resumeID...)
	b = append(b, sep)
	return append(b, m.payload...)
}

var errBadMessage = errors.New("engine: malformed queue message")

// decodeMessage parses what encode wrote. It walks the body in place and
// allocates only the strings it keeps.
func decodeMessage(b []byte) (message, error) {
	var m message
	// fields[0..7] are the first eight fields; the rest is the payload,
	// which may itself contain separators.
	var fields [8][]byte
	rest := b
	for i := range fields {
		j := bytes.IndexByte(rest, sep)
		if j < 0 {
			return m, errBadMessage
		}
		fields[i], rest = rest[:j], rest[j+1:]
	}
	if len(fields[0]) != 1 || len(fields[5]) != 1 {
		return m, errBadMessage
	}
	m.kind = msgKind(fields[0][0])
	if m.kind != kindWorkflow && m.kind != kindStep {
		return m, errBadMessage
	}
	var ok1, ok2, ok3 bool
	m.stage, ok1 = parseInt(fields[2])
	m.index, ok2 = parseInt(fields[3])
	m.seq, ok3 = parseInt(fields[4])
	if !ok1 || !ok2 || !ok3 {
		return m, errBadMessage
	}
	m.run = string(fields[1])
	flags := fields[5][0] - '0'
	m.stepInput = flags&1 != 0
	m.runContext = flags&2 != 0
	m.recover = flags&4 != 0
	if len(fields[6]) > 0 {
		m.hookToken = string(fields[6])
	}
	if len(fields[7]) > 0 {
		m.resumeID = string(fields[7])
	}
	if len(rest) > 0 {
		m.payload = bytes.Clone(rest)
	}
	return m, nil
}

// parseInt is strconv.Atoi on a byte slice, without converting it to a
// string (the compiler does not allocate for a string(b) conversion passed
// straight to a call that does not keep it).
func parseInt(b []byte) (int, bool) {
	n, err := strconv.Atoi(string(b))
	return n, err == nil
}

// stepID is a step's correlation id within its run: "<stage>.<index>".
func stepID(stage, index int) string {
	return strconv.Itoa(stage) + "." + strconv.Itoa(index)
}

// parseStepID splits a correlation id without allocating.
// It runs for every step event of every replay, so it is one pass over the
// bytes.
func parseStepID(id string) (stage, index int, ok bool) {
	i, n := 0, len(id)
	for ; i < n && id[i] != '.'; i++ {
		c := id[i]
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		stage = stage*10 + int(c-'0')
	}
	if i == 0 || i >= n-1 {
		return 0, 0, false
	}
	for i++; i < n; i++ {
		c := id[i]
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		index = index*10 + int(c-'0')
	}
	return stage, index, true
}

func atoi(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// Idempotency keys. Step dispatch keys are step-identity-scoped, so a
// duplicate dispatch of the same step is dropped by the queue.
func createEventID(step string) string   { return "c/" + step }
func completeEventID(step string) string { return "d/" + step }
func stepMessageID(run, step string) string {
	return stepMessagePrefix + run + "/" + step
}

const stepMessagePrefix = "step/"

// IsStepMessage reports whether a queue message ID is a step's execution
// message (the others invoke the orchestrator), so that tools timing the
// world's calls can tell a stage's dispatch from a run's start.
func IsStepMessage(id string) bool { return strings.HasPrefix(id, stepMessagePrefix) }

func hookToken(run string, stage int) string { return run + "/h" + strconv.Itoa(stage) }
func streamName(run string, stage int) string {
	return run + "/s" + strconv.Itoa(stage)
}

// transformedName is the stream a pipeline's transform step writes.
func transformedName(run string, stage int) string { return streamName(run, stage) + "t" }

const (
	idRunStarted   = "run_started"
	idRunCompleted = "run_completed"
	idRunFailed    = "run_failed"
)
