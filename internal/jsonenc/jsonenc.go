// Package jsonenc writes and measures JSON text byte for byte as
// encoding/json writes it, without its reflection: the bodies bulkreg writes
// on every row (a product's, a row's result), and the bound on a message or
// a reason in an answer or a Redis value (where a '<' takes 6 bytes and a
// byte that is not UTF-8 becomes \ufffd). One set of escaping rules serves
// both; the tests hold each function to encoding/json.
package jsonenc

import (
	"time"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// asciiAsIs reports whether encoding/json writes the ASCII byte b as itself
// (with HTML escaping, its default).
func asciiAsIs(b byte) bool {
	return b >= ' ' && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}

// asciiShort is the letter of the two-byte escape encoding/json writes the
// ASCII byte b in (\" \\ \b \f \n \r \t), or 0: written as \u00XX.
func asciiShort(b byte) byte {
	switch b {
	case '"', '\\':
		return b
	case '\b':
		return 'b'
	case '\f':
		return 'f'
	case '\n':
		return 'n'
	case '\r':
		return 'r'
	case '\t':
		return 't'
	}
	return 0
}

// next reads the character at the start of s (s not empty): its size in s
// and how many bytes encoding/json writes it in.
func next(s string) (size, written int) {
	if b := s[0]; b < utf8.RuneSelf {
		switch {
		case asciiAsIs(b):
			return 1, 1
		case asciiShort(b) != 0:
			return 1, 2
		}
		return 1, 6
	}
	c, size := utf8.DecodeRuneInString(s)
	if c == utf8.RuneError && size == 1 || c == '\u2028' || c == '\u2029' {
		return size, 6 // \ufffd, \u2028, \u2029
	}
	return size, size
}

// AppendString appends s as a JSON string, as encoding/json writes it by
// default: HTML's <, > and & escaped, control characters as \n and the like
// or \u00XX, an invalid UTF-8 byte as \ufffd, U+2028 and U+2029 escaped.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf && asciiAsIs(b) { // most text: no call
			i++
			continue
		}
		size, written := next(s[i:])
		if written == size {
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch b := s[i]; {
		case b >= utf8.RuneSelf && size == 1:
			dst = append(dst, `\ufffd`...)
		case b >= utf8.RuneSelf: // U+2028, U+2029: E2 80 A8, E2 80 A9
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[s[i+2]&0xF])
		case asciiShort(b) != 0:
			dst = append(dst, '\\', asciiShort(b))
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Size is how many bytes encoding/json writes s in, quotes excepted.
func Size(s string) int {
	n := 0
	for i := 0; i < len(s); {
		size, written := next(s[i:])
		n += written
		i += size
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
	for i := 0; i < len(s); {
		size, written := next(s[i:])
		n += written
		if cut < 0 && n > max-len("…") {
			cut = i
		}
		if n > max {
			return s[:cut] + "…"
		}
		i += size
	}
	return s
}

// AppendTime appends t as encoding/json writes a time.Time (RFC 3339 with
// nanoseconds, quoted). ok is false, and dst unchanged, for what
// encoding/json refuses: a year outside 0 – 9999, a zone 24 hours or more
// away from UTC.
func AppendTime(dst []byte, t time.Time) (_ []byte, ok bool) {
	_, offset := t.Zone()
	if y := t.Year(); y < 0 || y > 9999 || offset <= -24*3600 || offset >= 24*3600 {
		return dst, false
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"'), true
}
