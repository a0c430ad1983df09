package engine

import (
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
	// hookToken, resumeID, payload: a lazy hook resume carried on the
	// orchestrator message, re-ensured by the consumer before replay.
	hookToken, resumeID string
	payload             []byte
}

const sep = "\x00"

func (m *message) encode() []byte {
	var b strings.Builder
	b.Grow(48 + len(m.run) + len(m.hookToken) + len(m.resumeID) + len(m.payload))
	b.WriteByte(byte(m.kind))
	b.WriteString(sep)
	b.WriteString(m.run)
	b.WriteString(sep)
	b.WriteString(strconv.Itoa(m.stage))
	b.WriteString(sep)
	b.WriteString(strconv.Itoa(m.index))
	b.WriteString(sep)
	b.WriteString(strconv.Itoa(m.seq))
	b.WriteString(sep)
	flags := byte('0')
	if m.stepInput {
		flags |= 1
	}
	if m.runContext {
		flags |= 2
	}
	b.WriteByte(flags)
	b.WriteString(sep)
	b.WriteString(m.hookToken)
	b.WriteString(sep)
	b.WriteString(m.resumeID)
	b.WriteString(sep)
	b.Write(m.payload)
	return []byte(b.String())
}

var errBadMessage = errors.New("engine: malformed queue message")

func decodeMessage(b []byte) (message, error) {
	var m message
	parts := strings.SplitN(string(b), sep, 9)
	if len(parts) != 9 || len(parts[0]) != 1 || len(parts[5]) != 1 {
		return m, errBadMessage
	}
	m.kind = msgKind(parts[0][0])
	if m.kind != kindWorkflow && m.kind != kindStep {
		return m, errBadMessage
	}
	m.run = parts[1]
	var err1, err2, err3 error
	m.stage, err1 = strconv.Atoi(parts[2])
	m.index, err2 = strconv.Atoi(parts[3])
	m.seq, err3 = strconv.Atoi(parts[4])
	if err1 != nil || err2 != nil || err3 != nil {
		return m, errBadMessage
	}
	flags := parts[5][0] - '0'
	m.stepInput = flags&1 != 0
	m.runContext = flags&2 != 0
	m.hookToken = parts[6]
	m.resumeID = parts[7]
	if parts[8] != "" {
		m.payload = []byte(parts[8])
	}
	return m, nil
}

// stepID is a step's correlation id within its run: "<stage>.<index>".
func stepID(stage, index int) string {
	return strconv.Itoa(stage) + "." + strconv.Itoa(index)
}

// parseStepID splits a correlation id without allocating.
func parseStepID(id string) (stage, index int, ok bool) {
	dot := strings.IndexByte(id, '.')
	if dot <= 0 {
		return 0, 0, false
	}
	stage, ok1 := atoi(id[:dot])
	index, ok2 := atoi(id[dot+1:])
	return stage, index, ok1 && ok2
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
	return "step/" + run + "/" + step
}
func hookToken(run string, stage int) string { return run + "/h" + strconv.Itoa(stage) }
func streamName(run string, stage int) string {
	return run + "/s" + strconv.Itoa(stage)
}

const (
	idRunStarted   = "run_started"
	idRunCompleted = "run_completed"
	idRunFailed    = "run_failed"
)
