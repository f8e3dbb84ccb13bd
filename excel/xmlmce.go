// What Excel reads of a part: SpreadsheetML's elements, with Markup
// Compatibility (ECMA-376 Part 3) applied.

package excel

import (
	"bytes"
	"strconv"
)

// mceFilter hands a part's tokens to its reader as Excel reads the part:
// only elements of the part's own namespace (SpreadsheetML's main one, or
// the package relationships' for a .rels part) are data, whatever their
// prefix; Markup Compatibility is applied; every other element is not data
// and its whole subtree is skipped (it is still scanned to its end, so the
// part is still checked). In detail:
//
//   - mc:AlternateContent stands for one of its branches: the first
//     mc:Choice whose Requires names only namespaces this reader
//     understands (SpreadsheetML, relationships, Markup Compatibility),
//     else mc:Fallback, else nothing. The branch's content is read as if it
//     stood in the AlternateContent's place; the other branches are not.
//     Inside a container (sheetData, a row, a cell, a cell's text, a shared
//     string, the workbook's sheets: isContainer), where Excel never writes
//     AlternateContent, a Choice that requires a namespace this reader does
//     not understand refuses the part as damaged: Excel, which understands
//     x14 and more, would show that Choice where this reader (and
//     LibreOffice) would read the Fallback, so the rows Excel shows and the
//     rows registered could differ. Elsewhere (the workbook's x15ac:absPath,
//     extensions) a Choice not understood is passed over, as Markup
//     Compatibility says: what stands there is no row.
//   - An element of a namespace mc:Ignorable lists (in scope) is ignored
//     with its subtree. mc:ProcessContent, which asks a consumer to read
//     such an element's content in its place, is not honoured: LibreOffice
//     does not honour it either, and what it wraps being skipped can only
//     leave out a row, which the check shows the seller, never add one.
//     Ignorable attributes (x14ac:dyDescent on every row Excel writes) are
//     never read anyway: the reader reads only unprefixed attributes and
//     r:id.
//   - An element of a namespace neither the part's, nor ignorable, nor one
//     of Office's that stands where the schema allows only SpreadsheetML (in
//     sheetData, a row, a cell, a cell's text, the shared strings, the
//     workbook's sheets, a relationships part), is the damage Markup
//     Compatibility tells a consumer to refuse, and Excel reports such a
//     file as damaged: the part is refused, naming the element. Elsewhere
//     (at a part's top level, inside extensions, in parts of the sheet
//     this reader does not read) such an element is skipped as not data:
//     it cannot stand for a row there.
//   - The root element must be in the part's namespace: a worksheet, the
//     shared strings or the workbook in no namespace or another one is not
//     SpreadsheetML, and Excel does not open it.
//
// mc:MustUnderstand is not acted on: it can only make Excel refuse a file,
// and whatever it names is skipped here as not data.
type mceFilter struct {
	s     *xmlScanner
	data  xmlNS
	visit func(*xmlToken) error
	skip  int // depth inside a skipped subtree, 0 outside one
	open  []mceFrame
	// ignorable holds the namespaces mc:Ignorable lists in scope,
	// innermost last.
	ignorable []uint64 // nsID
}

type frameKind uint8

const (
	frameData    frameKind = iota // an element handed to the reader, with mc:Ignorable
	frameThrough                  // read through: AlternateContent's chosen branch
	frameAlt                      // mc:AlternateContent
)

// mceFrame is an open element that is not plain data: a frame of
// AlternateContent, a branch read through, or an
// element of the part's namespace with Markup Compatibility attributes.
type mceFrame struct {
	depth  int32 // the element's depth, 1 for the root
	kind   frameKind
	chosen bool // frameAlt: a branch was taken
	// inData: frameAlt stands inside a container, where every Choice must
	// be understood.
	inData bool
	// the length of ignorable before the element's attributes (at most
	// maxMCENames).
	ignorable uint8
}

