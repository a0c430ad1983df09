package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/durabench/durabench/world"
)

// A session stream carries a line per start and one or two per run, at
// the driver's full rate: encoding/json's reflection cost about 20 µs of
// the driver's CPU per run at 10,000 runs/s, a fifth of the driver's
// whole share, on a machine the target shares. The lines' shapes are
// fixed, so they are read and written here directly. Reading is a fast
// path only: a line it does not take as it is (a number with a fraction,
// null where a value belongs, a key twice, …) is read by encoding/json,
// whose answer — value or error — is the answer (FuzzStreamLine holds
// the two to the same result).

// LineReader reads a session stream's lines, each at most max bytes.
type LineReader struct {
	r    *bufio.Reader
	max  int
	long []byte // a line longer than r's buffer, so far
}

// maxKeptLine bounds the buffer a LineReader keeps for long lines.
const maxKeptLine = 8 << 20

func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line that is not blank (its newline included,
// valid until the next call); io.EOF when the stream ends between lines.
func (lr *LineReader) Next() ([]byte, error) {
	for {
		part, err := lr.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if lr.long = append(lr.long, part...); len(lr.long) > lr.max {
				return nil, fmt.Errorf("%w: a stream line over %d bytes", ErrProtocol, lr.max)
			}
			continue
		}
		line := part
		if len(lr.long) > 0 {
			// The buffer is kept for the next long line (a run's span
			// events come in one): line is valid until the next call.
			line = append(lr.long, part...)
			lr.long = line[:0]
			if cap(lr.long) > maxKeptLine {
				lr.long = nil
			}
		}
		blank := len(bytes.TrimSpace(line)) == 0
		switch {
		case err == io.EOF && !blank:
			return nil, fmt.Errorf("%w: the stream ends inside a line: %.200q", ErrProtocol, line)
		case err != nil:
			return nil, err
		case !blank:
			return line, nil
		}
	}
}

// DecodeStreamMessage reads one line a target wrote on a session stream.
// A timeline's events go into events' array when it has room (nil: a new
// one): the reader's, reused from line to line.
func DecodeStreamMessage(line []byte, m *StreamMessage, events []Event) error {
	d := wireDec{b: line, events: events}
	if d.streamMessage(m) && d.end() {
		return nil
	}
	*m = StreamMessage{}
	return json.Unmarshal(line, m)
}

// decodeStreamCommand reads one line a driver wrote on a session stream.
func decodeStreamCommand(line []byte, c *StreamCommand) error {
	d := wireDec{b: line}
	if d.streamCommand(c) && d.end() {
		return nil
	}
	*c = StreamCommand{}
	return json.Unmarshal(line, c)
}

// wireDec reads JSON from b at i; each method reports false for what it
// does not take (the caller then leaves the line to encoding/json).
type wireDec struct {
	b      []byte
	i      int
	events []Event // an array for a timeline's events, or nil
}

func (d *wireDec) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// end reports whether only white space is left.
func (d *wireDec) end() bool {
	d.ws()
	return d.i == len(d.b)
}

// object reads an object whose keys are among keys (matched as
// encoding/json matches them: exactly, else without case), each at most
// once, calling field with the key's index; an unknown key's value is
// skipped.
func (d *wireDec) object(keys []string, field func(k int) bool) bool {
	more, ok := d.open('{', '}')
	var seen uint64
	for ; more; more, ok = d.next('}') {
		d.ws()
		key, ok := d.rawString()
		if !ok {
			return false
		}
		d.ws()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return false
		}
		d.i++
		k := keyIndex(keys, key)
		switch {
		case k < 0:
			if !d.skip() {
				return false
			}
		case seen&(1<<k) != 0:
			return false // a key twice: encoding/json's rules
		default:
			seen |= 1 << k
			if !field(k) {
				return false
			}
		}
	}
	return ok
}

// open reads an object's or an array's opening (c) and, if it is empty,
// its closing: more says an element follows.
func (d *wireDec) open(c, closing byte) (more, ok bool) {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != c {
		return false, false
	}
	d.i++
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == closing {
		d.i++
		return false, true
	}
	return true, true
}

// next reads what follows an element: a comma (more) or the closing.
func (d *wireDec) next(closing byte) (more, ok bool) {
	d.ws()
	if d.i >= len(d.b) {
		return false, false
	}
	switch d.b[d.i] {
	case ',':
		d.i++
		return true, true
	case closing:
		d.i++
		return false, true
	}
	return false, false
}

