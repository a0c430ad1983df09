package protocol

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

// An adapter is an executable named ExecutablePrefix+name (for example
// durabench-target-goworkflows), built from its own Go module under
// targets/<name>/. durabench starts it as
//
//	durabench-target-<name> --addr 127.0.0.1:0 [adapter flags…]
//
// and the adapter, once its engine is up and it listens, prints its base URL
// (http://127.0.0.1:PORT) as the first line of stdout; its log goes to
// stderr. SIGTERM (or SIGINT) stops it: it stops serving, stops its engine
// and removes what it started, then exits 0. Main does all of that around an
// adapter's Backend.
const ExecutablePrefix = "durabench-target-"

// Serve serves b over the protocol on addr until ctx is done: it opens b,
// listens, writes its URL and a newline to ready, and serves; when ctx ends
// it shuts the HTTP server down and closes b.
func Serve(ctx context.Context, addr string, b Backend, ready io.Writer) error {
	srv, err := NewServer(ctx, b)
	if err != nil {
		_ = b.Close(context.Background())
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Close(cctx)
	}()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
	}()
	if _, err := fmt.Fprintf(ready, "http://%s\n", ln.Addr()); err != nil {
		_ = ln.Close()
		return err
	}
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Main is an adapter executable's main. setup declares the adapter's own
// flags on fs and returns the function that builds its backend once the
// flags are parsed. Main adds --addr, serves until SIGINT or SIGTERM, and
// exits: 0 after a clean stop, 2 on bad flags, 1 when the engine fails.
func Main(name string, setup func(fs *flag.FlagSet) func(ctx context.Context) (Backend, error)) {
	fs := flag.NewFlagSet(ExecutablePrefix+name, flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on (port 0: a free port)")
	procs := fs.Int("procs", 0, "processors the adapter's Go runtime runs on (GOMAXPROCS; 0: every core)")
	build := setup(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "%s%s: unexpected argument %q\n", ExecutablePrefix, name, fs.Arg(0))
		os.Exit(2)
	}
	if err := SetProcs(*procs); err != nil {
		fmt.Fprintf(os.Stderr, "%s%s: %v\n", ExecutablePrefix, name, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := build(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s%s: %v\n", ExecutablePrefix, name, err)
		os.Exit(1)
	}
	if err := Serve(ctx, *addr, b, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "%s%s: %v\n", ExecutablePrefix, name, err)
		os.Exit(1)
	}
}

// SetProcs sets how many processors this target's Go runtime runs on
// (GOMAXPROCS), the --procs flag of `durabench target serve` and of every
// adapter built on Main: 0 leaves the runtime's default (every core). On a
// machine a target shares with durabench's driver, 1 leaves the driver a
// core: a runtime with a processor idle wakes a thread for it on every
// hand-off between goroutines, which costs the target CPU and holds the
// driver's pacer (docs/performance.md, § Driver capacity).
func SetProcs(n int) error {
	if n < 0 {
		return fmt.Errorf("--procs %d: processors must be 0 (every core) or more", n)
	}
	if n > 0 {
		runtime.GOMAXPROCS(n)
	}
	return nil
}
