package target

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/durabench/durabench/protocol"
)

// Timeouts of the client: a request that is not a long poll or a start,
// a start, and how long a long poll waits on the target (the HTTP timeout
// adds PollSlack). A start waits longer: an engine still busy with what
// came before (the Workflow SDK 4.8.9 on world-local, redelivering a
// 256-branch run's steps for minutes) accepts a run late, and a late
// start is a measurement — charged to the engine, since every figure is
// anchored on the run's schedule — where a start given up at 10 s was a
// run counted failed that the engine went on to run.
const (
	RequestTimeout      = 10 * time.Second
	StartRequestTimeout = 2 * time.Minute
	PollWait            = 5 * time.Second
	PollSlack           = 5 * time.Second
)

// maxBody bounds what the client reads of one answer: a target that
// answers garbage fails the call, it cannot exhaust memory.
const maxBody = 64 << 20

// StatusError is a non-2xx answer of a target (it wraps ErrProtocol).
type StatusError struct {
	Code int
	Msg  string
}

func (e *StatusError) Error() string { return protocol.ErrProtocol.Error() + ": " + e.Msg }
func (e *StatusError) Unwrap() error { return protocol.ErrProtocol }

// StatusOf is the HTTP status of a target's non-2xx answer (0 for nil or
// another error).
func StatusOf(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// Client speaks the protocol to one target.
type Client struct {
	base string
	hc   *http.Client
	// PerRun makes sessions follow each run with its own timeline polls
	// even when the target serves batch polls (benchmarks, tests).
	PerRun bool
	// MaxBatch, when set, caps the batch version sessions use (e.g.
	// BatchStarts: batch starts and polls where the target also serves
	// streams; benchmarks, tests).
	MaxBatch int
}

// batchOf is the batch version a session uses with a target that declares
// declared.
func (c *Client) batchOf(declared int) int {
	switch {
	case c.PerRun:
		return 0
	case c.MaxBatch > 0:
		declared = min(declared, c.MaxBatch)
	}
	if declared >= protocol.BatchStreams && !strings.HasPrefix(c.base, "http://") {
		declared = protocol.BatchStarts // a stream is plain HTTP/1.1 on a connection of its own
	}
	return declared
}

// NewClient returns a client for the target at base (http://host:port).
func NewClient(base string) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("target URL %q: want http://host:port", base)
	}
	// One connection per request in flight, kept: a sweep with many runs
	// in flight long-polls each run's timeline at once, and the default
	// transport keeps only 2 idle connections per host — every other
	// request would open and close a connection.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = maxIdleConns
	tr.MaxIdleConns = maxIdleConns
	return &Client{base: strings.TrimRight(base, "/"), hc: &http.Client{Transport: tr}}, nil
}

// maxIdleConns is how many idle connections a client keeps to its target.
const maxIdleConns = 1024

// URL is the target's base URL.
func (c *Client) URL() string { return c.base }

// Do sends one request of method to path with in as its JSON body (nil:
// none) and decodes a 2xx answer into out (nil: discarded); any other
// status is a *StatusError. timeout bounds the whole exchange.
func (c *Client) Do(ctx context.Context, method, path string, in, out any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e protocol.ErrorReply
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b[:min(len(b), 200)]))
		}
		return &StatusError{Code: resp.StatusCode, Msg: fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, e.Error)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%w: %s %s: answer does not decode: %v", protocol.ErrProtocol, method, path, err)
	}
	return nil
}

// Info is GET /v1/info.
func (c *Client) Info(ctx context.Context) (protocol.Info, error) {
	var i protocol.Info
	if err := c.Do(ctx, http.MethodGet, "/v1/info", nil, &i, RequestTimeout); err != nil {
		return protocol.Info{}, err
	}
	if i.Protocol != protocol.ProtocolVersion {
		return protocol.Info{}, fmt.Errorf("%w: %s speaks protocol %d, durabench %d", protocol.ErrProtocol, c.base, i.Protocol, protocol.ProtocolVersion)
	}
	if i.Engine == "" {
		return protocol.Info{}, fmt.Errorf("%w: %s: info names no engine", protocol.ErrProtocol, c.base)
	}
	return i, nil
}