// keyIndex is key's index in keys, -1 for none. A key with an escape is
// left to encoding/json by rawString.
func keyIndex(keys []string, key []byte) int {
	for i, k := range keys {
		if string(key) == k {
			return i
		}
	}
	for i, k := range keys {
		if bytes.EqualFold(key, []byte(k)) {
			return i
		}
	}
	return -1
}

// rawString reads a string without escapes and returns its bytes (keys).
func (d *wireDec) rawString() ([]byte, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, false
	}
	start := d.i + 1
	for j := start; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			return d.b[start:j], true
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return nil, false
		}
	}
	return nil, false
}

// str reads a string value: escapes decoded, valid UTF-8 only.
func (d *wireDec) str() (string, bool) {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return "", false
	}
	j := d.i + 1
	// The common case: no escape, ASCII.
	for ; j < len(d.b); j++ {
		c := d.b[j]
		if c == '"' {
			raw := d.b[d.i+1 : j]
			d.i = j + 1
			if s, ok := common[string(raw)]; ok {
				return s, true // no allocation
			}
			return string(raw), true
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
	}
	out := append([]byte(nil), d.b[d.i+1:j]...)
	for j < len(d.b) {
		c := d.b[j]
		switch {
		case c == '"':
			d.i = j + 1
			return string(out), true
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(d.b[j:])
			if r == utf8.RuneError && n == 1 {
				return "", false // invalid UTF-8: encoding/json replaces it
			}
			out = append(out, d.b[j:j+n]...)
			j += n
		case c != '\\':
			out = append(out, c)
			j++
		default:
			if j+1 >= len(d.b) {
				return "", false
			}
			switch e := d.b[j+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(d.b, j+2)
				if !ok {
					return "", false
				}
				j += 4
				if utf16.IsSurrogate(r) {
					r2, ok := hex4(d.b, j+4)
					if !ok || j+3 >= len(d.b) || d.b[j+2] != '\\' || d.b[j+3] != 'u' {
						return "", false
					}
					dec := utf16.DecodeRune(r, r2)
					if dec == utf8.RuneError {
						return "", false
					}
					r = dec
					j += 6
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", false
			}
			j += 2
		}
	}
	return "", false
}

// hex4 is the rune of 4 hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// integer reads an integer (no fraction, no exponent) that fits 63 bits.
func (d *wireDec) integer() (int64, bool) {
	d.ws()
	j := d.i
	if j < len(d.b) && d.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(d.b) && '0' <= d.b[j] && d.b[j] <= '9' {
		j++
	}
	if j == digits || j-digits > 18 || (d.b[digits] == '0' && j-digits > 1) {
		return 0, false
	}
	if j < len(d.b) && (d.b[j] == '.' || d.b[j] == 'e' || d.b[j] == 'E') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(d.b[d.i:j]), 10, 64)
	if err != nil {
		return 0, false
	}
	d.i = j
	return n, true
}

func (d *wireDec) boolean() (bool, bool) {
	d.ws()
	switch {
	case bytes.HasPrefix(d.b[d.i:], []byte("true")):
		d.i += 4
		return true, true
	case bytes.HasPrefix(d.b[d.i:], []byte("false")):
		d.i += 5
		return false, true
	}
	return false, false
}

// array reads an array, calling elem for each element.
func (d *wireDec) array(elem func() bool) bool {
	more, ok := d.open('[', ']')
	for ; more; more, ok = d.next(']') {
		if !elem() {
			return false
		}
	}
	return ok
}

// skip skips a value of an unknown key (strings, numbers, literals,
// arrays and objects of them), checking it as far as encoding/json would.
func (d *wireDec) skip() bool {
	d.ws()
	if d.i >= len(d.b) {
		return false
	}
	switch c := d.b[d.i]; {
	case c == '"':
		_, ok := d.str()
		return ok
	case c == '{':
		return d.object(nil, nil)
	case c == '[':
		return d.array(d.skip)
	case c == 't' || c == 'f':
		_, ok := d.boolean()
		return ok
	case c == 'n':
		if bytes.HasPrefix(d.b[d.i:], []byte("null")) {
			d.i += 4
			return true
		}
		return false
	default:
		_, ok := d.integer()
		return ok
	}
}

