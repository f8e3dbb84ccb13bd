package excel

import (
	"context"
	"strings"
	"testing"

	"github.com/bulkreg/bulkreg/messages"
)

// oleFile is the start of an OLE2 compound file whose directory names the
// stream name (UTF-16), as Word, PowerPoint, Hangul and Excel write them.
func oleFile(stream string) []byte {
	b := append([]byte{}, oleMagic...)
	b = append(b, make([]byte, 504)...)
	b = append(b, utf16LE(stream)...)
	return append(b, make([]byte, 64)...)
}

// TestDocumentsRenamedXLSXAreNamed: a PDF, an image, a web page, an RTF or
// an old Word file renamed .xlsx is not read as CSV text and refused with
// "no header row was found ... of the CSV file" or "neither an Excel
// workbook nor a CSV file": the answer names what it is, in both
// languages, and what to save instead.
func TestDocumentsRenamedXLSXAreNamed(t *testing.T) {
	for _, tc := range []struct {
		name, kind, what string
		data             []byte
	}{
		{"pdf", "pdf", "a PDF document", []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n")},
		{"png", "png", "a PNG image", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01")},
		{"jpeg", "jpeg", "a JPEG image", []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00")},
		{"gif", "gif", "a GIF image", []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00")},
		{"html", "html", "a web page (HTML)", []byte("\xef\xbb\xbf\n  <!DOCTYPE html><html><body><table><tr><td>판매가</td></tr></table></body></html>")},
		{"html table (an 'Excel download')", "html", "a web page (HTML)", []byte("<table><tr><td>price</td><td>stock</td></tr></table>")},
		{"rtf", "rtf", "an RTF (rich text) document", []byte(`{\rtf1\ansi\deff0 {\fonttbl {\f0 Arial;}} price, stock}`)},
		{"zip", "zip", "a ZIP archive", rawXLSX(t, map[string]string{"photos/a.jpg": "x"})},
		{"doc", "doc", "an old-style Word document (.doc)", oleFile("WordDocument")},
		{"ppt", "ppt", "an old-style PowerPoint document (.ppt)", oleFile("PowerPoint Document")},
		{"hwp", "hwp", "a Hangul word processor document (.hwp)", oleFile("HwpSummaryInformation")},
		{"xls", "xls", "old-style .xls workbook", oleFile("Workbook")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewParser(Options{}).ParseBytes(context.Background(), tc.data)
			if s != nil {
				t.Fatalf("read %d rows from %s", len(s.Rows), tc.name)
			}
			fe := fileErrCode(t, err)
			if fe.Code != CodeNotXLSX || !strings.Contains(fe.Message, tc.what) || fe.Params["kind"] != tc.kind {
				t.Fatalf("got %s %v: %s; want not_xlsx naming %q (kind %s)", fe.Code, fe.Params, fe.Message, tc.what, tc.kind)
			}
			if strings.Contains(fe.Message, "header") || strings.Contains(fe.Message, "CSV file") {
				t.Errorf("%s is refused as a CSV file: %s", tc.name, fe.Message)
			}
			ko, ok := messages.Render(messages.KO, fe.Code, fe.Params)
			if !ok || messages.Key(fe.Code, fe.Params) != "not_xlsx."+tc.kind || !strings.Contains(ko, ".xlsx") {
				t.Errorf("Korean %q (key %s)", ko, messages.Key(fe.Code, fe.Params))
			}
		})
	}
}