// Start is POST /v1/runs.
func (c *Client) Start(ctx context.Context, req protocol.StartRequest) (protocol.StartReply, error) {
	var r protocol.StartReply
	err := c.Do(ctx, http.MethodPost, "/v1/runs", req, &r, StartRequestTimeout)
	return r, err
}

// Batch is POST /v1/timelines (batch 1): the news of a session's runs
// in one long poll, after releasing req.Release. wait is the long poll's.
func (c *Client) Batch(ctx context.Context, req protocol.BatchRequest, wait time.Duration) (protocol.BatchReply, error) {
	var r protocol.BatchReply
	req.Wait = protocol.FormatWait(wait)
	if err := c.Do(ctx, http.MethodPost, "/v1/timelines", req, &r, wait+PollSlack); err != nil {
		return protocol.BatchReply{}, err
	}
	for _, t := range r.Timelines {
		switch t.Status {
		case protocol.StatusRunning, protocol.StatusCompleted, protocol.StatusFailed:
		default:
			return protocol.BatchReply{}, fmt.Errorf("%w: batch timeline of %s: status %q", protocol.ErrProtocol, t.Run, t.Status)
		}
	}
	return r, nil
}

// Starts is POST /v1/starts (batch 2).
func (c *Client) Starts(ctx context.Context, runs []protocol.StartRequest) (protocol.StartsReply, error) {
	var r protocol.StartsReply
	if err := c.Do(ctx, http.MethodPost, "/v1/starts", protocol.StartsRequest{Runs: runs}, &r, StartRequestTimeout); err != nil {
		return protocol.StartsReply{}, err
	}
	if len(r.Started) != len(runs) {
		return protocol.StartsReply{}, fmt.Errorf("%w: a batch start of %d runs answered %d", protocol.ErrProtocol, len(runs), len(r.Started))
	}
	return r, nil
}

// Timeline is GET /v1/runs/{id}/timeline?after=…&wait=….
func (c *Client) Timeline(ctx context.Context, run string, after int64, wait time.Duration) (protocol.Timeline, error) {
	var t protocol.Timeline
	path := "/v1/runs/" + url.PathEscape(run) + "/timeline?after=" + strconv.FormatInt(after, 10) + "&wait=" + protocol.FormatWait(wait)
	if err := c.Do(ctx, http.MethodGet, path, nil, &t, wait+PollSlack); err != nil {
		return protocol.Timeline{}, err
	}
	switch t.Status {
	case protocol.StatusRunning, protocol.StatusCompleted, protocol.StatusFailed:
	default:
		return protocol.Timeline{}, fmt.Errorf("%w: timeline of %s: status %q", protocol.ErrProtocol, run, t.Status)
	}
	return t, nil
}

// Resume is POST /v1/runs/{id}/hooks/{token}.
func (c *Client) Resume(ctx context.Context, run, token string, req protocol.ResumeRequest) error {
	return c.Do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(run)+"/hooks/"+url.PathEscape(token), req, nil, RequestTimeout)
}

// Release is DELETE /v1/runs/{id} (protocol 1.1): durabench has read the
// run's timeline to its end and the target may forget it.
func (c *Client) Release(ctx context.Context, run string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/runs/"+url.PathEscape(run), nil, nil, RequestTimeout)
}

// Clock is GET /v1/clock.
func (c *Client) Clock(ctx context.Context) (time.Duration, error) {
	var r protocol.ClockReply
	if err := c.Do(ctx, http.MethodGet, "/v1/clock", nil, &r, RequestTimeout); err != nil {
		return 0, err
	}
	return time.Duration(r.Now), nil
}

// Stream is a session stream (POST /v1/sessions/{session}/stream, batch
// 3): the driver writes its starts on it, one line each, as the pacer
// starts runs, and reads start results and the session's runs' news as
// the target writes them — no request per start, no poll. It is HTTP/1.1
// on a connection of its own, its request body and its answer both
// chunked and open until Close.
type Stream struct {
	conn net.Conn
	mu   sync.Mutex // one start's chunk at a time
	buf  []byte
	// lines reads the answer's lines (only Next).
	lines *protocol.LineReader
	// events is the array a timeline's events are read into, reused by
	// the next line (Next).
	events []protocol.Event
}

