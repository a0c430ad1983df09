package target

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/durabench/durabench/protocol"

	"github.com/durabench/durabench/engine"
	"github.com/durabench/durabench/metrics"
	"github.com/durabench/durabench/world"
	"github.com/durabench/durabench/world/mem"
)

// answers is an http.RoundTripper that answers the first request to a
// path with (status, body) and every later one with a completed timeline
// (so a session's long poll ends).
type answers struct {
	status int
	body   []byte
	mu     sync.Mutex
	used   map[string]bool
}

func (a *answers) RoundTrip(r *http.Request) (*http.Response, error) {
	a.mu.Lock()
	first := !a.used[r.URL.Path]
	a.used[r.URL.Path] = true
	a.mu.Unlock()
	status, body := a.status, a.body
	if !first {
		status, body = 200, []byte(`{"run":"r","status":"completed","events":[]}`)
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Body: io.NopCloser(bytes.NewReader(body)),
		Header: http.Header{}, Request: r}, nil
}

// observed counts what a session fed its observer (its spans included:
// a metrics.SpanSink).
type observed struct {
	mu        sync.Mutex
	spans     []engine.StepSpan
	intervals []metrics.Span
	done      bool
}

func (o *observed) AddSpans(_ string, spans []metrics.Span) {
	o.mu.Lock()
	o.intervals = append(o.intervals, spans...)
	o.mu.Unlock()
}

func (o *observed) StepBody(_ string, s engine.StepSpan) {
	o.mu.Lock()
	o.spans = append(o.spans, s)
	o.mu.Unlock()
}
func (o *observed) HookCreated(string, string, time.Duration) {}
func (o *observed) StreamChunk(string, engine.ChunkSpan)      {}
func (o *observed) RunFinished(string, time.Duration, bool) {
	o.mu.Lock()
	o.done = true
	o.mu.Unlock()
}

// FuzzTargetAnswers: whatever a target answers (any status, any body),
// each client call returns a value or an error, an answer that does not
// decode is an ErrProtocol error, and a session following a run's
// timeline ends (finished or failed), never panics or hangs.
func FuzzTargetAnswers(f *testing.F) {
	for _, s := range []struct {
		status int
		body   string
	}{
		{200, `{"protocol":1,"engine":"reference","version":"resilient","clock":"ns","scenarios":[{"name":"fanout","max":{"branches":10000}}]}`},
		{200, `{"run":"r","accepted":12345}`},
		{200, `{"now":987654321}`},
		{200, `{"run":"r","status":"running","events":[{"seq":1,"kind":"run_started","at":1,"source":"history"},` +
			`{"seq":2,"kind":"step_started","at":2,"source":"worker","stage":0,"index":3,"attempt":1},` +
			`{"seq":3,"kind":"step_completed","at":5,"source":"worker","stage":0,"index":3,"attempt":1},` +
			`{"seq":4,"kind":"hook_waiting","at":6,"token":"t"},{"seq":5,"kind":"chunk_read","at":7,"written":6,"stage":1,"index":0},` +
			`{"seq":6,"kind":"run_completed","at":9}]}`},
		{200, `{"run":"r","status":"completed","events":[{"seq":1,"kind":"span","at":1,"end":4,"source":"sdk","category":"queue_wait",` +
			`"name":"q","span":2,"parent":1,"after":3,"wait":9},{"seq":2,"kind":"span","at":5,"end":4,"category":"network"},` +
			`{"seq":3,"kind":"span","at":1,"end":2,"category":"driver_lag","span":-4,"wait":-1},` +
			`{"seq":4,"kind":"step_completed","at":5,"stage":0,"index":1},{"seq":5,"kind":"run_completed","at":9}]}`},
		{200, `{"run":"r","status":"failed","error":"boom","events":[{"seq":1,"kind":"run_failed","at":3}]}`},
		{200, `{"run":"r","status":"running","events":[{"seq":2,"kind":"x"},{"seq":1,"kind":"x"}]}`},
		{500, `{"error":"no such scenario"}`}, {404, "not json"}, {200, "garbage"}, {200, ""},
	} {
		f.Add(s.status, []byte(s.body))
	}
	rt := mem.New(world.Options{}).Runtime()
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 599 {
			return
		}
		a := &answers{status: status, body: body, used: map[string]bool{}}
		c := &Client{base: "http://target", hc: &http.Client{Transport: a}}
		ctx := context.Background()
		// A refusal, or an answer that does not decode, is the target's
		// fault: an ErrProtocol error.
		bad := status/100 != 2 || !json.Valid(body)
		check := func(what string, err error) {
			if bad && !errors.Is(err, protocol.ErrProtocol) {
				t.Fatalf("%s: answer %d %q: error %v is not an ErrProtocol error", what, status, body, err)
			}
		}
		_, err := c.Info(ctx)
		check("info", err)
		_, err = c.Start(ctx, protocol.StartRequest{Run: "r", Scenario: "fanout"})
		check("start", err)
		_, err = c.Clock(ctx)
		check("clock", err)

		a.used = map[string]bool{}
		s := &Session{c: c, rt: rt, hooks: map[string]hookRef{}}
		obs := &observed{}
		failed := false
		detach, _ := s.Attach(ctx, obs, func(string, time.Duration, error) { failed = true })
		done := make(chan struct{})
		go func() { s.follow("r", engine.FanOut(4)); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the session did not end")
		}
		detach()
		if !failed && !obs.done {
			t.Fatal("the run neither finished nor failed")
		}
		for _, sp := range obs.intervals {
			// Only the spans durabench can place reach the timeline.
			if sp.End < sp.Start || sp.Wait < 0 || sp.Wait > sp.End-sp.Start || sp.Category == metrics.CatDriverLag {
				t.Fatalf("a span that cannot be placed reached the timeline: %+v", sp)
			}
			if _, ok := metrics.CategoryIndex(sp.Category); !ok {
				t.Fatalf("a span of an unknown category reached the timeline: %+v", sp)
			}
		}
	})
}
