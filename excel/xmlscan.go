package excel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// xmlScanner reads one XML document (a part of an .xlsx) strictly and
// streams it as tokens, without building the document and with few
// allocations: names and attribute values are slices of its buffer, valid
// until the next call to next. It is stricter than encoding/xml's Strict mode
// (FuzzXMLScanner holds it to that): a document it accepts, encoding/xml
// accepts with the same elements and text. What it refuses that a workbook
// never holds: a DOCTYPE, names outside ASCII, more than one root element,
// text outside the root, a tag longer than maxTagBytes, nesting deeper than
// maxDepth, an element with more than maxAttrs attributes.
//
// Every entry it reads (an element, an attribute, a chunk of text, a
// comment, an instruction) counts against the upload's xmlBudget, empty or
// not, so the entries of all the parts one upload reads are bounded whatever
// their size: 13 million empty <si/> cost no more than 13 million anything
// else. Each step is linear in its input (the duplicate-attribute check
// hashes names), and the scanner checks its context every 1,024 tokens, so a
// parse whose request ended stops within a few milliseconds.
//
// Text arrives in chunks (a long text is several tokens in a row), already
// decoded (entities, CDATA, line ends), so the caller can stop keeping a long
// cell's text at a bound without the whole text ever being held in memory.
type xmlScanner struct {
	ctx context.Context
	r   io.Reader
	buf []byte
	pos int // next byte to read in buf
	end int // end of the bytes read into buf
	eof bool
	err error // sticky: the first error
	// lines is the number of line feeds in the bytes already dropped from buf.
	lines int

	names  []byte // the open elements' names, one after another
	starts []int  // where each open element's name starts in names
	roots  int
	// pendingEnd: the last start tag closed itself; next returns its end.
	pendingEnd bool

	budget *xmlBudget
	// seen indexes the current element's unprefixed attribute names by hash
	// once it has more than a few, so a tag of 100,000 attributes is checked
	// for duplicates in linear time.
	seen     map[uint64]int
	seenSeed maphash.Seed

	tok     xmlToken
	attrs   []xmlAttr
	text    []byte // decoded text of the current token
	scratch []byte // decoded attribute values with entities
	ticks   int
}

type xmlKind int

const (
	xmlStart xmlKind = iota + 1
	xmlEnd
	xmlText
)

// xmlToken is one token. Its slices are valid until the next call to next.
type xmlToken struct {
	kind  xmlKind
	local []byte    // start, end: the name without its prefix
	attrs []xmlAttr // start
	text  []byte    // text: a chunk of decoded character data
}

type xmlAttr struct {
	local    []byte
	prefixed bool // the name had a prefix ("r:id")
	value    []byte
}

// attr returns the value of the unprefixed attribute named local.
func (t *xmlToken) attr(local string) []byte {
	for i := range t.attrs {
		if !t.attrs[i].prefixed && string(t.attrs[i].local) == local {
			return t.attrs[i].value
		}
	}
	return nil
}

// anyAttr returns the value of the attribute named local, prefixed or not.
func (t *xmlToken) anyAttr(local string) []byte {
	for i := range t.attrs {
		if string(t.attrs[i].local) == local {
			return t.attrs[i].value
		}
	}
	return nil
}

const (
	xmlChunk    = 32 << 10 // bytes read at once, and the most text in one token
	maxTagBytes = 1 << 20  // the longest tag (name and attributes)
	maxDepth    = 256
	// maxAttrs is the most attributes one element may have: a workbook's
	// elements have a few, a root element a dozen namespace declarations.
	maxAttrs = 256
	// linearAttrs: up to this many attributes, duplicates are found by
	// comparing names; past it, through seen.
	linearAttrs = 16
)

// xmlBudget counts the XML entries (elements, attributes, chunks of text,
// comments, instructions) of every part one upload reads, against one limit.
type xmlBudget struct {
	used, limit int
	part        string // the part being read, for the message
}

// take counts n entries; past the limit it answers the *FileError that
// refuses the upload.
func (b *xmlBudget) take(n int) error {
	if b == nil {
		return nil
	}
	b.used += n
	if b.used > b.limit {
		return fileErr(CodeTooLarge, "the file holds more than %s XML entries (elements, attributes and texts, empty or not; part %s), far more than a product list needs, so it was refused; save it again from Excel as .xlsx, or as CSV", group(int64(b.limit)), b.part)
	}
	return nil
}

// newXMLScanner reads one part; budget (nil: unbounded, for tests) counts its entries.
func newXMLScanner(ctx context.Context, r io.Reader, budget *xmlBudget) *xmlScanner {
	return &xmlScanner{ctx: ctx, r: r, buf: make([]byte, xmlChunk), budget: budget}
}