// OpenStream opens a stream for session. An https target has none (the
// session then uses batch starts and polls).
func (c *Client) OpenStream(ctx context.Context, session string) (*Stream, error) {
	u, err := url.Parse(c.base)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("a session stream needs an http:// target, not %s", c.base)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	path := strings.TrimRight(u.Path, "/") + "/v1/sessions/" + url.PathEscape(session) + "/stream"
	fail := func(err error) error { return fmt.Errorf("POST %s: %w", path, err) }
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fail(err)
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	// Expect: 100-continue: a target that answers without reading the
	// body (a 404: no streams) must not wait for a body that never ends.
	head := "POST " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/x-ndjson\r\n" +
		"Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		conn.Close()
		return nil, fail(err)
	}
	req, _ := http.NewRequest(http.MethodPost, c.base+path, nil)
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, req)
	for err == nil && resp.StatusCode/100 == 1 {
		resp, err = http.ReadResponse(br, req) // 100 Continue: the answer follows
	}
	if err != nil {
		conn.Close()
		return nil, fail(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer conn.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		var e protocol.ErrorReply
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b[:min(len(b), 200)]))
		}
		return nil, &StatusError{Code: resp.StatusCode, Msg: fmt.Sprintf("POST %s: %s: %s", path, resp.Status, e.Error)}
	}
	_ = conn.SetDeadline(time.Time{})
	return &Stream{conn: conn, lines: protocol.NewLineReader(resp.Body, maxBody)}, nil
}

// Start writes req's start on the stream, as one chunk. at is called
// once the stream is the caller's, before the write: the start's time of
// sending (a start waits for the one before it).
func (st *Stream) Start(req protocol.StartRequest, at func() time.Duration) (time.Duration, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	sent := at()
	// The chunk: its size in hex (the line's, within the 4 digits kept
	// for it), the line, CRLF.
	b := append(st.buf[:0], "0000\r\n"...)
	b = protocol.AppendStreamCommand(b, &protocol.StreamCommand{Start: &req})
	n := len(b) - 6
	if n > 0xffff {
		return 0, fmt.Errorf("session stream: a start of %d bytes", n)
	}
	const hex = "0123456789abcdef"
	b[0], b[1], b[2], b[3] = hex[n>>12], hex[n>>8&0xf], hex[n>>4&0xf], hex[n&0xf]
	b = append(b, "\r\n"...)
	st.buf = b
	if _, err := st.conn.Write(b); err != nil {
		return 0, fmt.Errorf("session stream: %w", err)
	}
	return sent, nil
}

// Next reads the stream's next line; io.EOF once the target ended the
// stream. A timeline's events are valid until the next call (their array
// is reused: a run's events are read once, then fed to the driver).
func (st *Stream) Next() (protocol.StreamMessage, error) {
	line, err := st.lines.Next()
	if err == io.EOF {
		return protocol.StreamMessage{}, io.EOF
	}
	if err != nil {
		return protocol.StreamMessage{}, fmt.Errorf("session stream: %w", err)
	}
	var m protocol.StreamMessage
	if err := protocol.DecodeStreamMessage(line, &m, st.events); err != nil {
		return protocol.StreamMessage{}, fmt.Errorf("%w: session stream: a line does not decode: %v", protocol.ErrProtocol, err)
	}
	if m.Timeline != nil {
		st.events = m.Timeline.Events
	}
	switch {
	case m.Error != "":
		return protocol.StreamMessage{}, fmt.Errorf("%w: session stream: the target ended it: %s", protocol.ErrProtocol, m.Error)
	case m.Started != nil:
	case m.Timeline != nil:
		switch m.Timeline.Status {
		case protocol.StatusRunning, protocol.StatusCompleted, protocol.StatusFailed:
		default:
			return protocol.StreamMessage{}, fmt.Errorf("%w: session stream: timeline of %s: status %q", protocol.ErrProtocol, m.Timeline.Run, m.Timeline.Status)
		}
	default:
		return protocol.StreamMessage{}, fmt.Errorf("%w: session stream: a line with neither started nor timeline: %.200s", protocol.ErrProtocol, line)
	}
	return m, nil
}

// Close ends the driver's side of the stream and the connection.
func (st *Stream) Close() error {
	st.mu.Lock()
	_, _ = io.WriteString(st.conn, "0\r\n\r\n")
	st.mu.Unlock()
	return st.conn.Close()
}
