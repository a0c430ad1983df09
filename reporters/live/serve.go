package live

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves m in the Prometheus text format (OpenMetrics or the
// protobuf format with native histograms when the scraper asks for them).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Server is m served over HTTP at /metrics.
type Server struct {
	srv  *http.Server
	addr string
	done chan struct{}
}

// Serve listens on addr (host:port; ":0" picks a free port) and serves m at
// /metrics until Close. A port that cannot be bound is an error at once, so
// a sweep never starts without the metrics it was asked to serve.
func (m *Metrics) Serve(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "durabench sweep: metrics at /metrics")
	})
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, addr: ln.Addr().String(),
		done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the listener failed after the sweep started; the sweep goes on
		}
	}()
	return s, nil
}

// Addr is the address the server listens on (the port ":0" picked).
func (s *Server) Addr() string { return s.addr }

// Close stops the server, letting a scrape in progress finish (up to a
// second).
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	return err
}
