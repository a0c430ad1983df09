package engine

import (
	"reflect"
	"testing"

	"github.com/durabench/durabench/world"
)

// messageCases cover every field of the queue payload.
var messageCases = []message{
	{kind: kindWorkflow, run: "r1"},
	{kind: kindStep, run: "fanout-256-baseline-r0042", stage: 0, index: 255, seq: 255, stepInput: true, runContext: true},
	{kind: kindStep, run: "seq", stage: 49, index: 0, seq: 49},
	{kind: kindWorkflow, run: "hook-run", hookToken: "hook-run/h1", resumeID: "res-7", payload: []byte("pay\x00load")},
	{kind: kindStep, run: "", stage: 1234567, index: 89, seq: -1, stepInput: true},
}

// TestMessageWireFormat pins the encoding byte for byte: optimizations of
// encode must not change what a world stores or what an older engine reads.
func TestMessageWireFormat(t *testing.T) {
	want := []string{
		"w\x00r1\x000\x000\x000\x000\x00\x00\x00",
		"s\x00fanout-256-baseline-r0042\x000\x00255\x00255\x003\x00\x00\x00",
		"s\x00seq\x0049\x000\x0049\x000\x00\x00\x00",
		"w\x00hook-run\x000\x000\x000\x000\x00hook-run/h1\x00res-7\x00pay\x00load",
		"s\x00\x001234567\x0089\x00-1\x001\x00\x00\x00",
	}
	for i, m := range messageCases {
		if got := string(m.encode()); got != want[i] {
			t.Errorf("case %d: encode = %q, want %q", i, got, want[i])
		}
	}
}

func TestMessageRoundTrip(t *testing.T) {
	for i, m := range messageCases {
		got, err := decodeMessage(m.encode())
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("case %d: decoded %+v, want %+v", i, got, m)
		}
	}
	for _, bad := range []string{"", "w", "x\x00r\x000\x000\x000\x000\x00\x00\x00", "s\x00r\x00a\x000\x000\x000\x00\x00\x00",
		"s\x00r\x000\x000\x000\x0000\x00\x00\x00", "s\x00r\x000\x000\x000\x000\x00\x00"} {
		if _, err := decodeMessage([]byte(bad)); err == nil {
			t.Errorf("decode %q: no error", bad)
		}
	}
}

func BenchmarkMessageEncode(b *testing.B) {
	m := messageCases[1]
	b.ReportAllocs()
	for b.Loop() {
		_ = m.encode()
	}
}

func BenchmarkMessageDecode(b *testing.B) {
	body := messageCases[1].encode()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeMessage(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDerive256 is one completer's replay of a finished 256-branch
// fan-out log (the walk every completion without pending counts makes).
func BenchmarkDerive256(b *testing.B) {
	evs := fanOutLog(256)
	p := FanOut(256)
	b.ReportAllocs()
	for b.Loop() {
		if st := derive(evs, &p, 0); st.current != 1 {
			b.Fatal("stage not complete")
		}
	}
}

func TestDeriveFanOutLog(t *testing.T) {
	evs := fanOutLog(20)
	p := FanOut(20)
	if st := derive(evs, &p, 0); st.current != 1 || !st.started || st.lastPos != int64(len(evs)) {
		t.Fatalf("complete log: %+v", st)
	}
	// Up to the last creation: the stage exists, nothing is done.
	if st := derive(evs, &p, 22); st.current != 0 || st.created != 20 || st.done != 0 {
		t.Fatalf("after creates: %+v", st)
	}
	// Half the steps created: createdSet marks exactly those.
	if st := derive(evs, &p, 12); st.created != 10 || len(st.createdSet) != 20 || !st.createdSet[9] || st.createdSet[10] {
		t.Fatalf("half created: %+v", st)
	}
}

// fanOutLog is the log of a completed fan-out of n steps.
func fanOutLog(n int) []world.Event {
	evs := []world.Event{{Kind: world.RunCreated}, {Kind: world.RunStarted, ID: idRunStarted}}
	for i := range n {
		id := stepID(0, i)
		evs = append(evs, world.Event{Kind: world.StepCreated, ID: createEventID(id), Entity: id})
	}
	for i := range n {
		id := stepID(0, i)
		evs = append(evs, world.Event{Kind: world.StepStarted, Entity: id},
			world.Event{Kind: world.StepCompleted, ID: completeEventID(id), Entity: id})
	}
	for i := range evs {
		evs[i].Pos = int64(i + 1)
	}
	return evs
}
