package excel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
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
// maxDepth, an element with more than maxAttrs attributes, a prefix not
// declared, more than maxNSInScope namespace declarations in scope.
//
// It resolves every element's namespace, and every prefixed attribute's,
// from the declarations in scope (xmlns.go), so its reader can tell
// SpreadsheetML from anything else whatever the prefixes (mceFilter).
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
	// ns holds the namespace declarations in scope, innermost last, their
	// prefixes and names in nsBytes; nsDepths says where the declarations
	// of each open element that made some begin, so its end drops them.
	ns       []nsBinding
	nsBytes  []byte
	nsDepths []nsMark
	// defaultNS is 1 + the index in ns of the default namespace's
	// declaration in scope, 0 when there is none.
	defaultNS int
	roots     int
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
	space xmlNS     // start: the element's namespace, from the declarations in scope
	local []byte    // start, end: the element's name without its prefix
	uri   []byte    // start: the namespace's name; empty for no namespace
	nsID  uint64    // start: nsID(uri)
	hasMC bool      // start: an attribute is in the Markup Compatibility namespace
	attrs []xmlAttr // start
	text  []byte    // text: a chunk of decoded character data
}

type xmlAttr struct {
	local  []byte
	prefix []byte // nil for an unprefixed name ("r" of "r:id")
	// space and uri: the namespace of a prefixed name (an unprefixed
	// attribute is in no namespace, whatever the default). A namespace
	// declaration ("xmlns", "xmlns:r") is left as it is: nsNone.
	space xmlNS
	uri   []byte
	value []byte
}

// isDecl reports a namespace declaration: xmlns="..." or xmlns:p="...".
func (a *xmlAttr) isDecl() bool {
	if a.prefix == nil {
		return string(a.local) == "xmlns"
	}
	return string(a.prefix) == "xmlns"
}

// attr returns the value of the unprefixed attribute named local.
func (t *xmlToken) attr(local string) []byte {
	for i := range t.attrs {
		if t.attrs[i].prefix == nil && string(t.attrs[i].local) == local {
			return t.attrs[i].value
		}
	}
	return nil
}

// attrNS returns the value of the attribute named local in the namespace
// space, under whatever prefix.
func (t *xmlToken) attrNS(space xmlNS, local string) []byte {
	for i := range t.attrs {
		if a := &t.attrs[i]; a.prefix != nil && a.space == space && string(a.local) == local {
			return a.value
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
		return fileErr(CodeTooLarge, "the file holds more than %s XML entries (elements, attributes and texts, empty or not; part %s), far more than a product list needs, so it was refused; save it again from Excel as .xlsx, or as CSV", group(int64(b.limit)), b.part).withParams("kind", "content")
	}
	return nil
}

// newXMLScanner reads one part; budget (nil: unbounded, for tests) counts its entries.
func newXMLScanner(ctx context.Context, r io.Reader, budget *xmlBudget) *xmlScanner {
	return newXMLScannerIn(ctx, r, budget, nil)
}

// newXMLScannerIn is newXMLScanner reading into buf (nil: a new one), the
// buffer of a scanner done with its part: a workbook of 9,990 parts
// would allocate 320 MB of buffers otherwise.
func newXMLScannerIn(ctx context.Context, r io.Reader, budget *xmlBudget, buf []byte) *xmlScanner {
	if len(buf) < xmlChunk {
		buf = make([]byte, xmlChunk)
	}
	return &xmlScanner{ctx: ctx, r: r, buf: buf, budget: budget}
}

// newXMLScannerAfter is newXMLScanner reading with the buffers of last, a
// scanner done with its part (nil: new ones): a workbook of 9,990 parts
// would allocate 320 MB of buffers otherwise.
func newXMLScannerAfter(ctx context.Context, r io.Reader, budget *xmlBudget, last *xmlScanner) *xmlScanner {
	if last == nil {
		return newXMLScannerIn(ctx, r, budget, nil)
	}
	s := newXMLScannerIn(ctx, r, budget, last.buf)
	s.names, s.starts, s.attrs, s.text, s.scratch = last.names[:0], last.starts[:0], last.attrs[:0], last.text[:0], last.scratch[:0]
	s.ns, s.nsBytes, s.nsDepths = last.ns[:0], last.nsBytes[:0], last.nsDepths[:0]
	return s
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

// maxErrorText bounds what an error says of the XML: names and values it
// quotes may be up to a tag long, and the error reaches the seller's pages.
const maxErrorText = 300

// fail records the first error, with the line it is on.
func (s *xmlScanner) fail(format string, args ...any) error {
	if s.err == nil {
		msg := fmt.Sprintf(format, args...)
		if len(msg) > maxErrorText {
			cut := maxErrorText
			for cut > 0 && !utf8.RuneStart(msg[cut]) {
				cut--
			}
			msg = msg[:cut] + "…"
		}
		s.err = fmt.Errorf("line %d: %s", s.line(), msg)
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
		s.tok.kind, s.tok.attrs = xmlEnd, nil
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
			s.tok.kind, s.tok.text = xmlText, text
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
				s.tok.kind, s.tok.text = xmlText, text
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
