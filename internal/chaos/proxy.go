// Package chaos breaks what a sweep depends on while it runs — a node of a
// NATS cluster, the PostgreSQL server, a target adapter, the network — and
// its tests (make chaos, docs/reliability.md) check what a user then sees:
// every run finished, or counted as failed or stalled with its reason, none
// lost, the exit code and the results file.
//
// Proxy is the network part: a TCP proxy on loopback that adds latency,
// resets every connection, or holds every byte for a while (a blackhole),
// between durabench and a server.
package chaos

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections from a loopback port to one upstream
// address. Its faults apply to every connection, open or new, until changed.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu        sync.Mutex
	latency   time.Duration
	holdUntil time.Time     // blackhole: nothing is forwarded before then
	healed    chan struct{} // closed when the current blackhole ends
	links     map[*link]struct{}
	closed    bool

	accepted atomic.Int64
	resets   atomic.Int64
	wg       sync.WaitGroup
}

// link is one proxied connection: the client's side and the upstream's.
type link struct {
	client, server net.Conn
}

// Listen starts a proxy to upstream (host:port) on a free loopback port.
func Listen(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: proxy listen: %w", err)
	}
	p := &Proxy{ln: ln, upstream: upstream, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted is the number of client connections the proxy accepted.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Resets is the number of connections Reset broke.
func (p *Proxy) Resets() int64 { return p.resets.Load() }

// SetLatency delays every chunk of bytes, in both directions, by d from
// when the proxy read it (0: none). Order is kept.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Reset breaks every open connection with a TCP reset (both sides see
// "connection reset by peer"), and returns how many it broke. New
// connections are accepted as before.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.reset()
	}
	p.resets.Add(int64(len(links)))
	return len(links)
}

// Blackhole holds every byte, in both directions and on new connections
// too, for d: nothing is forwarded and nothing is lost (as when a network
// partition heals before TCP gives up). Then everything held flows again.
func (p *Proxy) Blackhole(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed == nil {
		p.healed = make(chan struct{})
	}
	p.holdUntil = time.Now().Add(d)
	healed := p.healed
	time.AfterFunc(d, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.healed == healed && !time.Now().Before(p.holdUntil) {
			close(healed)
			p.healed = nil
		}
	})
}

// hold waits while a blackhole lasts.
func (p *Proxy) hold() {
	p.mu.Lock()
	h := p.healed
	p.mu.Unlock()
	if h != nil {
		<-h
	}
}

// Close stops accepting, closes every connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	if p.healed != nil {
		close(p.healed)
		p.healed = nil
	}
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range links {
		_ = l.client.Close()
		_ = l.server.Close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects one client to the upstream and pumps both ways.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	p.hold() // a connection made during a blackhole reaches nothing yet
	server, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		(&link{client: client}).reset()
		return
	}
	l := &link{client: client, server: server}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	var both sync.WaitGroup
	both.Add(2)
	go func() { defer both.Done(); p.pump(server, client) }()
	go func() { defer both.Done(); p.pump(client, server) }()
	both.Wait()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// chunk is bytes read from one side, and when.
type chunk struct {
	b  []byte
	at time.Time
}

// pump copies src to dst through the proxy's faults. A reader keeps
// reading (so latency does not slow throughput down) and a writer writes
// each chunk once its delay has passed and no blackhole holds it. When
// either side ends, both connections close.
func (p *Proxy) pump(dst, src net.Conn) {
	chunks := make(chan chunk, 64)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- chunk{buf[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		p.hold()
		p.mu.Lock()
		d := p.latency
		p.mu.Unlock()
		if wait := time.Until(c.at.Add(d)); wait > 0 {
			time.Sleep(wait)
		}
		p.hold()
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	// One side is done: end the other, and drain the reader.
	_ = dst.Close()
	_ = src.Close()
	for range chunks {
	}
}

// reset closes both sides with SO_LINGER 0: a TCP RST, not a FIN.
func (l *link) reset() {
	for _, c := range []net.Conn{l.client, l.server} {
		if c == nil {
			continue
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}
