// The XML scanner's tags: names, start and end tags, attributes and entities.

package excel

import (
	"bytes"
	"hash/maphash"
	"strconv"
	"unicode/utf8"
)

func isNameStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

func isNameChar(c byte) bool {
	return isNameStart(c) || c >= '0' && c <= '9' || c == '-' || c == '.' || c == ':'
}

func isXMLSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// xmlName reads an XML name at b[i:] and returns its end, its prefix (nil
// without one) and its local part; ok is false when there is no valid name
// there.
func xmlName(b []byte, i int) (end int, prefix, local []byte, ok bool) {
	if i >= len(b) || !isNameStart(b[i]) {
		return i, nil, nil, false
	}
	start, colon := i, -1
	for i++; i < len(b) && isNameChar(b[i]); i++ {
		if b[i] == ':' {
			if colon >= 0 {
				return i, nil, nil, false
			}
			colon = i
		}
	}
	if colon < 0 {
		return i, nil, b[start:i], true
	}
	if colon == i-1 || !isNameStart(b[colon+1]) {
		return i, nil, nil, false
	}
	return i, b[start:colon], b[colon+1 : i], true
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
	i, prefix, local, ok := xmlName(tag, 0)
	if !ok {
		return nil, s.fail("an element without a valid name")
	}
	name := tag[:i]
	s.attrs = s.attrs[:0]
	s.scratch = s.scratch[:0]
	hasDecl := false
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
		if i, a.prefix, a.local, aok = xmlName(tag, i); !aok {
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
		if a.prefix == nil && s.givenTwice(a.local) {
			return nil, s.fail("attribute %s given twice in <%s>", aname, name)
		}
		v, err := s.attrValue(raw)
		if err != nil {
			return nil, err
		}
		a.value = v
		hasDecl = hasDecl || a.isDecl()
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
	// The element's declarations are in scope for its own name and
	// attributes, so they are taken first.
	s.starts = append(s.starts, len(s.names))
	s.names = append(s.names, name...)
	if hasDecl {
		if err := s.declare(name); err != nil {
			return nil, err
		}
	}
	var space xmlNS
	var uri []byte
	var id uint64
	if prefix == nil && s.defaultNS > 0 {
		// Most names: the default namespace, without a look-up.
		b := &s.ns[s.defaultNS-1]
		space, uri, id = b.space, s.nsBytes[b.off+b.plen:b.off+b.plen+b.ulen], b.id
	} else if space, uri, id, err = s.resolve(prefix, name); err != nil {
		return nil, err
	}
	hasMC := false
	for k := range s.attrs {
		if a := &s.attrs[k]; a.prefix != nil && !a.isDecl() {
			if a.space, a.uri, _, err = s.resolve(a.prefix, name); err != nil {
				return nil, err
			}
			hasMC = hasMC || a.space == nsMC
		}
	}
	s.pendingEnd = self
	// Set field by field: the token is reused, and only what the kind
	// says is read.
	t := &s.tok
	t.kind, t.space, t.local, t.uri, t.nsID, t.attrs, t.hasMC = xmlStart, space, local, uri, id, s.attrs, hasMC
	return &s.tok, nil
}

// givenTwice reports whether s.attrs holds an unprefixed attribute named
// local already. Past linearAttrs attributes the names are indexed by hash
// (a collision falls back to comparing them all, which only a crafted name
// pair could cause), so the check is linear in the tag, not quadratic.
func (s *xmlScanner) givenTwice(local []byte) bool {
	if len(s.attrs) < linearAttrs {
		for _, b := range s.attrs {
			if b.prefix == nil && bytes.Equal(b.local, local) {
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
			if b.prefix == nil {
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
		if b.prefix == nil && bytes.Equal(b.local, local) {
			return true
		}
	}
	return false
}

func (s *xmlScanner) pop() {
	if n := len(s.nsDepths); n > 0 && int(s.nsDepths[n-1].depth) == len(s.starts) {
		s.closeNS()
	}
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
	i, _, local, ok := xmlName(tag, 0)
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
	s.tok.kind, s.tok.local, s.tok.attrs = xmlEnd, local, nil
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