// count takes n entries from the budget, making a refusal sticky.
func (s *xmlScanner) count(n int) error {
	if err := s.budget.take(n); err != nil {
		if s.err == nil {
			s.err = err
		}
		return s.err
	}
	return nil
}

// errXMLEnd is next's answer once the document ended well-formed.
var errXMLEnd = errors.New("excel: end of the XML document")

// fail records the first error, with the line it is on.
func (s *xmlScanner) fail(format string, args ...any) error {
	if s.err == nil {
		s.err = fmt.Errorf("line %d: %s", s.line(), fmt.Sprintf(format, args...))
	}
	return s.err
}

func (s *xmlScanner) line() int {
	return 1 + s.lines + bytes.Count(s.buf[:min(s.pos, s.end)], []byte{'\n'})
}

// cutOff is the error of a document that ends too early.
func (s *xmlScanner) cutOff() error {
	if s.err == nil {
		s.err = fmt.Errorf("the XML is cut off at line %d", s.line())
	}
	return s.err
}

// fill makes at least n bytes available from pos, unless the input ends
// first. It reports whether they are there.
func (s *xmlScanner) fill(n int) bool {
	if s.end-s.pos >= n {
		return true
	}
	if s.err != nil {
		return false
	}
	if s.pos > 0 {
		s.lines += bytes.Count(s.buf[:s.pos], []byte{'\n'})
		s.end = copy(s.buf, s.buf[s.pos:s.end])
		s.pos = 0
	}
	if n > len(s.buf) {
		if n > maxTagBytes+8 {
			s.fail("a tag longer than %s", byteSize(maxTagBytes))
			return false
		}
		nb := make([]byte, min(max(2*len(s.buf), n), maxTagBytes+8))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	for s.end < n && !s.eof {
		m, err := s.r.Read(s.buf[s.end:])
		s.end += m
		if err == io.EOF {
			s.eof = true
		} else if err != nil {
			if s.err == nil {
				s.err = err
			}
			return false
		}
	}
	return s.end-s.pos >= n
}

// next returns the next token, errXMLEnd after a well-formed document, or
// the error that makes the document unreadable.
func (s *xmlScanner) next() (*xmlToken, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.ticks++; s.ticks&1023 == 0 && s.ctx.Err() != nil {
		s.err = s.ctx.Err()
		return nil, s.err
	}
	if s.pendingEnd {
		s.pendingEnd = false
		s.tok = xmlToken{kind: xmlEnd, local: s.tok.local}
		s.pop()
		return &s.tok, nil
	}
	for {
		// Comments, instructions and blanks outside the root loop here
		// without returning a token: check the context here too.
		if s.ticks++; s.ticks&1023 == 0 && s.ctx.Err() != nil {
			s.err = s.ctx.Err()
			return nil, s.err
		}
		if !s.fill(1) {
			if s.err != nil {
				return nil, s.err
			}
			if len(s.starts) > 0 || s.roots == 0 {
				return nil, s.cutOff()
			}
			return nil, errXMLEnd
		}
		if s.buf[s.pos] != '<' {
			text, err := s.readText()
			if err != nil {
				return nil, err
			}
			if err := s.count(1); err != nil {
				return nil, err
			}
			if len(s.starts) == 0 {
				if len(bytes.TrimLeft(text, " \t\r\n")) > 0 {
					return nil, s.fail("text outside the root element")
				}
				continue
			}
			s.tok = xmlToken{kind: xmlText, text: text}
			return &s.tok, nil
		}
		if !s.fill(2) {
			return nil, s.cutOff()
		}
		switch s.buf[s.pos+1] {
		case '/':
			return s.readEnd()
		case '?':
			if err := s.count(1); err != nil {
				return nil, err
			}
			body, err := s.skipUntil("?>", 2)
			if err != nil {
				return nil, err
			}
			if err := s.checkPI(body); err != nil {
				return nil, err
			}
			continue
		case '!':
			if err := s.count(1); err != nil {
				return nil, err
			}
			if !s.fill(4) {
				return nil, s.cutOff()
			}
			if bytes.HasPrefix(s.buf[s.pos:s.end], []byte("<!--")) {
				if err := s.skipComment(); err != nil {
					return nil, err
				}
				continue
			}
			s.fill(9)
			if bytes.HasPrefix(s.buf[s.pos:s.end], []byte("<![CDATA[")) {
				if len(s.starts) == 0 {
					return nil, s.fail("character data outside the root element")
				}
				text, err := s.readCDATA()
				if err != nil {
					return nil, err
				}
				s.tok = xmlToken{kind: xmlText, text: text}
				return &s.tok, nil
			}
			if s.err != nil {
				return nil, s.err
			}
			return nil, s.fail("a DOCTYPE or declaration, which no workbook part has")
		}
		return s.readStart()
	}
}

// tagEnd returns the index in buf of the '>' that ends the tag at pos,
// reading more as needed; quotes are skipped over.
func (s *xmlScanner) tagEnd() (int, error) {
	var quote byte
	i := s.pos + 1
	for {
		for ; i < s.end; i++ {
			c := s.buf[i]
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '"' || c == '\'':
				quote = c
			case c == '>':
				return i, nil
			}
		}
		off := i - s.pos
		if !s.fill(s.end - s.pos + xmlChunk) {
			if s.err != nil {
				return 0, s.err
			}
			if s.end-s.pos == off {
				return 0, s.cutOff()
			}
		}
		i = s.pos + off
	}
}

func isNameStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

func isNameChar(c byte) bool {
	return isNameStart(c) || c >= '0' && c <= '9' || c == '-' || c == '.' || c == ':'
}

func isXMLSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// name reads an XML name at b[i:] and returns its end, its local part and
// whether it had a prefix; ok is false when there is no valid name there.
func xmlName(b []byte, i int) (end int, local []byte, prefixed, ok bool) {
	if i >= len(b) || !isNameStart(b[i]) {
		return i, nil, false, false
	}
	start, colon := i, -1
	for i++; i < len(b) && isNameChar(b[i]); i++ {
		if b[i] == ':' {
			if colon >= 0 {
				return i, nil, false, false
			}
			colon = i
		}
	}
	if colon < 0 {
		return i, b[start:i], false, true
	}
	if colon == i-1 || !isNameStart(b[colon+1]) {
		return i, nil, false, false
	}
	return i, b[colon+1 : i], true, true
}

func (s *xmlScanner) readStart() (*xmlToken, error) {
	gt, err := s.tagEnd()
	if err != nil {
		return nil, err
	}
	tag := s.buf[s.pos+1 : gt] // between < and >
	s.pos = gt + 1
	self := len(tag) > 0 && tag[len(tag)-1] == '/'
	if self {
		tag = tag[:len(tag)-1]
	}
	i, local, _, ok := xmlName(tag, 0)
	if !ok {
		return nil, s.fail("an element without a valid name")
	}
	name := tag[:i]
	s.attrs = s.attrs[:0]
	s.scratch = s.scratch[:0]
	for i < len(tag) {
		if !isXMLSpace(tag[i]) {
			return nil, s.fail("unexpected %q in element <%s>", tag[i], name)
		}
		for i < len(tag) && isXMLSpace(tag[i]) {
			i++
		}
		if i == len(tag) {
			break
		}
		var a xmlAttr
		var aok bool
		if len(s.attrs) == 0 && s.seen != nil {
			clear(s.seen)
		}
		j := i
		if i, a.local, a.prefixed, aok = xmlName(tag, i); !aok {
			return nil, s.fail("an attribute without a valid name in element <%s>", name)
		}
		aname := tag[j:i]
		for i < len(tag) && isXMLSpace(tag[i]) {
			i++
		}
		if i == len(tag) || tag[i] != '=' {
			return nil, s.fail("attribute %s of <%s> has no value", aname, name)
		}
		for i++; i < len(tag) && isXMLSpace(tag[i]); i++ {
		}
		if i == len(tag) || (tag[i] != '"' && tag[i] != '\'') {
			return nil, s.fail("attribute %s of <%s> has an unquoted value", aname, name)
		}
		q := tag[i]
		k := bytes.IndexByte(tag[i+1:], q)
		if k < 0 {
			return nil, s.fail("attribute %s of <%s> has an unterminated value", aname, name)
		}
		raw := tag[i+1 : i+1+k]
		i += k + 2
		if len(s.attrs) >= maxAttrs {
			return nil, s.fail("element <%s> has more than %d attributes", name, maxAttrs)
		}
		if !a.prefixed && s.givenTwice(a.local) {
			return nil, s.fail("attribute %s given twice in <%s>", aname, name)
		}
		v, err := s.attrValue(raw)
		if err != nil {
			return nil, err
		}
		a.value = v
		s.attrs = append(s.attrs, a)
	}
	if err := s.count(1 + len(s.attrs)); err != nil {
		return nil, err
	}
	if len(s.starts) == 0 {
		if s.roots++; s.roots > 1 {
			return nil, s.fail("a second root element <%s>", name)
		}
	}
	if len(s.starts) >= maxDepth {
		return nil, s.fail("elements nested more than %d deep", maxDepth)
	}
	s.starts = append(s.starts, len(s.names))
	s.names = append(s.names, name...)
	s.pendingEnd = self
	s.tok = xmlToken{kind: xmlStart, local: local, attrs: s.attrs}
	return &s.tok, nil
}

