package testchild_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/durabench/durabench/internal/testchild"
)

const echoEnv = "DURABENCH_TESTCHILD_ECHO"

// TestMain makes the binary, started as a child, echo its input lines in
// upper case, prefixed with the value of echoEnv.
func TestMain(m *testing.M) {
	if prefix := os.Getenv(echoEnv); prefix != "" {
		lines := bufio.NewScanner(os.Stdin)
		for lines.Scan() {
			fmt.Println(prefix + strings.ToUpper(lines.Text()))
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestChildAnswersAndEndsWithItsInput: a child gets the environment it
// is started with, answers each line, and exits once the test ends (its
// input closed), before the test's clean-ups return.
func TestChildAnswersAndEndsWithItsInput(t *testing.T) {
	var c testchild.Child
	t.Run("drive", func(t *testing.T) {
		c = testchild.Start(t, echoEnv+"=>")
		out := bufio.NewScanner(c.Out)
		for _, in := range []string{"one", "two"} {
			if _, err := io.WriteString(c.In, in+"\n"); err != nil {
				t.Fatal(err)
			}
			if !out.Scan() {
				t.Fatalf("no answer to %q: %v", in, out.Err())
			}
			if got, want := out.Text(), ">"+strings.ToUpper(in); got != want {
				t.Fatalf("answer to %q: %q, want %q", in, got, want)
			}
		}
	})
	if c.Cmd.ProcessState == nil || !c.Cmd.ProcessState.Exited() || c.Cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("child after its test: %v, want exited with 0", c.Cmd.ProcessState)
	}
}
