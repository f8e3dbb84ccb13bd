package excel

import (
	"bytes"
	"context"
	"errors"
	"unicode/utf8"

	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/unicode"
)

var (
	utf8BOM    = []byte{0xEF, 0xBB, 0xBF}
	utf16LEBOM = []byte{0xFF, 0xFE}
	utf16BEBOM = []byte{0xFE, 0xFF}
)

// decodeText turns an upload that is not a workbook into UTF-8 text, or
// refuses it. The rule: a UTF-16 byte-order mark means UTF-16 (Excel's
// "Unicode text", little-endian, and some exports big-endian); a UTF-8
// byte-order mark means UTF-8; bytes that are valid UTF-8 are UTF-8; anything
// else is decoded as CP949 (the Korean Windows code page, a superset of
// EUC-KR, which Korean Excel writes for "CSV (쉼표로 분리)" and "텍스트 (탭으로
// 분리)") and refused if that fails too. Korean text in CP949 is practically
// never valid UTF-8 (its lead bytes 0xB0–0xC8 would need continuation bytes
// 0x80–0xBF, and its trail bytes are 0xA1–0xFE), and text that is plain ASCII
// reads the same either way. Otherwise a NUL byte means binary data: refused.
func decodeText(data []byte) ([]byte, *FileError) {
	switch {
	case bytes.HasPrefix(data, utf16LEBOM) || bytes.HasPrefix(data, utf16BEBOM):
		// UseBOM reads the order from the mark and drops it; an odd last
		// byte or a lone surrogate decodes to U+FFFD, which a seller's text
		// read from a spreadsheet never holds.
		out, err := unicode.UTF16(unicode.LittleEndian, unicode.UseBOM).NewDecoder().Bytes(data)
		if err != nil || bytes.ContainsRune(out, utf8.RuneError) || bytes.IndexByte(out, 0) >= 0 {
			return nil, fileErr(CodeNotXLSX, "the file starts as UTF-16 text (Excel's \"Unicode text\") but is damaged; save it again from Excel, or as \"CSV UTF-8 (쉼표로 분리)\"")
		}
		return out, nil
	case bytes.IndexByte(data, 0) >= 0:
		return nil, fileErr(CodeNotXLSX, "the file is neither an Excel workbook (.xlsx) nor a CSV file; save it from Excel as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (쉼표로 분리)\"")
	case bytes.HasPrefix(data, utf8BOM):
		data = data[len(utf8BOM):]
		if !utf8.Valid(data) {
			return nil, fileErr(CodeNotXLSX, "the file starts as UTF-8 text but holds bytes that are not UTF-8; save it again from Excel as \"CSV UTF-8 (쉼표로 분리)\"")
		}
		return data, nil
	case utf8.Valid(data):
		return data, nil
	}
	out, err := korean.EUCKR.NewDecoder().Bytes(data)
	if err != nil || bytes.ContainsRune(out, utf8.RuneError) {
		return nil, fileErr(CodeNotXLSX, "the file is not an Excel workbook (.xlsx), and as text it is neither UTF-8 nor CP949 (EUC-KR); save it from Excel as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (쉼표로 분리)\"")
	}
	return out, nil
}

// separators are the field separators a text upload may use, in the order
// they are tried: the comma of every CSV; the tab of Excel's "Unicode text"
// and "Text (Tab delimited)" and of Google Sheets' .tsv; the semicolon Excel
// writes for CSV where the list separator is one (most of Europe), as
// LibreOffice may.
const separators = ",\t;"

// separatorOf is the first of separators that splits one of the first
// HeaderSearchRows records into a header row (two or more known column
// names), or a comma when none does, so that the file gets the comma's
// "no header" answer. A file that reads with commas today is read the same:
// the comma is tried first and kept whenever it finds a header.
func separatorOf(text []byte, maxCell int) byte {
	f := boundedText{max: maxCell}
	for i := range len(separators) {
		sep := separators[i]
		if sep != ',' && bytes.IndexByte(text, sep) < 0 {
			continue
		}
		pos := 0
		for row := 1; row <= HeaderSearchRows && pos < len(text); row++ {
			var cells []string
			for {
				f.reset()
				var ok bool
				if pos, ok = scanField(text, pos, sep, &f); !ok {
					break // damaged: reading the file says where
				}
				cells = append(cells, string(f.buf))
				if pos < len(text) && text[pos] == sep {
					pos++
					continue
				}
				pos = skipLineEnd(text, pos)
				break
			}
			if headerScore(cells) >= 2 {
				return sep
			}
		}
	}
	return ','
}

