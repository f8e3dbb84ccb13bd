package upload

import (
	"strings"
	"unicode"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/messages"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Languages of what a seller reads (package messages).
const (
	LangKO = messages.KO
	LangEN = messages.EN
)

// FieldName is how a page or report in lang names a field of the upload,
// short enough to be said before each of its problems: the seller's own
// header for it without the marks and asides the header matching ignores
// ("판매가* (price)" is "판매가", "가격 (원)" is "가격"); in English a header
// in Korean is the field itself ("price"). Without a header for it, the
// template's Korean column name (Korean) or the field (English).
func FieldName(lang string, header []string, field string) string {
	for _, h := range header {
		if f, ok := excel.HeaderField(h); ok && f == field {
			return ColumnName(lang, h)
		}
	}
	if lang == LangEN {
		return field
	}
	for _, c := range excel.Columns() {
		if c.Field == field {
			return c.Korean
		}
	}
	return field
}

// ColumnName is how a page in lang names the column a header cell heads
// (FieldName): the header without its marks and asides; in English, a
// Korean header of a known column by its field.
func ColumnName(lang, h string) string {
	bare := bareHeader(h)
	if lang == LangEN && hasHangul(bare) {
		if f, ok := excel.HeaderField(h); ok {
			return f
		}
	}
	return bare
}

// bareHeader is a header without what is in brackets and without "*":
// the column's name as the seller wrote it. A header that is nothing else
// is kept whole.
func bareHeader(h string) string {
	var b strings.Builder
	depth := 0
	for _, c := range h {
		switch {
		case strings.ContainsRune("([{（［｛", c):
			depth++
		case strings.ContainsRune(")]}）］｝", c) && depth > 0:
			depth--
		case depth == 0 && c != '*':
			b.WriteRune(c)
		}
	}
	if bare := strings.Join(strings.Fields(b.String()), " "); bare != "" {
		return bare
	}
	return strings.TrimSpace(h)
}

func hasHangul(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.Is(unicode.Hangul, r) })
}

// say renders code with params in lang, the "field" parameter named as the
// seller's file names it (FieldName). named tells whether the sentence
// names the field itself; one that does not is said after it (At). False
// when the table has no such code.
func say(lang string, header []string, code string, params map[string]string) (s string, named, ok bool) {
	if f, ok := params["field"]; ok {
		p := make(map[string]string, len(params))
		for k, v := range params {
			p[k] = v
		}
		p["field"] = FieldName(lang, header, f)
		params = p
	}
	s, ok = messages.Render(lang, code, params)
	return s, messages.NamesField(code, params), ok
}

// Text is the problem as a page in lang shows it beside its cell and its
// field (Field): the message table's sentence, which names the field only
// where it says more of it than that its value is wrong ("merged_fill").
// A problem whose code the table lacks says the validator's own English
// sentence.
func (p Problem) Text(lang string, header []string) string {
	if s, _, ok := say(lang, header, p.Code, p.Params); ok {
		return s
	}
	return strings.TrimSpace(p.Message)
}

// Field is the field p is about as lang names it (FieldName), to be said
// before Text; "" when Text names it itself or p is about no field.
func (p Problem) Field(lang string, header []string) string {
	f := p.Params["field"]
	if f == "" || !messages.Known(messages.Key(p.Code, p.Params)) || messages.NamesField(p.Code, p.Params) {
		return ""
	}
	return FieldName(lang, header, f)
}

// In is the problem with its place and field, each once, in lang:
// "D17 판매가: …", "5행: …", "D17 price: …".
func (p Problem) In(lang string, header []string) string {
	return messages.At(lang, p.Cell, p.Row, p.Field(lang, header), p.Text(lang, header))
}

// Text is the refusal of a file as a page in lang says it.
func (r Refusal) Text(lang string) string {
	if lang != LangEN {
		if s, ok := messages.Render(lang, r.Code, r.Params); ok {
			return s
		}
	}
	return r.Message
}

// RowReason is why a row failed (or which product it already is), in lang,
// each problem with its cell and field once ("D3 판매가: …; E3 재고수량: …"):
// from the row's details by the message table, or, for a row recorded
// without details, the recorded reason (English) or, in Korean, the
// message table's sentence around it.
func RowReason(lang string, header []string, rr uploadstatus.RowResult) string {
	return rowReason(lang, header, rr, "")
}

