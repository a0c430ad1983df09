package natsworld

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// pullExpiry is how long one pull request waits at the server; pullGrace
// how long after that its end (a 408) may take to arrive before the request
// is taken for lost (a server restart or a consumer leader change can drop
// it without a word).
const (
	pullExpiry = 500 * time.Millisecond
	pullGrace  = 500 * time.Millisecond
)

// puller is the client side of a pull consumer that knows how many
// messages the server may still send it: every pull request adds its batch,
// every message delivered takes one off, and every end-of-request status
// (408 expired, 409) takes off what the request still owed (its
// Nats-Pending-Messages header). The server delivers a message under its
// own subject, not the request's, so requests share one reply subject and
// the count is kept in total, as nats.go's iterator keeps it.
//
// That count is what makes a stop lose nothing: stop sends no new request
// and keeps the subscription until the count is zero — every request
// fulfilled or expired — handing back (nak) what arrives meanwhile. The
// jetstream iterator this replaces unsubscribed at once on Drain; a message
// the consumer's leader had already sent (over a route, on a cluster) then
// reached no one and waited out the visibility timeout: a stopped worker's
// messages stalled runs.
type puller struct {
	nc    *nats.Conn
	subj  string // $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>
	inbox string
	size  int // most messages buffered plus asked for
	sub   *nats.Subscription
	// handover makes stop wait for the open requests to end: set when
	// consumers in other processes may take over this one's messages.
	handover bool

	// in holds delivered messages until the loop takes them. Its capacity
	// is twice size, more than can be asked for; a message that still
	// finds it full (one sent for a request the count gave up as lost) is
	// handed back at once.
	in chan *nats.Msg

	mu      sync.Mutex
	asked   int           // messages the open requests may still bring
	last    time.Time     // when the last request was sent
	closing bool          // no new requests
	changed chan struct{} // closed and renewed when asked reaches zero
}

// newPuller subscribes to a fresh inbox for consumer on stream.
func newPuller(nc *nats.Conn, stream, consumer string, size int, handover bool) (*puller, error) {
	p := &puller{
		nc:       nc,
		handover: handover,
		subj:     "$JS.API.CONSUMER.MSG.NEXT." + stream + "." + consumer,
		inbox:    nc.NewInbox(),
		size:     size,
		in:       make(chan *nats.Msg, 2*size),
		changed:  make(chan struct{}),
	}
	sub, err := nc.Subscribe(p.inbox, p.receive)
	if err != nil {
		return nil, err
	}
	// in can hold everything that may be asked for; the subscription's
	// own buffer only ever holds what the callback has not taken yet.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	p.sub = sub
	return p, nil
}

// receive takes one reply: a message, or a status that ends a request
// (408 expired, 409 leader change or consumer gone, 404 none).
func (p *puller) receive(m *nats.Msg) {
	if status := m.Header.Get("Status"); status != "" && len(m.Data) == 0 {
		if status == "100" { // idle heartbeat
			return
		}
		p.mu.Lock()
		if n, err := strconv.Atoi(m.Header.Get("Nats-Pending-Messages")); err == nil {
			p.asked = max(p.asked-n, 0)
		} else {
			// An end without a count: take every request for over.
			p.asked = 0
		}
		p.signal()
		p.mu.Unlock()
		// Ask again at once: an idle consumer's request expires every
		// pullExpiry, and until the loop's next fill no message would be
		// delivered.
		_ = p.fill()
		return
	}
	p.mu.Lock()
	p.asked = max(p.asked-1, 0)
	p.signal()
	p.mu.Unlock()
	select {
	case p.in <- m:
	default:
		_ = m.Nak()
	}
}

// signal wakes a stop waiting for the count to reach zero, once it has
// (not on every message: a channel per delivery would be garbage on the
// hot path). p.mu is held.
func (p *puller) signal() {
	if p.asked > 0 {
		return
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// expire takes every request for over once the last one sent is past its
// expiry and a grace: the server would have said so by then, unless it
// lost them (a restart, a consumer leader change). p.mu is held.
func (p *puller) expire(now time.Time) {
	if p.asked > 0 && now.After(p.last.Add(pullExpiry+pullGrace)) {
		p.asked = 0
		p.signal()
	}
}

// fill asks the server for as many messages as the buffer can still take,
// once that is at least half of it (fewer, larger requests).
func (p *puller) fill() error {
	now := time.Now()
	p.mu.Lock()
	p.expire(now)
	want := p.size - p.asked - len(p.in)
	if p.closing || want < max(1, p.size/2) {
		p.mu.Unlock()
		return nil
	}
	p.asked += want
	p.last = now
	p.mu.Unlock()
	body, _ := json.Marshal(struct {
		Batch   int   `json:"batch"`
		Expires int64 `json:"expires"`
	}{want, int64(pullExpiry)})
	if err := p.nc.PublishRequest(p.subj, p.inbox, body); err != nil {
		p.mu.Lock()
		p.asked = max(p.asked-want, 0)
		p.mu.Unlock()
		return err
	}
	return nil
}

// next returns the next message, or nil after wait. It asks for more
// first when the buffer runs low.
func (p *puller) next(wait time.Duration) (*nats.Msg, error) {
	select {
	case m := <-p.in:
		return m, p.fill()
	default:
	}
	if err := p.fill(); err != nil {
		return nil, err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case m := <-p.in:
		return m, nil
	case <-t.C:
		return nil, nil
	}
}

// quit sends no more requests.
func (p *puller) quit() {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
}

// stop sends no more requests and, for a handover, hands back (nak)
// everything delivered until every request sent is over or limit passes
// (at most pullExpiry while the server is up); then it unsubscribes and
// hands back what is left. It returns how many messages it handed back.
// Without a handover (this process is the only consumer: whoever consumes
// next is in this process, on a drained subscription) it does not wait.
func (p *puller) stop(limit time.Duration) int {
	p.quit()
	naked := 0
	nak := func(m *nats.Msg) {
		_ = m.Nak()
		naked++
	}
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		p.mu.Lock()
		p.expire(time.Now())
		open, changed := p.asked > 0, p.changed
		p.mu.Unlock()
		if !open || !p.handover || time.Now().After(deadline) || !p.nc.IsConnected() {
			break
		}
		select {
		case m := <-p.in:
			nak(m)
		case <-changed:
		case <-tick.C:
		}
	}
	// Drain, not Unsubscribe: replies the subscription received but its
	// callback has not taken yet would be thrown away.
	_ = p.sub.Drain()
	for end := time.Now().Add(time.Second); p.sub.IsValid() && time.Now().Before(end); {
		select {
		case m := <-p.in:
			nak(m)
		case <-tick.C:
		}
	}
	for {
		select {
		case m := <-p.in:
			nak(m)
		default:
			return naked
		}
	}
}
