package metrics

import (
	"testing"
	"time"

	"github.com/durabench/durabench/engine"
)

// TestStreamDiagnostics: a 20-chunk replay whose writer was 30 ms late on
// chunk 7 and whose chunk 12 took 50 ms to arrive: write slip is the 30 ms,
// CDV the 49 ms rise, the steady window drops 2 chunks at each end, and the
// progress and size profiles pool the round trips.
func TestStreamDiagnostics(t *testing.T) {
	cad := make([]engine.CadenceChunk, 20)
	for i := range cad {
		cad[i] = engine.CadenceChunk{Offset: dms(float64(10 * i)), Bytes: 100 + 100*(i%2)}
	}
	spec := &engine.StreamSpec{Cadence: cad, Speed: 2} // due every 5 ms
	tl := RunTimeline{ID: "r", T0: 0, Finished: true, Done: dms(200),
		Steps: []engine.StepSpan{sp(0, 0, 0, 1, 150, false, 1), sp(0, 1, 1, 1, 160, false, 1)}}
	for i := range 20 {
		written := dms(1 + 5*float64(i))
		if i == 7 {
			written += dms(30)
		}
		rtt := dms(1)
		if i == 12 {
			rtt = dms(50)
		}
		tl.Chunks = append(tl.Chunks, engine.ChunkSpan{Stage: 0, Index: i, Written: written, Read: written + rtt, Bytes: cad[i].Bytes})
	}
	cs := chunksByIndex(&tl)
	if d, ok := WriterSlip(&tl, cs, spec); !ok || d != dms(30) {
		t.Errorf("write slip = %v, %v; want 30ms", d, ok)
	}
	if d, ok := DelayVariation(cs); !ok || d != dms(49) {
		t.Errorf("CDV = %v, %v; want 49ms", d, ok)
	}
	// Window: chunks 2..17; bytes of chunks 3..17 = 8×200 + 7×100 = 2300.
	r, w, ok := SteadyRates(cs, spec)
	wantW := time.Duration(float64(dms(75)) * 1024 / 2300) // written 2 → 17: 5 ms × 15
	wantR := time.Duration(float64(dms(75)) * 1024 / 2300)
	if !ok || w != wantW || r != wantR {
		t.Errorf("rates = read %v, write %v, %v; want %v, %v", r, w, ok, wantR, wantW)
	}
	c := Collect([]RunTimeline{tl}, Config{Stream: spec})
	if len(c.CRTTProgress) != ProgressBins || c.CRTTProgress[6].Count != 2 || c.CRTTProgress[6].Mean() != dms(25.5) {
		t.Errorf("progress bin 6 (chunks 12, 13) = %+v; want 2 chunks, mean 25.5ms", c.CRTTProgress)
	}
	if len(c.CRTTBySize) != 2 || c.CRTTBySize[0].Key != 100 || c.CRTTBySize[1].Key != 200 || c.CRTTBySize[0].Count != 10 {
		t.Errorf("by size = %+v; want 100 and 200 bytes, 10 chunks each", c.CRTTBySize)
	}
	if n := len(c.Samples[CRTTEarly].Values); n != 19 || c.Samples[CRTTFirst].Values[0] != 1000 {
		t.Errorf("crtt_early %d samples, crtt_first %v", n, c.Samples[CRTTFirst].Values)
	}
	if c.Samples[CRTTLate] != nil {
		t.Errorf("20 chunks have no chunk 21: crtt_late %v", c.Samples[CRTTLate].Values)
	}
}
