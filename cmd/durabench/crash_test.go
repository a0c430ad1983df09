package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durabench/durabench/internal/failpoint"

	"github.com/durabench/durabench/internal/sweep"
	"github.com/durabench/durabench/results"
)

// TestSIGKILLAndResume kills the durabench driver with SIGKILL mid-sweep —
// during a cell (at a random moment), half-way through a journal append,
// half-way through writing results.json, while it makes a cell's
// embedded NATS store (its directory made, not yet locked) — then resumes
// it: every cell that finished before the kill is kept byte for byte, the
// torn journal line is dropped, the final cells are an uninterrupted
// sweep's, no temporary file is left, and the killed sweep's embedded
// NATS store is removed by the next start.
func TestSIGKILLAndResume(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp") // TMPDIR of every durabench below: its embedded NATS stores
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"sweep", "--world", "nats", "--branches", "4", "--switches", "none",
		"--reps", "4", "--warmup", "0", "--option", "body=20ms", "--progress", "lines"}
	const cells = 5

	ref := filepath.Join(dir, "ref")
	if r := runIn(t, dir, tmp, append(args, "--out", ref)...); r.code != 0 {
		t.Fatalf("uninterrupted sweep: exit %d\n%s", r.code, r.stderr)
	}
	want := cellKeys(t, ref)
	if len(want) != cells {
		t.Fatalf("uninterrupted sweep: %d cells", len(want))
	}

	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("random kill points from seed %d", seed)
	for _, c := range []struct {
		name      string
		failpoint string // "": killed at a random moment in a cell
		torn      bool   // the journal ends in a torn line
	}{
		{"during a cell", "", false},
		{"appending to the journal", fmt.Sprintf("journal-append:%d", 2+rng.IntN(cells-2)), true},
		{"writing results.json", "results-write", false},
		{"making a NATS store", fmt.Sprintf("nats-store-birth:%d", 2+rng.IntN(cells-2)), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			p := start(t, dir, tmp, c.failpoint, append(args, "--out", out)...)
			if c.failpoint == "" {
				k := 1 + rng.IntN(cells-2)
				p.waitOut(t, fmt.Sprintf("[%d/%d]", k, cells))
				time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
				// During a cell: its world's store exists (between two
				// cells, on a loaded machine, none may).
				for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
					if stores, _ := filepath.Glob(filepath.Join(tmp, "durabench-nats-*")); len(stores) > 0 {
						break
					}
				}
			} else {
				p.waitErr(t, "durabench: failpoint "+c.failpoint)
			}
			p.kill(t)
			if stores, _ := filepath.Glob(filepath.Join(tmp, "durabench-nats-*")); c.failpoint == "" && len(stores) == 0 {
				t.Error("the killed sweep left no store behind: the test does not test the cleanup")
			}
			if strings.HasPrefix(c.failpoint, "nats-store-birth") {
				// Killed before its store was locked: what is left must
				// not pass for a store, and is removed once a minute old
				// (made so here: the next start is this instant).
				births, _ := filepath.Glob(filepath.Join(tmp, ".durabench-nats-birth-*"))
				stores, _ := filepath.Glob(filepath.Join(tmp, "durabench-nats-*"))
				if len(births) != 1 || len(stores) != 0 {
					t.Fatalf("killed making a store: birth directories %q and stores %q, want one birth directory", births, stores)
				}
				old := time.Now().Add(-2 * time.Minute)
				if err := os.Chtimes(births[0], old, old); err != nil {
					t.Fatal(err)
				}
			}

			journal, err := os.ReadFile(filepath.Join(out, results.JournalName))
			if err != nil {
				t.Fatal(err)
			}
			lines := bytes.SplitAfter(journal, []byte("\n"))
			complete := [][]byte{}
			for _, l := range lines {
				if bytes.HasSuffix(l, []byte("\n")) {
					complete = append(complete, bytes.TrimSpace(l))
				}
			}
			if torn := len(lines[len(lines)-1]) > 0; torn != c.torn {
				t.Errorf("journal ends in a torn line: %v, want %v", torn, c.torn)
			}
			if c.failpoint == "results-write" && len(complete) != cells {
				t.Errorf("killed writing results.json with %d cells in the journal, want %d", len(complete), cells)
			}

			r := runIn(t, dir, tmp, append(args, "--resume", out)...)
			if r.code != 0 {
				t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			if got := strings.Count(r.stdout, "(resumed)"); got != len(complete) {
				t.Errorf("resume reused %d cells, the journal held %d whole ones", got, len(complete))
			}
			f, err := results.Read(filepath.Join(out, "results.json"))
			if err != nil {
				t.Fatal(err)
			}
			if got := cellKeys(t, out); !slices.Equal(got, want) {
				t.Errorf("cells %q, an uninterrupted sweep's %q", got, want)
			}
			for i, line := range complete {
				var c results.Cell
				if err := json.Unmarshal(line, &c); err != nil {
					t.Fatal(err)
				}
				idx := slices.IndexFunc(f.Cells, func(x results.Cell) bool { return sweep.KeyOf(x) == sweep.KeyOf(c) })
				got, _ := json.Marshal(f.Cells[idx])
				if !bytes.Equal(got, line) {
					t.Errorf("cell %d changed on resume:\n%s\n%s", i, line, got)
				}
			}
			if tmps, _ := filepath.Glob(filepath.Join(out, ".*tmp*")); len(tmps) > 0 {
				t.Errorf("temporary files left: %q", tmps)
			}
			if stores, _ := filepath.Glob(filepath.Join(tmp, "*durabench-nats-*")); len(stores) > 0 {
				t.Errorf("embedded NATS stores left in the temp dir: %q", stores)
			}
		})
	}
}

