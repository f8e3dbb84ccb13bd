// The workbook part: its relationships, which lead to the sheets, the styles
// and the shared strings.

package excel

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"
)

// readWorkbook finds the sheets through the package's relationships and
// reads the workbook's styles and shared strings.
func (b *xlsxFile) readWorkbook() *FileError {
	wbPart := "xl/workbook.xml"
	if f := b.parts["_rels/.rels"]; f != nil {
		rels, err := b.readRels(f, "")
		if err != nil {
			return b.partErr(f, err)
		}
		for _, r := range rels {
			if strings.HasSuffix(r.typ, "/officeDocument") {
				wbPart = r.target
			}
		}
	}
	wb := b.parts[wbPart]
	if wb == nil {
		if ferr := otherDocument(b.parts); ferr != nil {
			return ferr
		}
		return incomplete(errors.New("the workbook part is missing"))
	}
	type sheetRef struct {
		name, rid string
		hidden    bool
	}
	var refs []sheetRef
	inSheets := false
	err := b.walk(wb, nsMain, func(t *xmlToken) error {
		switch t.kind {
		case xmlStart:
			switch string(t.local) {
			case "workbookPr":
				v := string(t.attr("date1904"))
				b.date1904 = v == "1" || v == "true"
			case "sheets":
				inSheets = true
			case "sheet":
				if inSheets {
					if len(refs) == maxSheets {
						return fileErr(CodeTooLarge, "the workbook lists more than %s sheets; save the product list alone in a new workbook", group(maxSheets)).withParams("kind", "content")
					}
					name, rid := t.attr("name"), t.attrNS(nsRel, "id")
					if len(name) > maxRefBytes || len(rid) > maxRefBytes {
						return errors.New("a sheet with a name or id longer than any workbook's")
					}
					state := string(t.attr("state"))
					// The name reaches messages and pages: cut like a header
					// (Excel allows 31 characters).
					refs = append(refs, sheetRef{name: cutHeader(string(name)), rid: string(rid), hidden: state == "hidden" || state == "veryHidden"})
				}
			}
		case xmlEnd:
			if string(t.local) == "sheets" {
				inSheets = false
			}
		}
		return nil
	})
	if err != nil {
		return b.partErr(wb, err)
	}
	dir := path.Dir(wbPart)
	targets := map[string]rel{}
	sstPart, stylesPart := path.Join(dir, "sharedstrings.xml"), path.Join(dir, "styles.xml")
	if f := b.parts[path.Join(dir, "_rels", path.Base(wbPart)+".rels")]; f != nil {
		rels, err := b.readRels(f, dir)
		if err != nil {
			return b.partErr(f, err)
		}
		for _, r := range rels {
			targets[r.id] = r
			switch {
			case strings.HasSuffix(r.typ, "/sharedStrings"):
				sstPart = r.target
			case strings.HasSuffix(r.typ, "/styles"):
				stylesPart = r.target
			}
		}
	}
	for _, ref := range refs {
		r, ok := targets[ref.rid]
		if !ok {
			continue // a sheet the workbook names without a part: nothing to read
		}
		f := b.parts[r.target]
		if f == nil {
			return incomplete(fmt.Errorf("the part of sheet %q is missing", ref.name))
		}
		b.sheets = append(b.sheets, bookSheet{name: ref.name, part: f, hidden: ref.hidden, worksheet: strings.HasSuffix(r.typ, "/worksheet")})
	}
	if f := b.parts[stylesPart]; f != nil {
		if err := b.readStyles(f); err != nil {
			return b.partErr(f, err)
		}
	}
	if f := b.parts[sstPart]; f != nil {
		if err := b.readSharedStrings(f); err != nil {
			if fe, ok := errors.AsType[*FileError](err); ok {
				return fe
			}
			return b.partErr(f, err)
		}
	}
	return nil
}

type rel struct{ id, typ, target string }

// readRels reads a relationships part; targets are resolved against dir.
// Every relationship counts against maxRels; only those of the kinds
// readWorkbook follows are kept.
func (b *xlsxFile) readRels(f *zip.File, dir string) ([]rel, error) {
	var rels []rel
	n := 0
	err := b.walk(f, nsPkgRel, func(t *xmlToken) error {
		if t.kind != xmlStart || string(t.local) != "Relationship" {
			return nil
		}
		if n++; n > maxRels {
			return fileErr(CodeTooLarge, "the file's part %s lists more than %s relationships, more than any workbook needs; save it again from Excel as .xlsx", f.Name, group(maxRels)).withParams("kind", "content")
		}
		typ := t.attr("Type")
		if string(t.attr("TargetMode")) == "External" || !followedRel(typ) {
			return nil
		}
		if len(typ) > maxRefBytes || len(t.attr("Target")) > maxRefBytes || len(t.attr("Id")) > maxRefBytes {
			return errors.New("a relationship longer than any workbook's")
		}
		target := string(t.attr("Target"))
		if strings.HasPrefix(target, "/") {
			target = partName(target)
		} else {
			target = partName(path.Join(dir, target))
		}
		rels = append(rels, rel{id: string(t.attr("Id")), typ: string(typ), target: target})
		return nil
	})
	return rels, err
}

// followedRel reports the kinds of relationship readWorkbook follows: the
// workbook, its sheets of every kind, its styles and shared strings.
func followedRel(typ []byte) bool {
	for _, kind := range [...]string{"/officeDocument", "/worksheet", "/chartsheet", "/dialogsheet", "/macrosheet", "/xlMacrosheet", "/xlIntlMacrosheet", "/sharedStrings", "/styles"} {
		if bytes.HasSuffix(typ, []byte(kind)) {
			return true
		}
	}
	return false
}
