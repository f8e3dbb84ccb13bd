package lua

import (
	"strings"
	"testing"
)

// Every script says what it takes and answers, so a reader (or redis-cli
// --eval) needs nothing else.
func TestEveryScriptHasAHeader(t *testing.T) {
	entries, err := files.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("no scripts embedded")
	}
	for _, e := range entries {
		body := Script(e.Name())
		// the header is the comment block at the top, after an optional shebang
		var header strings.Builder
		for i, line := range strings.Split(body, "\n") {
			if i == 0 && strings.HasPrefix(line, "#!lua") {
				continue
			}
			if !strings.HasPrefix(line, "--") {
				break
			}
			header.WriteString(line + "\n")
		}
		for _, want := range []string{e.Name(), "KEYS[1]", "ARGV[1]", "Reply"} {
			if !strings.Contains(header.String(), want) {
				t.Errorf("%s: the header comment does not mention %q", e.Name(), want)
			}
		}
	}
}
