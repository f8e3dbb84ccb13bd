// The XML scanner's text: characters, text, CDATA, comments and instructions.

package excel

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

func inXMLCharRange(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

// checkChars refuses bytes that are not UTF-8 or not XML characters.
func (s *xmlScanner) checkChars(b []byte) error {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
				return s.fail("the control character %U, which XML does not allow", rune(c))
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return s.fail("bytes that are not UTF-8")
		}
		if !inXMLCharRange(r) {
			return s.fail("the character %U, which XML does not allow", r)
		}
		i += size
	}
	return nil
}

// readText decodes character data up to the next '<', at most about one
// chunk: a longer text comes as several tokens.
func (s *xmlScanner) readText() ([]byte, error) {
	out := s.text[:0]
	defer func() { s.text = out[:0] }()
	for len(out) < xmlChunk {
		if s.err != nil {
			return nil, s.err
		}
		if s.pos >= s.end && !s.fill(1) {
			break
		}
		// The plain run: bytes needing no decoding.
		i := s.pos
		for i < s.end {
			c := s.buf[i]
			if c == '<' || c == '&' || c == '\r' || c == ']' || c >= utf8.RuneSelf || c < 0x20 && c != '\t' && c != '\n' {
				break
			}
			i++
		}
		out = append(out, s.buf[s.pos:i]...)
		s.pos = i
		if i == s.end {
			continue
		}
		c := s.buf[i]
		switch {
		case c == '<':
			return out, nil
		case c == '&':
			j := bytes.IndexByte(s.buf[i:min(s.end, i+16)], ';')
			if j < 0 {
				if s.end-i < 16 && !s.eof {
					if len(out) > 0 {
						return out, nil
					}
					s.fill(16)
					continue
				}
				return nil, s.fail("an entity without its ';'")
			}
			var err error
			if out, err = s.entity(out, s.buf[i+1:i+j]); err != nil {
				return nil, err
			}
			s.pos = i + j + 1
		case c == '\r':
			if i+1 >= s.end && !s.eof {
				if len(out) > 0 {
					return out, nil
				}
				s.fill(2)
				continue
			}
			out = append(out, '\n')
			s.pos = i + 1
			if s.pos < s.end && s.buf[s.pos] == '\n' {
				s.pos++
			}
		case c == ']':
			if i+2 >= s.end && !s.eof {
				if len(out) > 0 {
					return out, nil
				}
				s.fill(3)
				continue
			}
			if bytes.HasPrefix(s.buf[i:s.end], []byte("]]>")) {
				return nil, s.fail("an unescaped ]]> in text")
			}
			out = append(out, c)
			s.pos = i + 1
		case c < 0x20:
			return nil, s.fail("the control character %U, which XML does not allow", rune(c))
		default:
			if !utf8.FullRune(s.buf[i:s.end]) && !s.eof {
				if len(out) > 0 {
					return out, nil
				}
				s.fill(utf8.UTFMax)
				continue
			}
			r, size := utf8.DecodeRune(s.buf[i:s.end])
			if r == utf8.RuneError && size == 1 {
				return nil, s.fail("bytes that are not UTF-8")
			}
			if !inXMLCharRange(r) {
				return nil, s.fail("the character %U, which XML does not allow", r)
			}
			out = append(out, s.buf[i:i+size]...)
			s.pos = i + size
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	return out, nil
}

// readCDATA decodes one CDATA section (at pos) as text; a long one comes in
// one token too, so it is bounded by maxTagBytes.
func (s *xmlScanner) readCDATA() ([]byte, error) {
	s.pos += len("<![CDATA[")
	i := s.pos
	for {
		if k := bytes.Index(s.buf[i:s.end], []byte("]]>")); k >= 0 {
			raw := s.buf[s.pos : i+k]
			s.pos = i + k + 3
			out := s.text[:0]
			for j := 0; j < len(raw); j++ {
				if raw[j] == '\r' {
					out = append(out, '\n')
					if j+1 < len(raw) && raw[j+1] == '\n' {
						j++
					}
					continue
				}
				out = append(out, raw[j])
			}
			s.text = out[:0]
			if err := s.checkChars(out); err != nil {
				return nil, err
			}
			return out, nil
		}
		off := max(s.end-2, s.pos) - s.pos
		have := s.end - s.pos
		if have > maxTagBytes {
			return nil, s.fail("a CDATA section longer than %s", byteSize(maxTagBytes))
		}
		if !s.fill(have+xmlChunk) && (s.err != nil || s.end-s.pos == have) {
			if s.err != nil {
				return nil, s.err
			}
			return nil, s.cutOff()
		}
		i = s.pos + off
	}
}

// skipUntil skips to just after the first close at or after pos+from and
// returns what lay between pos+from and close (valid until the next read).
func (s *xmlScanner) skipUntil(close string, from int) ([]byte, error) {
	i := s.pos + from
	for {
		if k := bytes.Index(s.buf[i:s.end], []byte(close)); k >= 0 {
			body := s.buf[s.pos+from : i+k]
			if err := s.checkChars(body); err != nil {
				return nil, err
			}
			s.pos = i + k + len(close)
			return body, nil
		}
		off := max(s.end-len(close)+1, i) - s.pos
		have := s.end - s.pos
		if have > maxTagBytes {
			return nil, s.fail("a comment or instruction longer than %s", byteSize(maxTagBytes))
		}
		if !s.fill(have + xmlChunk) {
			if s.err != nil {
				return nil, s.err
			}
			if s.end-s.pos == have {
				return nil, s.cutOff()
			}
		}
		i = s.pos + off
	}
}

// checkPI checks a processing instruction (between <? and ?>): a target
// name, and for the XML declaration version 1.0.
func (s *xmlScanner) checkPI(body []byte) error {
	end, prefix, _, ok := xmlName(body, 0)
	if !ok || prefix != nil || (end < len(body) && !isXMLSpace(body[end])) {
		return s.fail("a processing instruction without a valid target name")
	}
	if string(body[:end]) != "xml" {
		return nil
	}
	rest := string(body[end:])
	if i := strings.Index(rest, "version"); i >= 0 {
		v := strings.TrimLeft(rest[i+len("version"):], " ")
		if !strings.HasPrefix(v, `="1.0"`) && !strings.HasPrefix(v, `='1.0'`) {
			return s.fail("an XML declaration of a version other than 1.0")
		}
	}
	return nil
}

func (s *xmlScanner) skipComment() error {
	body, err := s.skipUntil("-->", 4)
	if err != nil {
		return err
	}
	if bytes.Contains(body, []byte("--")) || bytes.HasSuffix(body, []byte("-")) {
		return s.fail(`"--" inside a comment`)
	}
	return nil
}
