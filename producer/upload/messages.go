package upload

import (
	"strconv"
	"strings"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/messages"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Languages of what a seller reads (package messages).
const (
	LangKO = messages.KO
	LangEN = messages.EN
)

// FieldName is how a page or report in lang names a field of the upload:
// the seller's own header for it when their file had one, else the
// template's Korean column name (Korean) or the field itself (English).
func FieldName(lang string, header []string, field string) string {
	for _, h := range header {
		if f, ok := excel.HeaderField(h); ok && f == field {
			return h
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

// say renders code with params in Korean, the "field" parameter named as
// the seller's file names it. False when the table has no such code.
func say(lang string, header []string, code string, params map[string]string) (string, bool) {
	if f, ok := params["field"]; ok {
		p := make(map[string]string, len(params))
		for k, v := range params {
			p[k] = v
		}
		p["field"] = FieldName(lang, header, f)
		params = p
	}
	return messages.Render(lang, code, params)
}

// Text is the problem as a page in lang shows it, without its cell: the
// validator's own sentence in English, the message table's in Korean.
func (p Problem) Text(lang string, header []string) string {
	if lang != LangEN {
		if s, ok := say(lang, header, p.Code, p.Params); ok {
			return s
		}
	}
	return strings.TrimSpace(p.Message)
}

// In is the problem with its place, in lang: "D17: …", "5행: …".
func (p Problem) In(lang string, header []string) string {
	if lang == LangEN {
		return p.String()
	}
	return place(p.Cell, p.Row) + p.Text(lang, header)
}

func place(cell string, row int) string {
	switch {
	case cell != "":
		return cell + ": "
	case row > 0:
		return strconv.Itoa(row) + "행: "
	}
	return ""
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

// RowReason is why a row failed (or which product it already is), in lang:
// the recorded English sentence, or the message table's Korean one from the
// row's details. A row recorded without details (before they were kept, or
// a refusal the registration API worded) is said in Korean around its
// English reason.
func RowReason(lang string, header []string, rr uploadstatus.RowResult) string {
	if lang == LangEN {
		return rr.Reason
	}
	if len(rr.Details) > 0 {
		parts := make([]string, 0, len(rr.Details))
		for _, d := range rr.Details {
			if s, ok := say(lang, header, d.Code, d.Params); ok {
				parts = append(parts, place(d.Cell, 0)+s)
			}
		}
		if len(parts) == len(rr.Details) {
			return strings.Join(parts, "; ")
		}
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
		s, _ := messages.Render(lang, "registry_refused", map[string]string{"field": FieldName(lang, header, rr.Field), "detail": rr.Reason})
		return s
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
