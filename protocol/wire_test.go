package protocol

import (
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

// streamLines are lines a target or a driver may write on a session
// stream: the common ones and the corners of their strings.
var streamLines = []string{
	`{"timeline":{"run":"cap-r0001","status":"completed","events":[{"seq":1,"kind":"run_started","at":1001000000,"source":"history"},{"seq":2,"kind":"step_started","at":1001010000,"source":"worker","attempt":1},{"seq":3,"kind":"step_completed","at":1001020000,"source":"worker","attempt":1,"inline":true},{"seq":4,"kind":"run_completed","at":1001030000,"source":"history"}]}}`,
	`{"started":{"run":"r1","code":409,"error":"run r1 exists"}}`,
	`{"started":{"run":"r2","code":202,"accepted":1000200300}}`,
	`{"error":"a stream line must be {\"start\": {...}}"}`,
	`{"timeline":{"run":"r\u00e9\t\"x\"\\","status":"failed","error":"caf\u00e9 \ud83d\ude00 \/ \b\f\n\r","events":[{"seq":7,"kind":"hook_waiting","at":-5,"source":"history","token":"h/0"},{"seq":8,"kind":"chunk_read","at":9,"source":"worker","stage":2,"index":30,"written":8,"bytes":1024}],"anomalies":[{"kind":"duplicate_terminal_event","detail":"run_completed written 2 times"}]}}`,
	` { "timeline" : { "run" : "r" , "status" : "running" , "events" : [ ] , "extra" : [1, {"a": [true, false, null]}, "s"] } , "future" : {} } `,
	`{"timeline":{"run":"r","status":"running","events":[],"anomalies":[]}}`,
	`{"timeline":{"run":"r","status":"running","events":[{"seq":5,"kind":"span","at":100,"source":"sdk","stage":0,"index":7,"end":250,"category":"queue_wait","name":"queue.deliver","span":12,"parent":3,"after":11,"wait":40},{"seq":6,"kind":"span","at":100,"source":"history","end":100,"category":"compute"}]}}`,
	`{"start":{"run":"cap-r0001","scenario":"step","options":{"body":"10ms","branches":"20"},"session":"4242-1871f2b8c1d0a3e4-7","spans":true}}`,
	`{"start":{"run":"r","scenario":"fanout","options":{}}}`,
	`{"start":{"run":"r-at","scenario":"fanout","options":{"branches":"20"},"session":"s","at":1700000123456}}`,
	// Left to encoding/json: each must come out as it reads it.
	`{"timeline":{"run":null,"status":"running","events":null}}`,
	`{"started":{"run":"r","code":202.0}}`,
	`{"started":{"run":"r","run":"s","code":1}}`,
	`{"Timeline":{"RUN":"r","Status":"running","Events":[]}}`,
	"{\"error\":\"\xff invalid\"}",
	`{"error":"\ud800 lone"}`,
	`{"started":{"run":"r","code":99999999999999999999}}`,
	`{"timeline":{"run":"r","status":"running","events":[{"seq":01}]}}`,
	`{"start":{"run":"r","scenario":"s","options":{"a":"1","a":"2"}}}`,
	`{"start":{"run":"r","scenario":"s","options":{"a":1}}}`,
	`{"started":{}} x`,
	`[]`,
	``,
}

// TestWireLinesReadAsEncodingJSON: every line reads as encoding/json reads
// it — the same value, or an error where it has one.
func TestWireLinesReadAsEncodingJSON(t *testing.T) {
	for _, line := range streamLines {
		sameAsJSON(t, []byte(line))
	}
}

// TestWireFastPath: the lines durabench and its server write are read
// without encoding/json, and written lines read back as they were.
func TestWireFastPath(t *testing.T) {
	for _, line := range streamLines[:11] {
		var m StreamMessage
		var c StreamCommand
		d, e := wireDec{b: []byte(line)}, wireDec{b: []byte(line)}
		if !(d.streamMessage(&m) && d.end()) && !(e.streamCommand(&c) && e.end()) {
			t.Errorf("left to encoding/json: %s", line)
		}
		if m.Timeline != nil || m.Started != nil || m.Error != "" {
			out := appendStreamMessage(nil, &m)
			var back StreamMessage
			if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(normal(back), normal(m)) {
				t.Errorf("%s written as %s reads back as %+v (%v)", line, out, back, err)
			}
		}
		if c.Start != nil {
			out := AppendStreamCommand(nil, &c)
			var back StreamCommand
			if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, c) {
				t.Errorf("%s written as %s reads back as %+v (%v)", line, out, back, err)
			}
		}
	}
}