// RowReasonBeside is RowReason where the row's field is shown beside the
// reason (a table's field column): a problem of that field is said
// without naming it again.
func RowReasonBeside(lang string, header []string, rr uploadstatus.RowResult) string {
	return rowReason(lang, header, rr, rr.Field)
}

func rowReason(lang string, header []string, rr uploadstatus.RowResult, beside string) string {
	field := func(f string, named bool) string {
		if f == "" || named || f == beside {
			return ""
		}
		return FieldName(lang, header, f)
	}
	if len(rr.Details) > 0 {
		parts := make([]string, 0, len(rr.Details))
		for _, d := range rr.Details {
			if s, named, ok := say(lang, header, d.Code, d.Params); ok {
				parts = append(parts, messages.At(lang, d.Cell, 0, field(d.Params["field"], named), s))
			}
		}
		if len(parts) == len(rr.Details) {
			return strings.Join(parts, "; ")
		}
	}
	if lang == LangEN {
		return rr.Reason
	}
	if d, ok := deadLettered(rr); ok {
		// The consumer's detail is English: "status 503", or a call that
		// got no answer as the message table's call_failed says it. Say it
		// in the seller's words, and the cause from the row's class (its
		// code).
		if n, ok := strings.CutPrefix(d["detail"], "status "); ok {
			d["detail"], _ = messages.Render(lang, "dead_lettered.status", map[string]string{"status": n})
		} else if s, ok := callFailed(lang, d["detail"]); ok {
			d["detail"] = s
		} else {
			d["detail"], _ = messages.Render(lang, "dead_lettered.noanswer", nil)
		}
		d[messages.KindParam] = rr.Code
		s, _ := messages.Render(lang, "dead_lettered", d)
		return s
	}
	switch {
	case rr.State == uploadstatus.AlreadyRegistered:
		s, _ := messages.Render(lang, "already_registered", map[string]string{"product": rr.ProductID})
		return s
	case rr.State != uploadstatus.Failed:
		return ""
	case rr.Field != "":
		s, _ := messages.Render(lang, "registry_refused", map[string]string{"detail": rr.Reason})
		return messages.At(lang, "", 0, field(rr.Field, false), s)
	}
	s, _ := messages.Render(lang, "registry_refused.nofield", map[string]string{"detail": rr.Reason})
	return s
}

// FieldIn is a failed row's field as a page in lang names it ("" for none).
func FieldIn(lang string, header []string, field string) string {
	if field == "" {
		return ""
	}
	return FieldName(lang, header, field)
}

// details turns a row's problems into the details its result keeps.
func details(ps []excel.Problem) []uploadstatus.Detail {
	if len(ps) == 0 {
		return nil
	}
	out := make([]uploadstatus.Detail, len(ps))
	for i, p := range ps {
		out[i] = uploadstatus.Detail{Code: p.Code, Cell: p.Cell, Field: p.Column, Params: p.Params}
	}
	return out
}

// callFailed is the English sentence of a call_failed variant (what a call
// without an answer recorded, registryclient.Result.SellerDetail) in lang.
func callFailed(lang, en string) (string, bool) {
	for _, k := range messages.Keys() {
		if k != "call_failed" && !strings.HasPrefix(k, "call_failed.") {
			continue
		}
		if s, _ := messages.Template(messages.EN, k); s == en {
			return messages.Template(lang, k)
		}
	}
	return "", false
}

// deadLetteredPrefix starts the reason consumers record for a row set aside
// after its retries (consumer's dead letters), which keeps no details.
const deadLetteredPrefix = "the registration API did not take the row after "

// deadLettered reads a dead-lettered row's facts from its reason: the
// attempts and, in parentheses, the last error.
func deadLettered(rr uploadstatus.RowResult) (map[string]string, bool) {
	rest, ok := strings.CutPrefix(rr.Reason, deadLetteredPrefix)
	if !ok || rr.State != uploadstatus.Failed {
		return nil, false
	}
	n, rest, ok := strings.Cut(rest, " attempts (")
	if !ok {
		return nil, false
	}
	detail, _, ok := strings.Cut(rest, "); it was set aside")
	if !ok {
		return nil, false
	}
	return map[string]string{"attempts": n, "detail": detail}, true
}
