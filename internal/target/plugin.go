package target

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/durabench/durabench/protocol"
)

// ErrNoAdapter is returned by Find when no executable for a name exists.
var ErrNoAdapter = errors.New("no adapter executable")

// Find returns the adapter executable for name: next to the running
// durabench binary first (make engines puts both in bin/), then on PATH.
func Find(name string) (string, error) {
	exe := protocol.ExecutablePrefix + name
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), exe)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(exe); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("target %s: %w %s next to durabench or on PATH (make engines builds the bundled ones into bin/)",
		name, ErrNoAdapter, exe)
}

// Installed lists the adapters Find would find, by name, with their
// paths: next to the running durabench binary first, then on PATH.
func Installed() map[string]string {
	out := map[string]string{}
	var dirs []string
	if self, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(self))
	}
	dirs = append(dirs, filepath.SplitList(os.Getenv("PATH"))...)
	for _, dir := range dirs {
		matches, _ := filepath.Glob(filepath.Join(dir, protocol.ExecutablePrefix+"*"))
		for _, m := range matches {
			name := strings.TrimPrefix(filepath.Base(m), protocol.ExecutablePrefix)
			if st, err := os.Stat(m); err != nil || st.IsDir() || st.Mode()&0o111 == 0 || out[name] != "" {
				continue
			}
			out[name] = m
		}
	}
	return out
}

// Plugin is a running adapter process.
type Plugin struct {
	Name string
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  *tailBuffer
}

// StartTimeout bounds how long an adapter may take to print its URL
// (starting an embedded Temporal server or PostgreSQL takes seconds),
// counted from its start or from the last line it wrote to stderr: an
// adapter that says what it is doing (the workflow adapter building an SDK
// from tarballs, minutes, prints a line every 20 s) is given StartTimeout
// again from each line. A variable for the tests.
var StartTimeout = 2 * time.Minute

// signalWriter signals on ch (without blocking) that something was
// written: the adapter is alive and saying so.
type signalWriter chan struct{}

func (s signalWriter) Write(b []byte) (int, error) {
	select {
	case s <- struct{}{}:
	default:
	}
	return len(b), nil
}

// Launch starts the adapter at path with args and waits until it prints
// its URL. Its stderr goes to logw (and its last lines into errors).
func Launch(ctx context.Context, name, path string, args []string, logw io.Writer) (*Plugin, error) {
	cmd := exec.Command(path, append([]string{"--addr", "127.0.0.1:0"}, args...)...)
	p := &Plugin{Name: name, cmd: cmd, done: make(chan struct{}), log: &tailBuffer{max: 4096}}
	if logw == nil {
		logw = io.Discard
	}
	progress := make(signalWriter, 1)
	cmd.Stderr = io.MultiWriter(logw, p.log, progress)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("target %s: start %s: %w", name, path, err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		first := true
		for sc.Scan() {
			if first {
				urls <- strings.TrimSpace(sc.Text())
				first = false
				continue
			}
			fmt.Fprintln(logw, sc.Text())
		}
		if first {
			close(urls)
		}
	}()
	go func() { p.err = cmd.Wait(); close(p.done) }()
	timer := time.NewTimer(StartTimeout)
	defer timer.Stop()
	for {
		select {
		case <-progress:
			timer.Reset(StartTimeout)
			continue
		case u, ok := <-urls:
			if ok && strings.HasPrefix(u, "http") {
				p.URL = u
				return p, nil
			}
			if !ok { // stdout closed: it is exiting
				select {
				case <-p.done:
					return nil, fmt.Errorf("target %s: %s exited before it was ready (%v)%s", name, path, p.err, p.log.tail())
				case <-time.After(5 * time.Second):
				}
			}
			_ = p.Stop()
			return nil, fmt.Errorf("target %s: %s printed %q, not its URL%s", name, path, u, p.log.tail())
		case <-p.done:
			return nil, fmt.Errorf("target %s: %s exited before it was ready (%v)%s", name, path, p.err, p.log.tail())
		case <-timer.C:
			_ = p.Stop()
			return nil, fmt.Errorf("target %s: %s not ready: no URL and nothing on stderr for %v%s", name, path, StartTimeout, p.log.tail())
		case <-ctx.Done():
			_ = p.Stop()
			return nil, ctx.Err()
		}
	}
}

// CPU is the adapter process's user + system CPU time so far (not its
// children's), false for no adapter or where it cannot be read.
func (p *Plugin) CPU() (time.Duration, bool) {
	if p == nil || p.cmd.Process == nil {
		return 0, false
	}
	return ProcessCPU(p.cmd.Process.Pid)
}

// Stop sends SIGTERM and waits up to 30 s for the adapter to exit, then
// kills it. It returns the adapter's exit error, if any.
func (p *Plugin) Stop() error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return p.err
}

// Exited is nil while the adapter runs (and for no adapter: a nil
// Plugin, a target durabench did not start); once its process has exited
// (it crashed, or was killed), an error saying how, with the last lines
// of its log.
func (p *Plugin) Exited() error {
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
	default:
		return nil
	}
	how := "exited"
	if p.err != nil {
		how = fmt.Sprintf("exited (%v)", p.err)
	}
	return fmt.Errorf("adapter %s%s %s%s", protocol.ExecutablePrefix, p.Name, how, p.log.tail())
}

// Log returns the last lines the adapter wrote to stderr.
func (p *Plugin) Log() string { return p.log.String() }

// PID is the adapter's process id.
func (p *Plugin) PID() int { return p.cmd.Process.Pid }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// tail is the buffer's last lines as an error suffix ("" when empty).
func (t *tailBuffer) tail() string {
	s := strings.TrimSpace(t.String())
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	return "; its log ends:\n  " + strings.Join(lines[max(0, len(lines)-8):], "\n  ")
}