// maxMCENames bounds the namespaces mc:Ignorable lists in scope: Excel
// lists two to five.
const maxMCENames = 64

// containers are the elements of SpreadsheetML (and of relationships parts)
// that hold only elements of their own namespace, where this reader reads
// data: a foreign element there is damage, not something to skip.
func isContainer(local []byte) bool {
	switch string(local) {
	case "sheetData", "row", "c", "v", "f", "is", "r", "t", "rPh",
		"sst", "si", "sheets", "sheet", "mergeCells", "numFmts", "cellXfs",
		"Relationships", "Relationship":
		return true
	}
	return false
}

// understood reports the namespaces this reader understands, for mc:Choice's
// Requires: those whose content it reads.
func understood(space xmlNS) bool {
	return space == nsMain || space == nsRel || space == nsPkgRel || space == nsMC || space == nsXML
}

// plain reports a token the reader takes as it is, the filter's state
// unchanged, in the common case: no frame open, not skipping, and not the
// start of an element of another namespace or with Markup Compatibility
// attributes. Small enough to be inlined where walk calls it; token decides
// every other token.
func (f *mceFilter) plain(t *xmlToken) bool {
	return f.skip == 0 && len(f.open) == 0 && (t.kind != xmlStart || t.space == f.data && !t.hasMC)
}

// token takes the next token of the part. Elements of the part's
// namespace without Markup Compatibility attributes, outside
// AlternateContent, go straight to the reader (nearly every element of a
// part), without a frame: open holds frames only for the others, by depth.
func (f *mceFilter) token(t *xmlToken) error {
	switch t.kind {
	case xmlText:
		if f.skip > 0 {
			return nil
		}
		if n := len(f.open); n > 0 && f.open[n-1].kind == frameAlt && int(f.open[n-1].depth) == len(f.s.starts) {
			return nil // between AlternateContent's branches: not content
		}
		return f.visit(t)
	case xmlEnd:
		if f.skip > 0 {
			f.skip--
			return nil
		}
		// The scanner has dropped the element: its depth was one more.
		if n := len(f.open); n > 0 && int(f.open[n-1].depth) == len(f.s.starts)+1 {
			fr := f.open[n-1]
			f.open = f.open[:n-1]
			f.ignorable = f.ignorable[:fr.ignorable]
			if fr.kind != frameData {
				return nil
			}
		}
		return f.visit(t)
	}
	if f.skip > 0 {
		f.skip++
		return nil
	}
	depth := len(f.s.starts)
	var parent *mceFrame
	if n := len(f.open); n > 0 && int(f.open[n-1].depth) == depth-1 {
		parent = &f.open[n-1]
	}
	if t.space == f.data && !t.hasMC && (parent == nil || parent.kind != frameAlt) {
		return f.visit(t)
	}
	return f.start(t, depth, parent)
}

