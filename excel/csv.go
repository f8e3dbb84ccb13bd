package excel

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/encoding/korean"
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
		return decodeUTF16(data)
	case bytes.IndexByte(data, 0) >= 0:
		return nil, fileErr(CodeNotXLSX, "the file is neither an Excel workbook (.xlsx) nor a CSV file; save it from Excel as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\"")
	case bytes.HasPrefix(data, utf8BOM):
		data = data[len(utf8BOM):]
		if !utf8.Valid(data) {
			return nil, fileErr(CodeNotXLSX, "the file starts as UTF-8 text but holds bytes that are not UTF-8; save it again from Excel as \"CSV UTF-8 (Comma delimited)\"").withParams("kind", "utf8")
		}
		return data, nil
	case utf8.Valid(data):
		return data, nil
	}
	// Decoded into one buffer of the most it can need (a character of two
	// bytes becomes at most three): the decoder's own growing buffers held
	// three times a 10 MiB file at once.
	out := make([]byte, len(data)*3/2+utf8.UTFMax)
	n, _, err := korean.EUCKR.NewDecoder().Transform(out, data, true)
	out = out[:n]
	if err != nil || bytes.ContainsRune(out, utf8.RuneError) {
		return nil, fileErr(CodeNotXLSX, "the file is not an Excel workbook (.xlsx), and as text it is neither UTF-8 nor CP949 (EUC-KR); save it from Excel as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\"").withParams("kind", "encoding")
	}
	return out, nil
}

// decodeUTF16 decodes UTF-16 text after its byte-order mark (which gives the
// byte order) into UTF-8, or refuses it, saying where it is damaged: an odd
// last byte, half of a surrogate pair, or a NUL (binary data after a mark).
// U+FFFD is kept: it is a character a seller's text may hold.
func decodeUTF16(data []byte) ([]byte, *FileError) {
	var order binary.ByteOrder = binary.LittleEndian
	if bytes.HasPrefix(data, utf16BEBOM) {
		order = binary.BigEndian
	}
	body := data[2:]
	damaged := func(i int, what string) *FileError {
		return fileErr(CodeNotXLSX, "the file is UTF-16 text (Excel's \"Unicode text\") but is damaged %s bytes in: %s; save it again from Excel, or as \"CSV UTF-8 (Comma delimited)\"", group(int64(i+2)), what).
			withParams("kind", "utf16", "at", group(int64(i+2)))
	}
	if len(body)%2 != 0 {
		return nil, damaged(len(body)-1, "it ends in half a character")
	}
	out := make([]byte, 0, len(body)*3/2)
	for i := 0; i < len(body); i += 2 {
		u := rune(order.Uint16(body[i:]))
		switch {
		case u == 0:
			return nil, damaged(i, "a NUL character, so it is not text")
		case utf16.IsSurrogate(u):
			if i+4 > len(body) {
				return nil, damaged(i, "half of a character pair")
			}
			r := utf16.DecodeRune(u, rune(order.Uint16(body[i+2:])))
			if r == utf8.RuneError { // a trail surrogate first, or a lead without its trail
				return nil, damaged(i, "half of a character pair")
			}
			out = utf8.AppendRune(out, r)
			i += 2
		default:
			out = utf8.AppendRune(out, u)
		}
	}
	return out, nil
}

// separators are the field separators a text upload may use, in the order
// they are tried: the comma of every CSV; the tab of Excel's "Unicode text"
// and "Text (Tab delimited)" and of Google Sheets' .tsv; the semicolon Excel
// writes for CSV where the list separator is one (most of Europe), as
// LibreOffice may.
const separators = ",\t;"

// startText starts reading text with the first of separators with which the
// grid finds a whole header row (every required column) in the first
// HeaderSearchRows records, and goes on from below that header; failing
// that, from the top with the first separator that finds a header row at
// all, so that the seller is told which columns it lacks; failing that, with
// a comma, so that the file gets the comma's answer. The records are read and
// judged as the rest of the file is, so a file that reads with commas reads
// with commas: the comma is tried first and kept whenever it finds a whole
// header. Each other try reads at most the first HeaderSearchRows records.
func (p *Parser) startText(text []byte) (*grid, *csvReader) {
	partial := byte(0)
	for i := range len(separators) {
		sep := separators[i]
		if sep != ',' && bytes.IndexByte(text, sep) < 0 {
			continue
		}
		g, r := p.newTextRead(text, sep)
		for r.row < HeaderSearchRows {
			more, err := r.next(g.cols())
			if err != nil || !more {
				break
			}
			err = g.add(r.row, false, r.cells)
			if g.headerRow != 0 {
				if err == nil {
					return g, r
				}
				if partial == 0 {
					partial = sep
				}
				break
			}
			if err != nil {
				break
			}
		}
	}
	return p.newTextRead(text, cmp.Or(partial, ','))
}

