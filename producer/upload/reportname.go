package upload

import (
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bulkreg/bulkreg/uploadstatus"
)

// maxNameRunes bounds the uploaded file's name as a report's name keeps it.
const maxNameRunes = 80

// ReportName is the name of an upload's report: the uploaded file's name
// without its extension, then "-결과.xlsx" ("-report.xlsx" in English), or
// "-실패행.xlsx" ("-failed.xlsx") for the failed rows alone. A seller
// downloading reports of several files tells them apart by name, which
// "bulkreg-<hex>-report.xlsx" would not let them. An upload without a usable
// name keeps "bulkreg-<id>".
func ReportName(lang string, st uploadstatus.Status, failedOnly bool) string {
	base := cleanName(st.FileName)
	if base == "" {
		base = "bulkreg-" + st.ID
	}
	suffix := map[bool]string{false: "-report", true: "-failed"}[failedOnly]
	if lang != LangEN {
		suffix = map[bool]string{false: "-결과", true: "-실패행"}[failedOnly]
	}
	return base + suffix + ".xlsx"
}

// cleanName is a file name a seller's browser or OS sent, made safe for a
// download's name: the last path element (a browser may send C:\...\a.xlsx),
// its extension dropped, control characters, quotes, slashes and characters
// Windows forbids in names replaced by '_', spaces trimmed, at most
// maxNameRunes characters.
func cleanName(name string) string {
	name = strings.ReplaceAll(name, `\`, "/")
	name = path.Base(name)
	if name == "." || name == "/" {
		return ""
	}
	name = strings.TrimSuffix(name, path.Ext(name))
	var b strings.Builder
	n := 0
	for _, r := range name {
		if n == maxNameRunes {
			break
		}
		switch {
		case r == utf8.RuneError, unicode.IsControl(r), strings.ContainsRune(`"\/:*?<>|%;`, r),
			unicode.Is(unicode.Bidi_Control, r):
			r = '_'
		}
		b.WriteRune(r)
		n++
	}
	return strings.Trim(strings.TrimSpace(b.String()), ".")
}

// ContentDisposition is the Content-Disposition of a download named name:
// an ASCII filename for old clients ('_' for every other character) and the
// UTF-8 name in filename* (RFC 5987, RFC 6266), which browsers prefer.
func ContentDisposition(name string) string {
	var ascii strings.Builder
	for _, r := range name {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' || r == '%' || r == ';' {
			r = '_'
		}
		ascii.WriteRune(r)
	}
	return `attachment; filename="` + ascii.String() + `"; filename*=UTF-8''` + extValue(name)
}

// extValue percent-encodes every byte of s that is not an attr-char of RFC 5987.
func extValue(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
