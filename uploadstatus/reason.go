package uploadstatus

import (
	"strings"
	"unicode/utf8"
)

// MaxReasonJSON bounds a row's reason as Redis keeps it and the status
// answers it: JSON bytes, where a '<' takes 6. A reason lists a row's
// problems, and a crafted file could give a row thousands of them (issue
// 27: one key of 655 MB), so a longer reason is cut, marked with "…": 500
// rows keep at most about 0.5 MiB of reasons.
const MaxReasonJSON = 1024

// CutReason shortens reason, at a character, to at most MaxReasonJSON bytes
// of JSON.
func CutReason(reason string) string {
	if len(reason)*6 <= MaxReasonJSON {
		return reason
	}
	n, cut := 0, -1
	for i, r := range reason {
		n += jsonLen(r, reason[i:])
		if cut < 0 && n > MaxReasonJSON-len("…") {
			cut = i
		}
		if n > MaxReasonJSON {
			return reason[:cut] + "…"
		}
	}
	return reason
}

// JSONSize is how many bytes encoding/json writes s in, quotes included:
// what a text costs where it is kept as JSON.
func JSONSize(s string) int {
	n := 2
	for i, r := range s {
		n += jsonLen(r, s[i:])
	}
	return n
}

// jsonLen is how many bytes encoding/json writes the character r, at the
// start of rest, in.
func jsonLen(r rune, rest string) int {
	switch {
	case r == utf8.RuneError && !strings.HasPrefix(rest, "\uFFFD"):
		return 6 // a byte that is not UTF-8 becomes \ufffd
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
		return 6
	}
	return utf8.RuneLen(r)
}
