package httpapi

import (
	"strings"

	sentences "github.com/bulkreg/bulkreg/messages"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// The sentences that count rows say each count that is not 0, and leave
// out the ones that are ("이미 등록된 0개 행" is no news): a count is an
// item (key and number), and a list of items is said with the ones left.
type count struct {
	key string
	n   int
}

// counted says the items whose count is not 0 in lang, each by its key
// (msgN: "1 row" apart from "2 rows").
func counted(lang string, items ...count) []string {
	var out []string
	for _, c := range items {
		if c.n != 0 {
			out = append(out, msgN(lang, c.key, c.n, c.n))
		}
	}
	return out
}

// joinAnd joins a list as a sentence does: "A", "A and B", "A, B and C";
// in Korean "A과 B", "A, B와 C" (the particle chosen by how B ends).
func joinAnd(lang string, items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	head, last := strings.Join(items[:len(items)-1], ", "), items[len(items)-1]
	if lang == langEN {
		return head + " and " + last
	}
	return sentences.WithParticle(head, "과") + " " + last
}

// summaryText counts a check's rows by what Register does with them:
// "21개 행: 등록 가능 19개, 오류 2개".
func summaryText(lang string, total, valid, fix, already, other int) string {
	parts := counted(lang, count{"check.summary.valid", valid}, count{"check.summary.invalid", fix},
		count{"check.summary.already", already}, count{"check.summary.other", other})
	return msg(lang, "check.summary", msgN(lang, "n.rows", total, total), strings.Join(parts, ", "))
}

// planText says what Register will do with a check's rows: register n,
// skip the rest (each kind said when there is any), or nothing to
// register and why.
func planText(lang string, c *upload.Checked) string {
	fix, other := c.Invalid-c.OtherContent, c.OtherContent
	switch {
	case c.Valid == 0 && c.Invalid == 0:
		return msg(lang, "check.plan.allready", c.AlreadyRegistered)
	case c.Valid == 0:
		s := msg(lang, "check.plan.none", joinAnd(lang, counted(lang,
			count{"check.plan.none.invalid", fix}, count{"check.plan.none.already", c.AlreadyRegistered}, count{"check.plan.none.other", other})))
		if fix > 0 {
			s += " " + msg(lang, "check.plan.fixfirst")
		}
		return s
	case c.Invalid == 0 && c.AlreadyRegistered == 0:
		return msg(lang, "check.plan.all", c.Valid)
	}
	return msg(lang, "check.plan", msgN(lang, "check.plan.rows", c.Valid, c.Valid), joinAnd(lang, counted(lang,
		count{"check.plan.invalid", fix}, count{"check.plan.already", c.AlreadyRegistered}, count{"check.plan.other", other})))
}

// endText says a finished upload's end state in words, with how many rows
// need fixing, each count said when it is not 0.
func endText(lang string, st uploadstatus.Status) string {
	if st.Twice > 0 {
		return endCounts(lang, st) + " " + msg(lang, "end.twice", st.Twice)
	}
	return endCounts(lang, st)
}

// endCounts is endText without the rows registered twice.
func endCounts(lang string, st uploadstatus.Status) string {
	// done says the rows registered now and before, in brackets.
	done := func() string {
		parts := counted(lang, count{"end.now", st.Registered}, count{"end.before", st.AlreadyRegistered})
		if len(parts) == 0 {
			return ""
		}
		return " (" + strings.Join(parts, ", ") + ")"
	}
	switch endState(st) {
	case "ok":
		return msg(lang, "end.ok", done())
	case "other":
		return msg(lang, "end.other", st.OtherContent, done())
	case "failed":
		return msg(lang, "end.failed", st.Total)
	}
	s := msg(lang, "end.partial", st.ToFix(), st.Total)
	switch {
	case st.OtherContent > 0 && st.Registered+st.AlreadyRegistered > 0:
		return s + " " + msg(lang, "end.partial.other", st.OtherContent)
	case st.OtherContent > 0:
		return s + " " + msg(lang, "end.partial.others", st.OtherContent)
	}
	return s + " " + msg(lang, "end.partial.rest")
}