// common are the strings every line repeats (kinds, sources, statuses):
// read without allocating them again. A span event's category is one of
// a few, and its name often the engine's name for a world call (the
// reference target's are the world's operations and its task kinds).
var common = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{EventRunStarted, EventStepStarted, EventStepCompleted, EventRunCompleted, EventRunFailed,
		EventHookWaiting, EventChunkRead, EventSpan, SourceHistory, SourceWorker, SourceSDK, StatusRunning, StatusCompleted, StatusFailed,
		"start", "queue_wait", "log_load", "write", "publish", "run_read", "compute", "body", "contention", "unattributed",
		"task", "resume", "queue"} {
		m[s] = s
	}
	for _, op := range world.Ops() {
		m[string(op)] = string(op)
	}
	return m
}()

var (
	messageKeys  = []string{"started", "timeline", "error"}
	resultKeys   = []string{"run", "code", "accepted", "error"}
	timelineKeys = []string{"run", "status", "error", "events", "anomalies"}
	eventKeys    = []string{"seq", "kind", "at", "source", "stage", "index", "attempt", "inline", "token", "written", "bytes", "error",
		"end", "category", "name", "span", "parent", "after", "wait"}
	anomalyKeys = []string{"kind", "detail"}
	commandKeys = []string{"start"}
	startKeys   = []string{"run", "scenario", "options", "session", "spans", "at"}
)

func (d *wireDec) streamMessage(m *StreamMessage) bool {
	return d.object(messageKeys, func(k int) bool {
		switch k {
		case 0:
			m.Started = &StartResult{}
			r := m.Started
			return d.fields(resultKeys, &r.Run, &r.Code, &r.Accepted, &r.Error)
		case 1:
			m.Timeline = &Timeline{}
			return d.timeline(m.Timeline)
		}
		return d.into(&m.Error)
	})
}

// fields reads an object whose keys are keys into ptrs, by index.
func (d *wireDec) fields(keys []string, ptrs ...any) bool {
	return d.object(keys, func(k int) bool { return d.into(ptrs[k]) })
}

// into reads a value into p: a *string, *int64, *int or *bool.
func (d *wireDec) into(p any) bool {
	var ok bool
	switch p := p.(type) {
	case *string:
		*p, ok = d.str()
	case *int64:
		*p, ok = d.integer()
	case *int:
		var n int64
		n, ok = d.integer()
		*p = int(n)
	case *bool:
		*p, ok = d.boolean()
	}
	return ok
}

func (d *wireDec) timeline(t *Timeline) bool {
	return d.object(timelineKeys, func(k int) bool {
		switch k {
		case 3:
			t.Events = d.events[:0]
			if t.Events == nil {
				t.Events = make([]Event, 0, 4)
			}
			return d.array(func() bool {
				t.Events = append(t.Events, Event{})
				e := &t.Events[len(t.Events)-1]
				return d.fields(eventKeys, &e.Seq, &e.Kind, &e.At, &e.Source, &e.Stage, &e.Index, &e.Attempt, &e.Inline,
					&e.Token, &e.Written, &e.Bytes, &e.Error, &e.End, &e.Category, &e.Name, &e.SpanID, &e.Parent, &e.After, &e.Wait)
			})
		case 4:
			t.Anomalies = []Anomaly{}
			return d.array(func() bool {
				t.Anomalies = append(t.Anomalies, Anomaly{})
				a := &t.Anomalies[len(t.Anomalies)-1]
				return d.fields(anomalyKeys, &a.Kind, &a.Detail)
			})
		}
		return d.into([]any{&t.Run, &t.Status, &t.Error}[k])
	})
}

func (d *wireDec) streamCommand(c *StreamCommand) bool {
	return d.object(commandKeys, func(int) bool {
		c.Start = &StartRequest{}
		st := c.Start
		return d.object(startKeys, func(k int) bool {
			if k != 2 {
				return d.into([]any{&st.Run, &st.Scenario, nil, &st.Session, &st.Spans, &st.At}[k])
			}
			st.Options = map[string]string{}
			// An options object's keys are the options' own: any key,
			// each once.
			more, ok := d.open('{', '}')
			for ; more; more, ok = d.next('}') {
				key, kok := d.str()
				d.ws()
				if !kok || d.i >= len(d.b) || d.b[d.i] != ':' {
					return false
				}
				d.i++
				v, vok := d.str()
				if _, dup := st.Options[key]; !vok || dup {
					return false
				}
				st.Options[key] = v
			}
			return ok
		})
	})
}

