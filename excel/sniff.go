package excel

import (
	"bytes"
	"unicode/utf8"
)

// documentKinds are files sellers upload by mistake under a spreadsheet's
// name (a PDF of the product list, a screenshot, a web page saved as .xls),
// told by their first bytes. Without this they would be read as CSV text
// and refused for having no header row "of the CSV file", which says
// nothing of what to do.
var documentKinds = []struct {
	magic []byte
	kind  string // the message table's variant of not_xlsx
	what  string // the English name
}{
	{[]byte("%PDF-"), "pdf", "a PDF document"},
	{[]byte("\x89PNG\r\n\x1a\n"), "png", "a PNG image"},
	{[]byte{0xFF, 0xD8, 0xFF}, "jpeg", "a JPEG image (a photo)"},
	{[]byte("GIF87a"), "gif", "a GIF image"},
	{[]byte("GIF89a"), "gif", "a GIF image"},
	{[]byte(`{\rtf`), "rtf", "an RTF (rich text) document"},
}

// sniffDocument refuses a file that is a known kind of document, not a
// spreadsheet, naming it; nil for anything else (read as CSV text).
func sniffDocument(data []byte) *FileError {
	for _, d := range documentKinds {
		if bytes.HasPrefix(data, d.magic) {
			return notSpreadsheet(d.kind, d.what)
		}
	}
	if isHTML(data) {
		return notSpreadsheet("html", "a web page (HTML)")
	}
	return nil
}

func notSpreadsheet(kind, what string) *FileError {
	return fileErr(CodeNotXLSX, "the file is %s, not a spreadsheet; put the products in the template (.xlsx), one a row, and save it as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\"", what).
		withParams("kind", kind)
}

// isHTML tells a web page: its first tag, after a byte-order mark and
// white space, is <!doctype html>, <html, <head, <body, <table or <meta
// (some shops' "Excel download" is an HTML table named .xls).
func isHTML(data []byte) bool {
	s := bytes.TrimPrefix(data[:min(len(data), 512)], []byte("\xEF\xBB\xBF"))
	s = bytes.TrimLeft(s, " \t\r\n")
	lower := bytes.ToLower(s)
	for _, p := range []string{"<!doctype html", "<html", "<head", "<body", "<table", "<meta"} {
		if bytes.HasPrefix(lower, []byte(p)) {
			return true
		}
	}
	return false
}

// oleDocument names an old-style (OLE2) Word, PowerPoint or Hangul file by
// the stream names of its directory (UTF-16), nil for anything else,
// which is taken for an .xls or a file protected by a password (Excel
// keeps those in OLE2 too).
func oleDocument(data []byte) *FileError {
	head := data[:min(len(data), 1<<20)]
	has := func(name string) bool { return bytes.Contains(head, utf16LE(name)) }
	switch {
	case has("Workbook") || has("Book") || has("EncryptedPackage"):
		return nil
	case has("WordDocument"):
		return notSpreadsheet("doc", "an old-style Word document (.doc)")
	case has("PowerPoint Document"):
		return notSpreadsheet("ppt", "an old-style PowerPoint document (.ppt)")
	case has("HwpSummaryInformation") || has("FileHeader") && has("BodyText"):
		return notSpreadsheet("hwp", "a Hangul word processor document (.hwp)")
	}
	return nil
}

func utf16LE(s string) []byte {
	out := make([]byte, 0, 2*utf8.RuneCountInString(s))
	for _, r := range s {
		out = append(out, byte(r), byte(r>>8))
	}
	return out
}
