package jsonenc

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzAppendString: every string, valid UTF-8 or not, is written as
// encoding/json writes it.
func FuzzAppendString(f *testing.F) {
	for _, seed := range []string{"", "plain", "<b>&\"\\", "\x00\x01\x1f\x7f\b\f\n\r\t", "\u2028\u2029", "\xff\xfe\xe2\x80", "상품명 ✓", "\ufffd"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json %s", s, got[1:], want)
		}
	})
}

// FuzzAppendTime: a time is written as encoding/json writes it, and one it
// refuses is refused.
func FuzzAppendTime(f *testing.F) {
	f.Add(int64(1795000000), int64(123456789), 9*3600)
	f.Add(int64(-62135596800), int64(0), 0)      // year 1
	f.Add(int64(-62167219201), int64(0), 0)      // year -1
	f.Add(int64(253402300800), int64(0), 0)      // year 10000
	f.Add(int64(0), int64(999999999), 24*3600)   // a zone 24 hours away
	f.Add(int64(0), int64(1), -23*3600-59*60-59) // the farthest zone it takes
	f.Fuzz(func(t *testing.T, sec, nsec int64, offset int) {
		tm := time.Unix(sec, nsec).In(time.FixedZone("z", offset))
		want, err := json.Marshal(tm)
		got, ok := AppendTime([]byte("x"), tm)
		if ok != (err == nil) {
			t.Fatalf("AppendTime(%v) ok %v; encoding/json: %v", tm, ok, err)
		}
		if !ok {
			if string(got) != "x" {
				t.Fatalf("AppendTime(%v) refused but wrote %q", tm, got)
			}
			return
		}
		if string(got) != "x"+string(want) {
			t.Fatalf("AppendTime(%v) = %s, encoding/json %s", tm, got[1:], want)
		}
	})
}

func TestSizeIsWhatJSONWrites(t *testing.T) {
	for _, s := range []string{"", "plain", "판매가", "<script>&", "\x00\x01\t\n\r\"\\", "\b\f", "\u2028\u2029", "bad \xff\xfe utf8", "\uFFFD", strings.Repeat("<", 1000)} {
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

// FuzzSize: Size counts what encoding/json writes, for any string (jsonsize,
// which this replaced, counted \b and \f as six bytes each).
func FuzzSize(f *testing.F) {
	for _, seed := range []string{"", "\b\f", "<판매가> \"12,000원\"\n", "\xff\u2028"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, _ := json.Marshal(s)
		if got := Size(s); got != len(b)-2 {
			t.Fatalf("Size(%q) = %d, encoding/json writes %d", s, got, len(b)-2)
		}
	})
}
