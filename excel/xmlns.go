// XML namespaces: the scanner resolves every element's and prefixed
// attribute's namespace from the declarations in scope, as the Namespaces
// in XML recommendation says, so the reader can tell SpreadsheetML from
// whatever else a part holds. A prefix is only a local name for its
// namespace: <x:row> with xmlns:x bound to SpreadsheetML's namespace is a
// row; <row> under xmlns="" or another default is not.

package excel

import "bytes"

// xmlNS is a namespace as the reader tells them apart.
type xmlNS uint8

const (
	nsNone xmlNS = iota // no namespace
	// nsMain is SpreadsheetML's main namespace, transitional or strict:
	// the only one whose elements make rows, cells, shared strings,
	// styles and the workbook's sheets.
	nsMain
	nsRel    // relationships of Office documents ("r:id"), transitional or strict
	nsPkgRel // the package's relationships parts
	nsMC     // Markup Compatibility (mc:Ignorable, mc:AlternateContent)
	nsXML    // the xml: prefix's, always bound
	// nsOffice is any other namespace of Office Open XML or of Microsoft
	// Office's extensions (x14, x14ac, xr, ...): Excel understands them,
	// none of them holds data a product list reads.
	nsOffice
	nsOther // any other namespace: not Excel's
)

// Namespace names.
const (
	uriMain         = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
	uriMainStrict   = "http://purl.oclc.org/ooxml/spreadsheetml/main"
	uriRel          = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
	uriRelStrict    = "http://purl.oclc.org/ooxml/officeDocument/relationships"
	uriPkgRel       = "http://schemas.openxmlformats.org/package/2006/relationships"
	uriMC           = "http://schemas.openxmlformats.org/markup-compatibility/2006"
	uriXML          = "http://www.w3.org/XML/1998/namespace"
	uriOfficePrefix = "http://schemas.microsoft.com/office/"
	uriOOXMLPrefix  = "http://schemas.openxmlformats.org/"
	uriStrictPrefix = "http://purl.oclc.org/ooxml/"
	uriVMLPrefix    = "urn:schemas-microsoft-com:"
)

// classifyNS tells a namespace name's kind.
func classifyNS(uri []byte) xmlNS {
	switch string(uri) {
	case "":
		return nsNone
	case uriMain, uriMainStrict:
		return nsMain
	case uriRel, uriRelStrict:
		return nsRel
	case uriPkgRel:
		return nsPkgRel
	case uriMC:
		return nsMC
	case uriXML:
		return nsXML
	}
	for _, p := range [...]string{uriOfficePrefix, uriOOXMLPrefix, uriStrictPrefix, uriVMLPrefix} {
		if bytes.HasPrefix(uri, []byte(p)) {
			return nsOffice
		}
	}
	return nsOther
}

// nsBinding is one declaration in scope: prefix (empty for the default
// namespace) and name are nsBytes[off:off+plen] and [off+plen:off+plen+ulen];
// key is prefixKey(prefix).
type nsBinding struct {
	off, plen, ulen int
	key             uint64
	id              uint64 // nsID of the name
	space           xmlNS
}

// nsMark is where the declarations of an open element begin in ns.
type nsMark struct {
	depth int32
	mark  int
}

// Bounds of the declarations in scope. Excel declares 7 to 10 namespaces
// on a part's root and a few more inside, excelize 62 on its styles' root;
// their bytes bound what the scanner keeps. A prefixed name is looked up
// among those in scope, innermost first: each nsLookupSteps bindings passed
// on the way count as one XML entry against the upload's budget, so a
// crafted part whose names are all looked up past hundreds of declarations
// is refused by the budget rather than costing seconds.
const (
	maxNSInScope  = 256
	maxNSBytes    = 64 << 10
	nsLookupSteps = 16
)

