// Package jsonenc appends JSON values byte for byte as encoding/json writes
// them, without its reflection, for the bodies bulkreg writes on every row
// (a product's, a row's result). Its tests fuzz each against encoding/json.
package jsonenc

import (
	"time"
	"unicode/utf8"
)

// AppendString appends s as a JSON string, as encoding/json writes it by
// default: HTML's <, >
// and & escaped, control characters as \n and the like or \u00XX, an invalid
// UTF-8 byte as \ufffd, U+2028 and U+2029 escaped.
func AppendString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= ' ' && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
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