// givenTwice reports whether s.attrs holds an unprefixed attribute named
// local already. Past linearAttrs attributes the names are indexed by hash
// (a collision falls back to comparing them all, which only a crafted name
// pair could cause), so the check is linear in the tag, not quadratic.
func (s *xmlScanner) givenTwice(local []byte) bool {
	if len(s.attrs) < linearAttrs {
		for _, b := range s.attrs {
			if !b.prefixed && bytes.Equal(b.local, local) {
				return true
			}
		}
		return false
	}
	if s.seen == nil {
		s.seen = make(map[uint64]int, 2*linearAttrs)
		s.seenSeed = maphash.MakeSeed()
	}
	if len(s.seen) == 0 {
		for i, b := range s.attrs {
			if !b.prefixed {
				s.seen[maphash.Bytes(s.seenSeed, b.local)] = i
			}
		}
	}
	h := maphash.Bytes(s.seenSeed, local)
	i, ok := s.seen[h]
	if !ok {
		s.seen[h] = len(s.attrs)
		return false
	}
	if bytes.Equal(s.attrs[i].local, local) {
		return true
	}
	for _, b := range s.attrs {
		if !b.prefixed && bytes.Equal(b.local, local) {
			return true
		}
	}
	return false
}

func (s *xmlScanner) pop() {
	n := len(s.starts) - 1
	s.names = s.names[:s.starts[n]]
	s.starts = s.starts[:n]
}

func (s *xmlScanner) readEnd() (*xmlToken, error) {
	gt, err := s.tagEnd()
	if err != nil {
		return nil, err
	}
	tag := s.buf[s.pos+2 : gt]
	s.pos = gt + 1
	i, local, _, ok := xmlName(tag, 0)
	if !ok || len(bytes.TrimRight(tag[i:], " \t\r\n")) != 0 {
		return nil, s.fail("an end tag without a valid name")
	}
	if len(s.starts) == 0 {
		return nil, s.fail("end tag </%s> without a start", tag[:i])
	}
	if open := s.names[s.starts[len(s.starts)-1]:]; !bytes.Equal(open, tag[:i]) {
		return nil, s.fail("element <%s> closed by </%s>", open, tag[:i])
	}
	s.pop()
	s.tok = xmlToken{kind: xmlEnd, local: local}
	return &s.tok, nil
}

// attrValue decodes an attribute value: entities, and \r\n or \r to \n.
func (s *xmlScanner) attrValue(raw []byte) ([]byte, error) {
	if bytes.IndexByte(raw, '<') >= 0 {
		return nil, s.fail("a '<' inside an attribute value")
	}
	if bytes.IndexByte(raw, '&') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		if err := s.checkChars(raw); err != nil {
			return nil, err
		}
		return raw, nil
	}
	start := len(s.scratch)
	for i := 0; i < len(raw); {
		switch c := raw[i]; c {
		case '&':
			j := bytes.IndexByte(raw[i:], ';')
			if j < 0 {
				return nil, s.fail("an entity without its ';' in an attribute value")
			}
			var err error
			if s.scratch, err = s.entity(s.scratch, raw[i+1:i+j]); err != nil {
				return nil, err
			}
			i += j + 1
		case '\r':
			s.scratch = append(s.scratch, '\n')
			if i++; i < len(raw) && raw[i] == '\n' {
				i++
			}
		default:
			s.scratch = append(s.scratch, c)
			i++
		}
	}
	v := s.scratch[start:]
	if err := s.checkChars(v); err != nil {
		return nil, err
	}
	return v, nil
}

// entity appends the character an entity (without & and ;) stands for.
func (s *xmlScanner) entity(dst, name []byte) ([]byte, error) {
	switch string(name) {
	case "lt":
		return append(dst, '<'), nil
	case "gt":
		return append(dst, '>'), nil
	case "amp":
		return append(dst, '&'), nil
	case "quot":
		return append(dst, '"'), nil
	case "apos":
		return append(dst, '\''), nil
	}
	if len(name) > 1 && name[0] == '#' {
		digits, base := name[1:], 10
		if digits[0] == 'x' {
			digits, base = digits[1:], 16
		}
		if len(digits) > 0 && len(digits) <= 8 {
			valid := true
			for _, c := range digits {
				if !(c >= '0' && c <= '9' || base == 16 && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')) {
					valid = false
				}
			}
			if n, err := strconv.ParseUint(string(digits), base, 32); valid && err == nil && inXMLCharRange(rune(n)) {
				return utf8.AppendRune(dst, rune(n)), nil
			}
		}
	}
	return nil, s.fail("an unknown or invalid entity &%s;", quoteName(name))
}

func quoteName(b []byte) string {
	if len(b) > 20 {
		b = b[:20]
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}

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
	end, _, prefixed, ok := xmlName(body, 0)
	if !ok || prefixed || (end < len(body) && !isXMLSpace(body[end])) {
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
