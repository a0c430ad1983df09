package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's CLI block from the usage text")

// The README's CLI block sits between these markers (each on its own line)
// and is the usage text verbatim, in a fenced code block.
const (
	cliBegin = "<!-- cli:begin"
	cliEnd   = "<!-- cli:end -->"
)

var readmePath = filepath.Join("..", "..", "README.md")

// TestCLIDoc: the README's CLI block is the usage text (durabench help).
// go test ./cmd/durabench -run TestCLIDoc -update rewrites it.
func TestCLIDoc(t *testing.T) {
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, cliBegin)
	j := strings.Index(readme, cliEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: no %q … %q block", readmePath, cliBegin, cliEnd)
	}
	start := i + strings.Index(readme[i:], "\n") + 1
	got := readme[start:j]
	want := "```\n" + usage + "```\n"
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(readmePath, []byte(readme[:start]+want+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: CLI block rewritten from the usage text", readmePath)
		return
	}
	t.Errorf("%s: the CLI block differs from the usage text in main.go (run go test ./cmd/durabench -run TestCLIDoc -update):\n%s",
		readmePath, lineDiff(strings.Split(got, "\n"), strings.Split(want, "\n")))
}

// lineDiff lists, line by line, where the README (-) and the usage text (+)
// disagree.
func lineDiff(got, want []string) string {
	var b strings.Builder
	for k := 0; k < len(got) || k < len(want); k++ {
		var g, w string
		if k < len(got) {
			g = got[k]
		}
		if k < len(want) {
			w = want[k]
		}
		if g != w {
			fmt.Fprintf(&b, "line %d:\n  README: %q\n  usage:  %q\n", k+1, g, w)
		}
	}
	return b.String()
}

// TestUsageMatchesCommands: the usage text names exactly the commands run
// dispatches, `help` prints it, and every flag it mentions is a real flag of
// the command it is given to.
func TestUsageMatchesCommands(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"help"}, &out, &errb); code != exitOK || out.String() != usage {
		t.Fatalf("durabench help: exit %d, output differs from the usage text:\n%s", code, out.String())
	}

	// The dispatcher's commands, from its unknown-command message.
	errb.Reset()
	run(context.Background(), []string{"no-such-command"}, &out, &errb)
	m := regexp.MustCompile(`\(([a-z, ]+)\)`).FindStringSubmatch(errb.String())
	if m == nil {
		t.Fatalf("unknown command: no command list in %q", errb.String())
	}
	dispatched := strings.Split(m[1], ", ")
	sort.Strings(dispatched)

	lineCmd := regexp.MustCompile(`^\s*durabench ([a-z]+)\b`)
	flagRe := regexp.MustCompile(`(?:^|[\s\[|(])--?([a-z][a-z0-9-]*)`)
	before := regexp.MustCompile(`\b([a-z]+) $`)
	inUsage := map[string]bool{}
	flagsOf := map[string]map[string]bool{}
	known := func(cmd string) map[string]bool {
		if f, ok := flagsOf[cmd]; ok {
			return f
		}
		args := []string{cmd, "-h"}
		if cmd == "history" {
			args = []string{"history", "add", "-h"}
		}
		var help bytes.Buffer
		if code := run(context.Background(), args, &help, &help); code != exitOK {
			t.Fatalf("durabench %s: exit %d: %s", strings.Join(args, " "), code, help.String())
		}
		f := map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^  -(\S+)`).FindAllStringSubmatch(help.String(), -1) {
			f[m[1]] = true
		}
		flagsOf[cmd] = f
		return f
	}
	cmd := ""
	for _, line := range strings.Split(usage, "\n") {
		switch m := lineCmd.FindStringSubmatch(line); {
		case strings.TrimSpace(line) == "":
			cmd = ""
		case m != nil:
			cmd = m[1]
			inUsage[cmd] = true
		case !strings.HasPrefix(line, " "):
			cmd = "" // prose, not a command's continuation line
		}
		for _, loc := range flagRe.FindAllStringSubmatchIndex(line, -1) {
			name := line[loc[2]:loc[3]]
			on := cmd
			if b := before.FindStringSubmatch(line[:loc[2]-strings.Count(line[loc[0]:loc[2]], "-")]); b != nil && inList(dispatched, b[1]) {
				on = b[1] // "sweep --workers external", "sim --gate"
			}
			if name == "h" || on == "" {
				continue
			}
			if !known(on)[name] {
				t.Errorf("usage: %q: %s has no flag -%s", strings.TrimSpace(line), on, name)
			}
		}
	}
	var listed []string
	for c := range inUsage {
		listed = append(listed, c)
	}
	sort.Strings(listed)
	if strings.Join(listed, ",") != strings.Join(dispatched, ",") {
		t.Errorf("usage names the commands %v, run dispatches %v", listed, dispatched)
	}
}

func inList(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
