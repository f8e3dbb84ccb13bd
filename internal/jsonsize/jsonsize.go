// Package jsonsize measures text by the bytes encoding/json writes it in
// (where a '<' takes 6 and a byte that is not UTF-8 becomes \ufffd), and
// cuts it to a bound of such bytes: what an answer or a Redis value costs.
package jsonsize

import (
	"strings"
	"unicode/utf8"
)

// Size is how many bytes encoding/json writes s in, quotes excepted.
func Size(s string) int {
	n := 0
	for i, r := range s {
		n += runeLen(r, s[i:])
	}
	return n
}

// Cut shortens s, at a character, so that encoding/json writes it in at most
// max bytes (quotes excepted), marking a cut with "…"; a text that fits is
// returned as it is.
func Cut(s string, max int) string {
	if len(s)*6 <= max {
		return s
	}
	n, cut := 0, -1
	for i, r := range s {
		n += runeLen(r, s[i:])
		if cut < 0 && n > max-len("…") {
			cut = i
		}
		if n > max {
			return s[:cut] + "…"
		}
	}
	return s
}

// runeLen is how many bytes encoding/json writes the character r, at the
// start of rest, in.
func runeLen(r rune, rest string) int {
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
