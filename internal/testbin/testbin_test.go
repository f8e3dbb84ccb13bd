package testbin

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestTail(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 3, ""},
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\n", 5, "a\nb"},
		{"a\nb\n", 0, ""},
	} {
		if got := Tail(c.in, c.n); got != c.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// TestOutputWhileWritten: writers and a reader at once (go test -race
// would name a data race), and every line kept.
func TestOutputWhileWritten(t *testing.T) {
	var o Output
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&o, "writer %d line %d\n", i, j)
				_ = o.Tail(1)
			}
		})
	}
	wg.Wait()
	if got := strings.Count(o.String(), "\n"); got != 400 {
		t.Errorf("%d lines kept, want 400", got)
	}
}
