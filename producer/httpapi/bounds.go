package httpapi

import (
	"html/template"
	"slices"
	"strings"
	"unicode/utf8"
)

// Bounds of what one answer shows of an upload. Every answer about an
// upload of at most 10 MiB stays under 1 MiB (design.md's ceiling): what
// the seller's file says (headers, cells, the values problems quote) is
// shown cut, and lists are shown up to a count and a byte budget, with how
// many were left out and where to find them all. html/template writes a
// character as at most 5 bytes (&amp;, &#34;), so the budgets count text as
// escapedLen does and the markup around it with a fixed allowance.
const (
	// headerShownLen bounds a header's text where a page names a column,
	// in characters: a known column's name with its decorations
	// ("판매가 (원, 필수)*") fits; brackets full of text do not need to.
	headerShownLen = 100
	// valueShownLen bounds one value a problem quotes, in characters.
	valueShownLen = 100
	// textShownLen bounds one problem's or failed row's text, in
	// characters: the message table's longest sentence with its values.
	textShownLen = 400
	// maxProblemsShown and problemsBudget bound the check's list of
	// problems (and that of SKUs registered with other content): the
	// first ones in the file's order, up to this many and this many bytes
	// of text; the rest are counted. Fixing these and checking again
	// shows the next ones; the fix file lists every row's problems.
	maxProblemsShown = 200
	problemsBudget   = 256 << 10
	// maxWarningsShown bounds the check's warnings (one per unknown
	// column, say), and maxFileProblemsShown a refused file's problems.
	maxWarningsShown     = 50
	maxFileProblemsShown = 50
	// previewRows and previewColumns bound the check's preview table, and
	// previewBudget the bytes of text in it (cells, the problems their
	// cells name twice: the tooltip and the screen reader's text). A
	// preview is for seeing that the file was read as meant; the first
	// rows and columns show that.
	previewRows    = 100
	previewColumns = 30
	previewBudget  = 320 << 10
	// maxRowsListed bounds the rows the detail page and an event list
	// (each list: rows to fix, rows registered with other content, rows
	// registered twice), and rowsBudget the bytes of text of the rows to
	// fix; the other two lists get half of it each. The fix file has every
	// row to fix, the full report every row.
	maxRowsListed = 200
	rowsBudget    = 320 << 10
	// cellMarkup is an allowance for the markup around one shown text
	// (its element, id, class, link): counted with the text in budgets.
	cellMarkup = 120
)

// cutRunes keeps the first n characters of s, marking a cut with "…"; it
// never splits a UTF-8 sequence (bytes that are not UTF-8 count one each).
func cutRunes(s string, n int) string {
	if len(s) <= n { // bytes ≥ characters: nothing to count
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}

// escapedLen is how many bytes s takes at most once escaped for a page
// (html/template: &amp;, &#34;) or for JSON (\u003c, \u0001, \ufffd for a
// byte that is not UTF-8).
func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c < 0x20, c == '&', c == '<', c == '>', c == '"', c == '\'', c == '+', c == '=', c == '`', c == '\\':
				n += 5
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			n += 5
		}
		i += size
	}
	return n
}

// cutParams is params with every value cut to valueShownLen characters,
// so that a sentence rendered from them is bounded whatever the file says.
func cutParams(params map[string]string) map[string]string {
	if len(params) == 0 {
		return params
	}
	out := make(map[string]string, len(params))
	for k, v := range params {
		out[k] = cutRunes(v, valueShownLen)
	}
	return out
}

// isolated is text for a page with each of values in it, and the whole,
// set apart from the text around it (<bdi>): text from the seller's file
// (a cell, a header, a SKU, a file name) can hold right-to-left marks and
// overrides (U+202E), which must not turn the page's words around it.
// text is cut to max characters first.
func isolated(text string, max int, values ...string) template.HTML {
	text = cutRunes(text, max)
	if text == "" {
		return ""
	}
	vals := make([]string, 0, len(values))
	for _, v := range values {
		if v != "" && utf8.ValidString(v) && strings.Contains(text, v) {
			vals = append(vals, v)
		}
	}
	// The longest first: a value holding another is set apart whole.
	slices.SortFunc(vals, func(a, b string) int { return len(b) - len(a) })
	var b strings.Builder
	b.Grow(escapedLen(text) + 11*(len(vals)+1))
	b.WriteString("<bdi>")
	plain := 0
	for i := 0; i < len(text) && len(vals) > 0; {
		hit := ""
		for _, v := range vals {
			if strings.HasPrefix(text[i:], v) {
				hit = v
				break
			}
		}
		if hit == "" {
			i++
			continue
		}
		b.WriteString(template.HTMLEscapeString(text[plain:i]))
		b.WriteString("<bdi>")
		b.WriteString(template.HTMLEscapeString(hit))
		b.WriteString("</bdi>")
		i += len(hit)
		plain = i
	}
	b.WriteString(template.HTMLEscapeString(text[plain:]))
	b.WriteString("</bdi>")
	return template.HTML(b.String())
}

// paramValues are the values of a problem's params that quote the seller's
// file (the others are numbers and limits bulkreg says), and more, for
// isolated.
func paramValues(params map[string]string, more ...string) []string {
	out := more
	for k, v := range params {
		switch k {
		case "value", "header", "formula", "shown", "names", "name", "sheet", "field", "product", "key":
			if v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// attrIsolated is text for an attribute (a tooltip, a label), set apart
// as isolated does for a page's text: an element cannot be put in an
// attribute, so the text goes between a first-strong isolate and its pop
// (U+2068 … U+2069), which end any override in it.
func attrIsolated(text string) string {
	if text == "" {
		return ""
	}
	return "\u2068" + text + "\u2069"
}
