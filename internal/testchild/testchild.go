// Package testchild starts the running test binary again, as a child
// process a test or a benchmark drives over its standard input and output:
// the package's TestMain recognises the child by a variable of its
// environment and serves instead of running the tests. A benchmark whose
// sides must not share a process (a heap, a scheduler, a server) runs each
// side so.
package testchild

import (
	"io"
	"os"
	"os/exec"
	"testing"
)

// Child is a running child: its input, its output, and its process.
type Child struct {
	In  io.WriteCloser
	Out io.Reader
	Cmd *exec.Cmd
}

// Start starts the test binary with env ("NAME=value") added to its
// environment and its standard error the caller's. When tb ends, the
// child's input is closed (a child returns at the end of its input) and
// tb waits for it to exit. Should the child not recognise itself, it runs
// no test.
func Start(tb testing.TB, env ...string) Child {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Wait()
	})
	return Child{In: in, Out: out, Cmd: cmd}
}