func cellKeys(t *testing.T, out string) []string {
	t.Helper()
	f, err := results.Read(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range f.Cells {
		keys = append(keys, sweep.KeyOf(c))
	}
	slices.Sort(keys)
	return keys
}

// proc is a durabench process the test kills.
type proc struct {
	cmd    *exec.Cmd
	out    chan string
	stderr *syncBuf
	done   chan struct{}
}

type syncBuf struct {
	mu   sync.Mutex
	data []byte
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.data = append(b.data, p...)
	return len(p), nil
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.data)
}

func command(dir, tmp, point string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	if point != "" {
		cmd.Env = append(cmd.Env, failpoint.Env+"="+point)
	}
	return cmd
}

// runIn runs durabench to its end in dir with TMPDIR tmp.
func runIn(t *testing.T, dir, tmp string, args ...string) result {
	t.Helper()
	cmd := command(dir, tmp, "", args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

func start(t *testing.T, dir, tmp, failpoint string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: command(dir, tmp, failpoint, args...), out: make(chan string, 100), stderr: &syncBuf{},
		done: make(chan struct{})}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.out <- sc.Text()
		}
		close(p.out)
	}()
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	return p
}

// waitOut waits for a stdout line starting with prefix.
func (p *proc) waitOut(t *testing.T, prefix string) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-p.out:
			if !ok {
				t.Fatalf("exited before %q; stderr %q", prefix, p.stderr.String())
			}
			if strings.HasPrefix(l, prefix) {
				return
			}
		case <-timeout:
			t.Fatalf("no %q within 60 s; stderr %q", prefix, p.stderr.String())
		}
	}
}

// waitErr waits until stderr holds s.
func (p *proc) waitErr(t *testing.T, s string) {
	t.Helper()
	go func() {
		for range p.out { // keep stdout drained
		}
	}()
	for end := time.Now().Add(60 * time.Second); !strings.Contains(p.stderr.String(), s); time.Sleep(10 * time.Millisecond) {
		select {
		case <-p.done:
			t.Fatalf("exited before %q; stderr %q", s, p.stderr.String())
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("no %q within 60 s; stderr %q", s, p.stderr.String())
		}
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
}
