package engine

import (
	"bytes"
	"testing"
)

// FuzzParseSwitchSet: any --switches item parses or is rejected with one
// line; a set that parses prints as a string that parses back to it.
func FuzzParseSwitchSet(f *testing.F) {
	for _, s := range []string{"none", "", "resilient-step-dispatch=0", "resilient-step-dispatch=1+guard=on",
		"lazy-hook-resume=0,guard=off", "guard=maybe", "warp=1", "=", "guard", "+,+"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseSwitchSet(s)
		if err != nil {
			if msg := err.Error(); msg == "" || bytes.ContainsRune([]byte(msg), '\n') {
				t.Fatalf("error %q is not one line", msg)
			}
			return
		}
		again, err := ParseSwitchSet(set.String())
		if err != nil || again.String() != set.String() {
			t.Fatalf("%q -> %q -> %q, %v", s, set.String(), again.String(), err)
		}
	})
}

// FuzzQueueMessage: a queue message another program wrote (or a torn one)
// decodes or is rejected, never panics; what decodes encodes back to a
// message that decodes the same.
func FuzzQueueMessage(f *testing.F) {
	for _, m := range []message{
		{kind: kindWorkflow, run: "r1"},
		{kind: kindStep, run: "fanout-1", stage: 1, index: 255, seq: 256, stepInput: true, runContext: true},
		{kind: kindWorkflow, run: "h", recover: true, hookToken: "tok", resumeID: "res", payload: []byte("a\x00b")},
	} {
		f.Add(m.encode())
	}
	f.Add([]byte("w\x00r\x00x\x000\x000\x000\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b)
		if err != nil {
			return
		}
		// The flags byte keeps only its three bits.
		again, err := decodeMessage(m.encode())
		if err != nil || again.run != m.run || again.stage != m.stage || again.index != m.index ||
			again.seq != m.seq || !bytes.Equal(again.payload, m.payload) {
			t.Fatalf("%q: round trip %+v -> %+v, %v", b, m, again, err)
		}
	})
}

// FuzzProgram: a run's program read back from its log decodes or is
// rejected.
func FuzzProgram(f *testing.F) {
	f.Add(FanOut(3).encode())
	f.Add(Sequence(2).encode())
	f.Add([]byte(`{"stages":[{"kind":"stream","stream":{"chunks":3,"interval":1000}},{"kind":"hook"}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodeProgram(b)
		if err != nil {
			return
		}
		_ = p.StepSeq(len(p.Stages), 0)
		_ = p.encode()
	})
}