// nsID hashes a namespace name (FNV-1a), so that sets of namespaces are
// compared by number; an equal number is confirmed by the names.
func nsID(uri []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range uri {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}

// prefixKey packs a prefix's length and first 7 bytes: two prefixes of at
// most 7 bytes are equal exactly when their keys are.
func prefixKey(p []byte) uint64 {
	k := uint64(len(p)) << 56
	for i := 0; i < len(p) && i < 7; i++ {
		k |= uint64(p[i]) << (8 * i)
	}
	return k
}

// declare takes the namespace declarations among the current start tag's
// attributes into scope, the element already pushed.
func (s *xmlScanner) declare(name []byte) error {
	s.nsDepths = append(s.nsDepths, nsMark{depth: int32(len(s.starts)), mark: len(s.ns)})
	for i := range s.attrs {
		a := &s.attrs[i]
		if !a.isDecl() {
			continue
		}
		var prefix []byte
		if a.prefix != nil {
			prefix = a.local
			switch {
			case string(prefix) == "xmlns":
				return s.fail("element <%s> declares the reserved prefix xmlns", name)
			case string(prefix) == "xml" && string(a.value) != uriXML, string(prefix) != "xml" && string(a.value) == uriXML:
				return s.fail("element <%s> binds the prefix xml, or its namespace, otherwise than XML does", name)
			case len(a.value) == 0:
				return s.fail("element <%s> binds the prefix %s to no namespace", name, quoteName(prefix))
			}
		}
		if len(s.ns) == maxNSInScope || len(s.nsBytes)+len(prefix)+len(a.value) > maxNSBytes {
			return s.fail("element <%s> declares namespaces past %d declarations or %s in scope, more than any workbook's", name, maxNSInScope, byteSize(maxNSBytes))
		}
		off := len(s.nsBytes)
		s.nsBytes = append(append(s.nsBytes, prefix...), a.value...)
		s.ns = append(s.ns, nsBinding{off: off, plen: len(prefix), ulen: len(a.value), key: prefixKey(prefix), id: nsID(a.value), space: classifyNS(a.value)})
		if prefix == nil {
			s.defaultNS = len(s.ns)
		}
	}
	return nil
}

// resolve returns the namespace of a prefix (nil: the default namespace,
// for an element), or fails for a prefix not declared.
func (s *xmlScanner) resolve(prefix []byte, name []byte) (xmlNS, []byte, uint64, error) {
	if b, steps := s.lookupNS(prefix); b != nil {
		if steps >= nsLookupSteps {
			if err := s.count(steps / nsLookupSteps); err != nil {
				return nsNone, nil, 0, err
			}
		}
		return b.space, s.nsBytes[b.off+b.plen : b.off+b.plen+b.ulen], b.id, nil
	}
	switch {
	case prefix == nil:
		return nsNone, nil, nsID(nil), nil
	case string(prefix) == "xml":
		return nsXML, []byte(uriXML), nsID([]byte(uriXML)), nil
	}
	return nsNone, nil, 0, s.fail("the prefix %s of <%s> is not declared", quoteName(prefix), name)
}

// lookupNS returns the declaration in scope of a prefix (nil if none)
// and how many declarations it passed to find it.
func (s *xmlScanner) lookupNS(prefix []byte) (*nsBinding, int) {
	if prefix == nil {
		if s.defaultNS == 0 {
			return nil, 0
		}
		return &s.ns[s.defaultNS-1], 0
	}
	key := prefixKey(prefix)
	for i := len(s.ns) - 1; i >= 0; i-- {
		b := &s.ns[i]
		if b.key == key && (b.plen < 8 || bytes.Equal(s.nsBytes[b.off:b.off+b.plen], prefix)) {
			return b, len(s.ns) - 1 - i
		}
	}
	// Not declared: the part is refused.
	return nil, 0
}

// closeNS drops the declarations of the element that ends, if it made any
// (nsDepths holds the depths of the open elements that did).
func (s *xmlScanner) closeNS() {
	n := len(s.nsDepths) - 1
	if n < 0 || int(s.nsDepths[n].depth) != len(s.starts) {
		return
	}
	m := s.nsDepths[n].mark
	s.nsDepths = s.nsDepths[:n]
	s.nsBytes = s.nsBytes[:s.ns[m].off]
	s.ns = s.ns[:m]
	if s.defaultNS > m {
		s.defaultNS = 0
		for i := m - 1; i >= 0; i-- {
			if s.ns[i].plen == 0 {
				s.defaultNS = i + 1
				break
			}
		}
	}
}
