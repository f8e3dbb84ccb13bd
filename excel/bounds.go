package excel

import (
	"strconv"

	"github.com/bulkreg/bulkreg/internal/jsonenc"
	"github.com/bulkreg/bulkreg/messages"
)

// What one upload's answer may list. Every problem and warning goes into the
// JSON answer of a check or an upload, and every row's problems into the
// reason Redis keeps for the row, so their number and length are bounded,
// whatever the file: 10,000 merges over 500 rows could otherwise make 5
// million problems.
const (
	// maxRowProblems is the most problems one row lists; a last one says
	// how many more the row has.
	maxRowProblems = 10
	// maxListedProblems is how many problems the rows list in all before
	// each further row lists only its first (so it still says why it
	// failed); a warning says how many are not listed.
	maxListedProblems = 500
	// maxWarnings is the most warnings listed; a last one says how many more.
	maxWarnings = 100
	// maxMessageJSON bounds a problem's message as JSON writes it (a '<'
	// is 6 bytes there), so that a listed problem is at most about 520
	// bytes and every list of an answer together well under 1 MiB.
	maxMessageJSON = 400
)

// Codes of the lines that stand for problems and warnings not listed.
const (
	CodeMoreProblems = "more_problems"
	CodeMoreWarnings = "more_warnings"
)

// boundProblems applies the bounds above to a validated sheet.
func boundProblems(s *Sheet) {
	listed, unlisted := 0, 0
	for i := range s.Rows {
		r := &s.Rows[i]
		for j := range r.Problems {
			r.Problems[j].Message = jsonenc.Cut(r.Problems[j].Message, maxMessageJSON)
		}
		all := len(r.Problems)
		if all > maxRowProblems {
			more := all - (maxRowProblems - 1)
			r.Problems = append(r.Problems[:maxRowProblems-1:maxRowProblems-1], said(Problem{Row: r.Number, Code: CodeMoreProblems, Params: pairs("count", group(int64(more)))}))
		}
		if all == 0 {
			continue
		}
		if listed+len(r.Problems) > maxListedProblems {
			unlisted += all - 1
			r.Problems = r.Problems[:1:1]
			continue
		}
		listed += len(r.Problems)
	}
	for i := range s.Warnings {
		s.Warnings[i].Message = jsonenc.Cut(s.Warnings[i].Message, maxMessageJSON)
	}
	if n := len(s.Warnings); n > maxWarnings {
		s.Warnings = append(s.Warnings[:maxWarnings-1:maxWarnings-1], said(Problem{Code: CodeMoreWarnings, Params: pairs("count", group(int64(n-(maxWarnings-1))))}))
	}
	if unlisted > 0 {
		s.Warnings = append(s.Warnings, said(Problem{Code: CodeMoreProblems,
			Params: pairs("kind", "rows", "count", group(int64(unlisted)), "limit", strconv.Itoa(maxListedProblems))}))
	}
}

// said is p with its English sentence from the message table ("and 1 more
// problem", "and 2 more problems").
func said(p Problem) Problem {
	p.Message, _ = messages.Render(messages.EN, p.Code, p.Params)
	return p
}
