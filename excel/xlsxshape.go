// Where SpreadsheetML allows the elements that hold data.

package excel

import "fmt"

// elemKind is what an element of a worksheet or of the shared strings is
// to the readers. rich-text elements (t, r, rPh, rPr, phoneticPr) have
// their kinds only inside a cell's inline text or a shared string: the
// same names elsewhere are other elements.
type elemKind uint8

const (
	elOther      elemKind = iota
	elWorksheet           // the root of a worksheet
	elSST                 // the root of the shared strings
	elSheetData           // <sheetData>
	elRow                 // <row>
	elCell                // <c>
	elV                   // <v>, a cell's value
	elF                   // <f>, a cell's formula
	elIs                  // <is>, a cell's inline text
	elSI                  // <si>, a shared string
	elT                   // <t>, text
	elRun                 // <r>, a rich-text run
	elRPh                 // <rPh>, a phonetic guide
	elRPr                 // <r>'s properties
	elPhoneticPr          // <phoneticPr>
	elExtLst              // <extLst>, extensions
)

var elemNames = [...]string{elOther: "", elWorksheet: "worksheet", elSST: "sst", elSheetData: "sheetData", elRow: "row", elCell: "c",
	elV: "v", elF: "f", elIs: "is", elSI: "si", elT: "t", elRun: "r", elRPh: "rPh", elRPr: "rPr", elPhoneticPr: "phoneticPr", elExtLst: "extLst"}

// isData reports the kinds that hold what the readers read: each stands
// only where the schema puts it.
func (k elemKind) isData() bool { return k >= elSheetData && k <= elRPh }

// onlyText reports the kinds that hold text and no element.
func (k elemKind) onlyText() bool { return k == elV || k == elF || k == elT }

// xmlShape holds the open elements of a worksheet or of the shared strings
// (those the Markup Compatibility filter hands the reader: SpreadsheetML's,
// a branch of AlternateContent standing for its content) and refuses an
// element that holds data where SpreadsheetML does not allow it: a row
// inside a row or a cell, a cell outside a row, a value inside a value, a
// second sheetData, a cell's second value, an unknown element among a
// row's cells. Excel reports such a file as damaged and LibreOffice shows
// something else again, so reading it at all would register what neither
// shows: it is refused as damaged.
type xmlShape struct {
	open []shapeFrame
	// rst counts the open <is> and <si>: rich text's elements have their
	// kinds inside them.
	rst int
}

type shapeFrame struct {
	kind elemKind
	seen uint32 // the kinds of the children seen that may stand once
}

// kindOf names an element by its local name, at the root or inside.
func (s *xmlShape) kindOf(local []byte) elemKind {
	if len(s.open) == 0 {
		switch string(local) {
		case "worksheet":
			return elWorksheet
		case "sst":
			return elSST
		}
		return elOther
	}
	switch string(local) {
	case "sheetData":
		return elSheetData
	case "row":
		return elRow
	case "c":
		return elCell
	case "v":
		return elV
	case "f":
		return elF
	case "is":
		return elIs
	case "si":
		return elSI
	case "extLst":
		return elExtLst
	}
	if s.rst == 0 {
		return elOther
	}
	switch string(local) {
	case "t":
		return elT
	case "r":
		return elRun
	case "rPh":
		return elRPh
	case "rPr":
		return elRPr
	case "phoneticPr":
		return elPhoneticPr
	}
	return elOther
}

// allowed reports whether an element of kind k may stand directly inside
// one of kind parent (ECMA-376 Part 1, 18.3 and 18.4), and whether it may
// stand there only once.
func allowed(parent, k elemKind) (ok, once bool) {
	switch parent {
	case elWorksheet:
		return k == elSheetData || !k.isData(), k == elSheetData
	case elSST:
		return k == elSI || k == elExtLst, false
	case elSheetData:
		return k == elRow, false
	case elRow:
		return k == elCell || k == elExtLst, false
	case elCell:
		return k == elV || k == elF || k == elIs || k == elExtLst, k != elExtLst
	case elIs, elSI:
		return k == elT || k == elRun || k == elRPh || k == elPhoneticPr, k == elT || k == elPhoneticPr
	case elRun:
		return k == elRPr || k == elT, true
	case elRPh:
		return k == elT, true
	case elV, elF, elT:
		return false, false
	}
	return !k.isData(), false
}

// start takes an element that starts and answers its kind, or why it may
// not stand there.
func (s *xmlShape) start(local []byte) (elemKind, error) {
	k := s.kindOf(local)
	if n := len(s.open); n > 0 {
		p := &s.open[n-1]
		ok, once := allowed(p.kind, k)
		switch {
		case p.kind.onlyText():
			return k, fmt.Errorf("an element <%s> stands inside <%s>, which holds only text (Excel reports such a file as damaged)", quoteName(local), elemNames[p.kind])
		case !ok && p.kind != elOther && p.kind != elExtLst && p.kind != elRPr && p.kind != elPhoneticPr:
			return k, fmt.Errorf("an element <%s> stands inside <%s>, where SpreadsheetML does not allow it (Excel reports such a file as damaged)", quoteName(local), elemNames[p.kind])
		case !ok:
			return k, fmt.Errorf("an element <%s> stands outside the element SpreadsheetML keeps it in (Excel reports such a file as damaged)", elemNames[k])
		case once && p.seen&(1<<k) != 0:
			return k, fmt.Errorf("an element <%s> holds a second <%s> (Excel reports such a file as damaged)", elemNames[p.kind], elemNames[k])
		}
		if once {
			p.seen |= 1 << k
		}
	}
	if k == elIs || k == elSI {
		s.rst++
	}
	s.open = append(s.open, shapeFrame{kind: k})
	return k, nil
}

// end takes the end of the innermost open element.
func (s *xmlShape) end() {
	n := len(s.open)
	if n == 0 {
		return
	}
	if k := s.open[n-1].kind; k == elIs || k == elSI {
		s.rst--
	}
	s.open = s.open[:n-1]
}

// top is the innermost open element's kind, and its parent's.
func (s *xmlShape) top() (k, parent elemKind) {
	n := len(s.open)
	if n == 0 {
		return elOther, elOther
	}
	if n > 1 {
		parent = s.open[n-2].kind
	}
	return s.open[n-1].kind, parent
}
