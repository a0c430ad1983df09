package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader) (time.Duration, error) {
	start := time.Now()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if line != "ping\n" {
		return 0, fmt.Errorf("echo = %q", line)
	}
	return time.Since(start), nil
}

func TestProxyFaults(t *testing.T) {
	p, err := Listen(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	c, r := dial()
	if d, err := roundTrip(c, r); err != nil || d > 5*time.Second {
		t.Fatalf("round trip without faults: %v, %v", d, err)
	}

	// Latency applies each way: a round trip takes at least twice it.
	p.SetLatency(50 * time.Millisecond)
	if d, err := roundTrip(c, r); err != nil || d < 100*time.Millisecond {
		t.Fatalf("round trip with 50ms latency: %v, %v; want at least 100ms", d, err)
	}
	p.SetLatency(0)

	// A blackhole holds bytes, loses none, on open and new connections.
	p.Blackhole(400 * time.Millisecond)
	c2, r2 := dial()
	held := make(chan time.Duration, 2)
	for _, cc := range []struct {
		c net.Conn
		r *bufio.Reader
	}{{c, r}, {c2, r2}} {
		go func() {
			d, err := roundTrip(cc.c, cc.r)
			if err != nil {
				d = -1
			}
			held <- d
		}()
	}
	for range 2 {
		if d := <-held; d < 250*time.Millisecond {
			t.Fatalf("round trip through a 400ms blackhole: %v; want it held, then answered", d)
		}
	}

	// A reset breaks both open connections with ECONNRESET; a new one works.
	if n := p.Reset(); n != 2 {
		t.Fatalf("Reset broke %d connections, want 2", n)
	}
	if _, err := roundTrip(c, r); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("round trip after Reset: %v, want connection reset", err)
	}
	c3, r3 := dial()
	if _, err := roundTrip(c3, r3); err != nil {
		t.Fatalf("new connection after Reset: %v", err)
	}
	if p.Accepted() != 3 || p.Resets() != 2 {
		t.Errorf("accepted %d, resets %d; want 3 and 2", p.Accepted(), p.Resets())
	}
}