// newTextRead starts reading text with the separator sep: a grid and a
// reader sharing one text budget, both naming the file as a seller knows it.
func (p *Parser) newTextRead(text []byte, sep byte) (*grid, *csvReader) {
	budget := &textBudget{limit: p.opts.MaxTextBytes}
	g := newGrid(p.opts, budget, FormatCSV, "")
	r := &csvReader{text: text, sep: sep, where: "the CSV file", field: boundedText{max: p.opts.MaxCellBytes}, budget: budget}
	if sep == '\t' {
		r.where = "the tab-separated file"
	}
	g.where = r.where
	return g, r
}

// csvReader reads the records of a decoded text file, one separator between
// fields.
type csvReader struct {
	text   []byte
	sep    byte
	where  string // for messages: "the CSV file"
	pos    int
	row    int    // the record last read, numbered from 1 as Excel numbers rows
	cells  []cell // its cells, reused by the next record
	field  boundedText
	budget *textBudget
}

// next reads the next record into r.cells, keeping its first cols columns
// (cells with text only). It answers false at the end of the text, and a
// *FileError for a damaged or oversized file.
func (r *csvReader) next(cols int) (bool, error) {
	if r.pos >= len(r.text) {
		return false, nil
	}
	r.row++
	if r.row > maxSheetRow {
		return false, fileErr(CodeDamaged, "%s has more than %s lines, more than a sheet can hold", r.where, group(maxSheetRow)).withParams("kind", "lines", "count", group(maxSheetRow))
	}
	r.cells = r.cells[:0]
	for col := 1; ; col++ {
		f := &r.field
		f.reset()
		var ok bool
		if r.pos, ok = scanField(r.text, r.pos, r.sep, f); !ok {
			return false, fileErr(CodeDamaged, "%s is damaged: the quoted cell %s is never closed; save it again from Excel", r.where, cellName(min(col, maxSheetCol), r.row)).
				withParams("kind", "quote", "cell", cellName(min(col, maxSheetCol), r.row))
		}
		if !f.cut {
			f.buf = unformula(f.buf)
		}
		if col <= cols && (len(f.buf) > 0 || f.cut) {
			if ferr := r.budget.take(len(f.buf)); ferr != nil {
				return false, ferr
			}
			r.cells = append(r.cells, cell{col: col, text: string(f.buf), runes: f.runes, cut: f.cut})
		}
		if r.pos < len(r.text) && r.text[r.pos] == r.sep {
			r.pos++
			continue
		}
		// The end of the record: one line end (CRLF, LF or CR).
		if r.pos < len(r.text) && r.text[r.pos] == '\r' {
			r.pos++
		}
		if r.pos < len(r.text) && r.text[r.pos] == '\n' {
			r.pos++
		}
		return true, nil
	}
}

// readCSV reads a CSV file as Excel opens one: records separated by commas
// (or the tabs or semicolons startText finds) and line ends (CRLF, LF or
// CR), a field in double quotes may hold separators, line ends and doubled
// quotes, and text after a closing quote is kept as Excel keeps it. Every
// record is a row, a blank line too, so rows are numbered as Excel shows them.
func (p *Parser) readCSV(ctx context.Context, data []byte) (*Sheet, error) {
	text, ferr := decodeText(data)
	if ferr != nil {
		return nil, ferr
	}
	g, r := p.startText(text)
	for {
		if (r.row+1)&255 == 0 && ctx.Err() != nil {
			return nil, ctxErr(ctx, "reading the rows")
		}
		more, err := r.next(g.cols())
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		err = g.add(r.row, false, r.cells)
		if errors.Is(err, errNoHeaderHere) {
			return nil, noHeader(FormatCSV)
		}
		if err != nil {
			return nil, err
		}
	}
	s, err := g.finish(ctx, nil)
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
