package uploadstatus

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// JSONSize counts the quotes around the text too (internal/jsonenc tests
// the text's own bytes against encoding/json for every kind of character).
func TestJSONSizeIsWhatJSONWrites(t *testing.T) {
	for _, s := range []string{"", "<판매가> \"12,000원\"\n"} {
		if b, _ := json.Marshal(s); JSONSize(s) != len(b) {
			t.Errorf("JSONSize(%q) = %d, json.Marshal writes %d", s, JSONSize(s), len(b))
		}
	}
}

// A reason is cut to MaxReasonJSON bytes of JSON, at a character, marked;
// a short one is kept as it is.
func TestCutReason(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		cut          bool
	}{
		{"short", "D17: price must be a whole number > 0", false},
		{"exactly the bound", strings.Repeat("a", MaxReasonJSON-2), false},
		{"long ASCII", strings.Repeat("a", 5000), true},
		{"long Korean", strings.Repeat("가", 2000), true},
		{"escaped", strings.Repeat("<", 500), true},
	} {
		got := CutReason(tc.reason)
		if JSONSize(got) > MaxReasonJSON+2 {
			t.Errorf("%s: %d bytes of JSON, the bound is %d", tc.name, JSONSize(got)-2, MaxReasonJSON)
		}
		if !utf8.ValidString(got) {
			t.Errorf("%s: cut inside a character", tc.name)
		}
		if cut := got != tc.reason; cut != tc.cut || cut && !strings.HasSuffix(got, "…") {
			t.Errorf("%s: cut %v (%d → %d bytes), want %v, marked", tc.name, cut, len(tc.reason), len(got), tc.cut)
		}
	}
}