// appendStreamMessage appends m as one line of a session stream, as
// encoding/json would write it (without its HTML escapes).
func appendStreamMessage(b []byte, m *StreamMessage) []byte {
	b = append(b, '{')
	switch {
	case m.Started != nil:
		r := m.Started
		b = append(b, `"started":{"run":`...)
		b = appendString(b, r.Run)
		b = append(b, `,"code":`...)
		b = strconv.AppendInt(b, int64(r.Code), 10)
		if r.Accepted != 0 {
			b = append(b, `,"accepted":`...)
			b = strconv.AppendInt(b, r.Accepted, 10)
		}
		if r.Error != "" {
			b = append(b, `,"error":`...)
			b = appendString(b, r.Error)
		}
		b = append(b, '}')
	case m.Timeline != nil:
		b = append(b, `"timeline":`...)
		b = appendTimeline(b, m.Timeline)
	default:
		b = append(b, `"error":`...)
		b = appendString(b, m.Error)
	}
	return append(b, "}\n"...)
}

func appendTimeline(b []byte, t *Timeline) []byte {
	b = append(b, `{"run":`...)
	b = appendString(b, t.Run)
	b = append(b, `,"status":`...)
	b = appendString(b, t.Status)
	if t.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, t.Error)
	}
	b = append(b, `,"events":[`...)
	for i := range t.Events {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEvent(b, &t.Events[i])
	}
	b = append(b, ']')
	if len(t.Anomalies) > 0 {
		b = append(b, `,"anomalies":[`...)
		for i, a := range t.Anomalies {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"kind":`...)
			b = appendString(b, a.Kind)
			if a.Detail != "" {
				b = append(b, `,"detail":`...)
				b = appendString(b, a.Detail)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendEvent(b []byte, e *Event) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"kind":`...)
	b = appendString(b, e.Kind)
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, e.At, 10)
	b = append(b, `,"source":`...)
	b = appendString(b, e.Source)
	ints := [...]struct {
		key string
		v   int64
	}{{`,"stage":`, int64(e.Stage)}, {`,"index":`, int64(e.Index)}, {`,"attempt":`, int64(e.Attempt)}}
	for _, f := range ints {
		if f.v != 0 {
			b = append(b, f.key...)
			b = strconv.AppendInt(b, f.v, 10)
		}
	}
	if e.Inline {
		b = append(b, `,"inline":true`...)
	}
	if e.Token != "" {
		b = append(b, `,"token":`...)
		b = appendString(b, e.Token)
	}
	if e.Written != 0 {
		b = append(b, `,"written":`...)
		b = strconv.AppendInt(b, e.Written, 10)
	}
	if e.Bytes != 0 {
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, int64(e.Bytes), 10)
	}
	if e.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, e.Error)
	}
	// A span's end and category are always written; another event's only
	// when it carries them (a target may send them on any event; what
	// durabench read is written back whole).
	span := e.Kind == EventSpan
	if span || e.End != 0 {
		b = append(b, `,"end":`...)
		b = strconv.AppendInt(b, e.End, 10)
	}
	if span || e.Category != "" {
		b = append(b, `,"category":`...)
		b = appendString(b, e.Category)
	}
	if e.Name != "" {
		b = append(b, `,"name":`...)
		b = appendString(b, e.Name)
	}
	for _, f := range [...]struct {
		key string
		v   int64
	}{{`,"span":`, e.SpanID}, {`,"parent":`, e.Parent}, {`,"after":`, e.After}, {`,"wait":`, e.Wait}} {
		if f.v != 0 {
			b = append(b, f.key...)
			b = strconv.AppendInt(b, f.v, 10)
		}
	}
	return append(b, '}')
}

// AppendStreamCommand appends c as one line of a session stream.
func AppendStreamCommand(b []byte, c *StreamCommand) []byte {
	st := c.Start
	b = append(b, `{"start":{"run":`...)
	b = appendString(b, st.Run)
	b = append(b, `,"scenario":`...)
	b = appendString(b, st.Scenario)
	if len(st.Options) > 0 {
		// In key order, as encoding/json writes a map.
		b = append(b, `,"options":`...)
		enc, _ := json.Marshal(st.Options)
		b = append(b, enc...)
	}
	if st.Session != "" {
		b = append(b, `,"session":`...)
		b = appendString(b, st.Session)
	}
	if st.Spans {
		b = append(b, `,"spans":true`...)
	}
	if st.At != 0 {
		b = append(b, `,"at":`...)
		b = strconv.AppendInt(b, st.At, 10)
	}
	return append(b, "}}\n"...)
}

// appendString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 as U+FFFD (as encoding/json).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || n != 1 {
				i += n
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
