package jsonsize

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSizeIsWhatJSONWrites(t *testing.T) {
	for _, s := range []string{"", "plain", "판매가", "<script>&", "\x00\x01\t\n\r\"\\", "\u2028\u2029", "bad \xff\xfe utf8", "\uFFFD", strings.Repeat("<", 1000)} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := Size(s); got != len(b)-2 {
			t.Errorf("Size(%q) = %d, json.Marshal writes %d", s, got, len(b)-2)
		}
	}
}

// Moved from excel's TestCutJSON, where the problems' messages are cut.
func TestCut(t *testing.T) {
	for _, s := range []string{"short", strings.Repeat("a", 1000), strings.Repeat("가", 300), strings.Repeat("<&>", 200), "bad \xff" + strings.Repeat("x", 500), strings.Repeat("a", 100), strings.Repeat("a", 101)} {
		got := Cut(s, 100)
		b, _ := json.Marshal(got)
		if len(b)-2 > 100 || !utf8.ValidString(strings.ToValidUTF8(got, "")) {
			t.Errorf("Cut(%.20q…) = %d bytes of JSON", s, len(b)-2)
		}
		b0, _ := json.Marshal(s)
		if fits := len(b0)-2 <= 100; fits && got != s {
			t.Errorf("Cut cut %q, which fits", s)
		} else if !fits && !strings.HasSuffix(got, "…") {
			t.Errorf("Cut(%.20q…) = %.20q…, not marked as cut", s, got)
		}
	}
}