// skipLineEnd passes one line end (CRLF, LF or CR) at pos, if there is one.
func skipLineEnd(text []byte, pos int) int {
	if pos < len(text) && text[pos] == '\r' {
		pos++
	}
	if pos < len(text) && text[pos] == '\n' {
		pos++
	}
	return pos
}

// readCSV reads a CSV file as Excel opens one: records separated by commas
// (or the tabs or semicolons separatorOf finds) and line ends (CRLF, LF or
// CR), a field in double quotes may hold separators, line ends and doubled
// quotes, and text after a closing quote is kept as Excel keeps it. Every
// record is a row, a blank line too, so rows are numbered as Excel shows them.
func (p *Parser) readCSV(ctx context.Context, data []byte) (*Sheet, error) {
	text, ferr := decodeText(data)
	if ferr != nil {
		return nil, ferr
	}
	sep := separatorOf(text, p.opts.MaxCellBytes)
	budget := &textBudget{limit: p.opts.MaxTextBytes}
	g := newGrid(p.opts, budget, FormatCSV, "")
	field := boundedText{max: p.opts.MaxCellBytes}
	var cells []cell
	pos, row := 0, 0
	for pos < len(text) {
		row++
		if row&255 == 0 && ctx.Err() != nil {
			return nil, ctxErr(ctx, "reading the rows")
		}
		if row > maxSheetRow {
			return nil, fileErr(CodeDamaged, "the CSV file has more than %s lines, more than a sheet can hold", group(maxSheetRow))
		}
		cells = cells[:0]
		cols := g.cols()
		for col := 1; ; col++ {
			field.reset()
			var ok bool
			if pos, ok = scanField(text, pos, sep, &field); !ok {
				return nil, fileErr(CodeDamaged, "the CSV file is damaged: the quoted cell %s is never closed; save it again from Excel", cellName(min(col, maxSheetCol), row))
			}
			if !field.cut {
				field.buf = unformula(field.buf)
			}
			if col <= cols && (len(field.buf) > 0 || field.cut) {
				if ferr := budget.take(len(field.buf)); ferr != nil {
					return nil, ferr
				}
				cells = append(cells, cell{col: col, text: string(field.buf), runes: field.runes, cut: field.cut})
			}
			if pos < len(text) && text[pos] == sep {
				pos++
				continue
			}
			pos = skipLineEnd(text, pos) // the end of the record
			break
		}
		err := g.add(row, false, cells)
		if errors.Is(err, errNoHeaderHere) {
			return nil, noHeader(FormatCSV)
		}
		if err != nil {
			return nil, err
		}
	}
	s, err := g.finish(nil)
	if errors.Is(err, errNoHeaderHere) {
		return nil, noHeader(FormatCSV)
	}
	return s, err
}

// scanField reads one field from text[pos:] into f and returns where it
// ends (at sep, a line end or the end of the text). ok is false for a
// quoted field that is never closed.
func scanField(text []byte, pos int, sep byte, f *boundedText) (end int, ok bool) {
	if pos < len(text) && text[pos] == '"' {
		pos++
		for {
			i := bytes.IndexByte(text[pos:], '"')
			if i < 0 {
				return len(text), false
			}
			writeLines(f, text[pos:pos+i])
			pos += i + 1
			if pos < len(text) && text[pos] == '"' {
				f.write(text[pos : pos+1])
				pos++
				continue
			}
			break
		}
	}
	// Unquoted text, or what follows a closing quote: up to sep or a line end.
	i := pos
	for i < len(text) && text[i] != sep && text[i] != '\n' && text[i] != '\r' {
		i++
	}
	f.write(text[pos:i])
	return i, true
}

// unformula turns a field written ="00123", the way sellers (and programs
// that export for Excel) keep leading zeros in a CSV file, into the text
// Excel shows: 00123.
func unformula(b []byte) []byte {
	if len(b) < 3 || b[0] != '=' || b[1] != '"' || b[len(b)-1] != '"' {
		return b
	}
	inner := b[2 : len(b)-1]
	for i := 0; i < len(inner); i++ {
		if inner[i] == '"' {
			if i+1 >= len(inner) || inner[i+1] != '"' {
				return b // not one quoted text: leave the formula as it is
			}
			i++
		}
	}
	return bytes.ReplaceAll(inner, []byte(`""`), []byte(`"`))
}

// writeLines writes quoted text with its line ends as "\n", as in a cell.
func writeLines(f *boundedText, b []byte) {
	for {
		i := bytes.IndexByte(b, '\r')
		if i < 0 {
			f.write(b)
			return
		}
		f.write(b[:i])
		f.write([]byte{'\n'})
		b = b[i+1:]
		if len(b) > 0 && b[0] == '\n' {
			b = b[1:]
		}
	}
}
