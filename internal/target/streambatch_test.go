package target_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/durabench/durabench/protocol"
)

// streamRun starts one fan-out of the given width on a session stream of
// a reference server whose StreamBatch is batch, and returns how many
// lines carried the run's news and how long after the start its terminal
// line came.
func streamRun(t *testing.T, batch time.Duration, branches int) (lines int, terminal time.Duration) {
	t.Helper()
	srv, err := protocol.NewServer(context.Background(), newRef(t))
	if err != nil {
		t.Fatal(err)
	}
	srv.StreamBatch = batch
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close(context.Background())
	})
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, hs.URL+"/v1/sessions/s1/stream", pr)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		got <- answer{resp, err}
	}()
	start, _ := json.Marshal(protocol.StreamCommand{Start: &protocol.StartRequest{
		Run: "r1", Scenario: "fanout", Options: map[string]string{"branches": fmt.Sprint(branches)}}})
	t0 := time.Now()
	if _, err := pw.Write(append(start, '\n')); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	defer a.resp.Body.Close()
	defer pw.Close()
	sc := bufio.NewScanner(a.resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m protocol.StreamMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Bytes(), err)
		}
		if m.Started != nil || m.Error != "" {
			t.Fatalf("the start was refused: %s", sc.Bytes())
		}
		if m.Timeline == nil || m.Timeline.Run != "r1" {
			continue
		}
		lines++
		if m.Timeline.Terminal() {
			return lines, time.Since(t0)
		}
	}
	t.Fatalf("the stream ended before the run did: %v", sc.Err())
	return 0, 0
}

// TestStreamBatchesNews: a session stream writes a run's news in batches
// of StreamBatch, not one line per event (each line wakes the driver on
// the cores the engine runs on), but its end at once: with a batch of two
// seconds, a 64-way fan-out's end still comes as soon as the run is over.
func TestStreamBatchesNews(t *testing.T) {
	// One line per wake, for the log: how many depends on how the
	// machine's load spaces the wakes (5 to 19 seen).
	each, _ := streamRun(t, -1, 64)
	const batch = 2 * time.Second
	lines, end := streamRun(t, batch, 64)
	// The news waits out the batch unless the run ends, which is written
	// at once (with the news held so far).
	if lines > 3 {
		t.Errorf("batched: the run's news came in %d lines, want at most 3", lines)
	}
	if end >= batch*3/4 {
		t.Errorf("batched: the run's end came %v after its start: held for the batch (%v) instead of written at once", end, batch)
	}
	t.Logf("one line per wake: %d lines; batched: %d lines, the end %v after the start", each, lines, end.Round(time.Millisecond))
}
