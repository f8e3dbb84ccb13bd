// Package testbin is for tests that run bulkreg's commands as processes:
// it builds them once per test and keeps a process's output safe to read
// while the process still writes it.
package testbin

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// Build compiles the named commands (directories under cmd/: "producer",
// "consumer", "registry-sandbox") into a temporary folder of t and returns
// it: the binaries are the folder joined with each name. It builds by import
// path, so it works from any package of the module, without cgo as the
// images do.
func Build(t testing.TB, commands ...string) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	for _, c := range commands {
		args = append(args, "github.com/bulkreg/bulkreg/cmd/"+c)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(commands, " "), err, out)
	}
	return dir
}

// Output is a process's stdout and stderr (set both to it), read while the
// process writes: a test reads it to wait on a line or to show it on
// failure.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Tail is the last n lines written so far, for a failure message.
func (o *Output) Tail(n int) string { return Tail(o.String(), n) }

// Tail is the last n lines of s (a final newline ends the last line, it
// does not start an empty one).
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