// start takes every other start tag: parent is the frame of the element's
// parent when it has one.
func (f *mceFilter) start(t *xmlToken, depth int, parent *mceFrame) error {
	fr := mceFrame{depth: int32(depth), ignorable: uint8(len(f.ignorable))}
	// mc:Ignorable holds for the element itself and what it holds.
	if err := f.scope(t); err != nil {
		return err
	}
	switch {
	case parent != nil && parent.kind == frameAlt:
		// Only its branches, and only one of them.
		switch {
		case t.space == nsMC && string(t.local) == "Choice" && parent.inData && !f.requiresUnderstood(t.attr("Requires")):
			return f.s.fail("an mc:Choice requires %q (a namespace this reader does not understand) among the rows, cells or texts, where Excel writes none: Excel could show other rows than bulkreg reads", shorten(string(bytes.ToValidUTF8(t.attr("Requires"), []byte("?")))))
		case t.space != nsMC || parent.chosen:
		case string(t.local) == "Choice" && f.requiresUnderstood(t.attr("Requires")),
			string(t.local) == "Fallback":
			parent.chosen = true
			fr.kind = frameThrough
			f.open = append(f.open, fr)
			return nil
		}
	case t.space == f.data:
		// An element with mc:Ignorable: its frame keeps its scope, but for
		// the root's (Excel's parts all have one), which holds to the end.
		if depth > 1 {
			fr.kind = frameData
			f.open = append(f.open, fr)
		}
		return f.visit(t)
	case depth == 1:
		return f.s.fail("the root element <%s> is in %s, not in SpreadsheetML's, so this is not a part Excel reads", f.qname(), describeNS(t))
	case t.space == nsMC && string(t.local) == "AlternateContent":
		fr.kind, fr.inData = frameAlt, f.inContainer(depth)
		f.open = append(f.open, fr)
		return nil
	case !understood(t.space) && f.isIgnorable(t.nsID):
		// Skipped, mc:ProcessContent or not (see mceFilter).
	case t.space != nsOffice && f.inContainer(depth):
		return f.s.fail("the element <%s> of %s stands inside a SpreadsheetML element that holds only SpreadsheetML (Excel reports such a file as damaged)", f.qname(), describeNS(t))
	}
	f.ignorable = f.ignorable[:fr.ignorable]
	f.skip = 1
	return nil
}

// inContainer reports whether the nearest element above depth the reader
// was handed (a branch of AlternateContent stands for its content) is a
// container.
func (f *mceFilter) inContainer(depth int) bool {
	s, k := f.s, len(f.open)-1
	for d := depth - 1; d >= 1; d-- {
		for k >= 0 && int(f.open[k].depth) > d {
			k--
		}
		if k >= 0 && int(f.open[k].depth) == d && f.open[k].kind != frameData {
			continue
		}
		name := s.names[s.starts[d-1]:]
		if d < len(s.starts) {
			name = s.names[s.starts[d-1]:s.starts[d]]
		}
		if i := bytes.IndexByte(name, ':'); i >= 0 {
			name = name[i+1:]
		}
		return isContainer(name)
	}
	return false
}

// qname is the name of the element that just started, as written,
// shortened for a message.
func (f *mceFilter) qname() string {
	s := f.s
	return quoteName(s.names[s.starts[len(s.starts)-1]:])
}

func describeNS(t *xmlToken) string {
	if len(t.uri) == 0 {
		return "no namespace"
	}
	return "the namespace " + strconv.Quote(shorten(string(bytes.ToValidUTF8(t.uri, []byte("?")))))
}

// scope takes the element's mc:Ignorable into scope.
func (f *mceFilter) scope(t *xmlToken) error {
	for i := range t.attrs {
		a := &t.attrs[i]
		if a.space != nsMC || a.prefix == nil || string(a.local) != "Ignorable" {
			continue
		}
		// A prefix not declared names no namespace to ignore.
		for p := range bytes.FieldsSeq(a.value) {
			if b, _ := f.s.lookupNS(p); b != nil {
				if len(f.ignorable) == maxMCENames {
					return f.s.fail("mc:Ignorable names more than %d namespaces in scope, more than any workbook's", maxMCENames)
				}
				f.ignorable = append(f.ignorable, b.id)
			}
		}
	}
	return nil
}

// isIgnorable reports a namespace mc:Ignorable lists in scope. The look-up
// is by number (nsID); a collision of two names only makes an element of
// the wrong namespace skipped, never read.
func (f *mceFilter) isIgnorable(id uint64) bool {
	for _, n := range f.ignorable {
		if n == id {
			return true
		}
	}
	return false
}

// requiresUnderstood reports whether every prefix of a Requires names a
// namespace this reader understands. An empty Requires, or a prefix not
// declared, is not understood: that branch is not taken.
func (f *mceFilter) requiresUnderstood(requires []byte) bool {
	n := 0
	for p := range bytes.FieldsSeq(requires) {
		b, _ := f.s.lookupNS(p)
		if b == nil || !understood(b.space) {
			return false
		}
		n++
	}
	return n > 0
}