// sameAsJSON fails t unless line reads as a StreamMessage and as a
// StreamCommand exactly as encoding/json reads it.
func sameAsJSON(t *testing.T, line []byte) {
	t.Helper()
	var got, want StreamMessage
	err := DecodeStreamMessage(line, &got, nil)
	wantErr := json.Unmarshal(line, &want)
	if (err == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
		t.Fatalf("message %q: %+v (%v), encoding/json %+v (%v)", line, got, err, want, wantErr)
	}
	if err == nil && (got.Timeline != nil || got.Started != nil || got.Error != "") {
		var back StreamMessage
		if out := appendStreamMessage(nil, &got); json.Unmarshal(out, &back) != nil || !reflect.DeepEqual(normal(back), normal(got)) {
			t.Fatalf("message %q written as %q reads back as %+v", line, out, back)
		}
	}
	var gotC, wantC StreamCommand
	err = decodeStreamCommand(line, &gotC)
	wantErr = json.Unmarshal(line, &wantC)
	if (err == nil) != (wantErr == nil) || !reflect.DeepEqual(gotC, wantC) {
		t.Fatalf("command %q: %+v (%v), encoding/json %+v (%v)", line, gotC, err, wantC, wantErr)
	}
}

// normal is m as it reads back once written: a line holds one of its
// parts (started, else timeline, else error), its lists never null, a
// result's zero fields left out.
func normal(m StreamMessage) StreamMessage {
	switch {
	case m.Started != nil:
		return StreamMessage{Started: m.Started}
	case m.Timeline != nil:
		tl := *m.Timeline
		if tl.Events == nil {
			tl.Events = []Event{}
		}
		if len(tl.Anomalies) == 0 {
			tl.Anomalies = nil
		}
		return StreamMessage{Timeline: &tl}
	}
	return StreamMessage{Error: m.Error}
}

// FuzzStreamLine: any line reads as encoding/json reads it (value or
// error), and what it reads is written back to the same value.
func FuzzStreamLine(f *testing.F) {
	for _, line := range streamLines {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) { sameAsJSON(t, line) })
}

// BenchmarkStreamLine: reading a single-step run's timeline line, the
// fast path and encoding/json alternately (100 lines each per iteration),
// and their ratio.
func BenchmarkStreamLine(b *testing.B) {
	line := []byte(streamLines[0])
	var wire, std time.Duration
	lines := 0
	for b.Loop() {
		t0 := time.Now()
		for range 100 {
			var m StreamMessage
			if err := DecodeStreamMessage(line, &m, nil); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		for range 100 {
			var m StreamMessage
			if err := json.Unmarshal(line, &m); err != nil {
				b.Fatal(err)
			}
		}
		wire, std, lines = wire+t1.Sub(t0), std+time.Since(t1), lines+100
	}
	b.ReportMetric(float64(wire.Nanoseconds())/float64(lines), "wire-ns/line")
	b.ReportMetric(float64(std.Nanoseconds())/float64(lines), "json-ns/line")
	b.ReportMetric(float64(wire)/float64(std), "wire/json")
	b.ReportMetric(0, "ns/op")
}

// TestLineReaderLongLines: lines longer than the reader's buffer (a run's
// span events come in one) read whole, one after another, the buffer kept
// for them reused without mixing them up.
func TestLineReaderLongLines(t *testing.T) {
	var in strings.Builder
	var want []string
	for i, n := range []int{200 << 10, 10, 150 << 10, 300 << 10, 5} {
		line := strings.Repeat(string(rune('a'+i)), n)
		want = append(want, line+"\n")
		in.WriteString(line + "\n\n")
	}
	lr := NewLineReader(strings.NewReader(in.String()), 1<<20)
	for i, w := range want {
		got, err := lr.Next()
		if err != nil || string(got) != w {
			t.Fatalf("line %d: %d bytes (%v), want %d bytes of %q", i, len(got), err, len(w), w[0])
		}
	}
	if _, err := lr.Next(); err != io.EOF {
		t.Fatalf("after the last line: %v, want EOF", err)
	}
}
