package uploadstatus

import "github.com/bulkreg/bulkreg/internal/jsonenc"

// MaxReasonJSON bounds a row's reason as Redis keeps it and the status
// answers it: JSON bytes, where a '<' takes 6. A reason lists a row's
// problems, and a crafted file could give a row thousands of them
// (hundreds of MB in one key), so a longer reason is cut, marked with "…":
// 500 rows keep at most about 0.5 MiB of reasons.
const MaxReasonJSON = 1024

// CutReason shortens reason, at a character, to at most MaxReasonJSON bytes
// of JSON.
func CutReason(reason string) string {
	return jsonenc.Cut(reason, MaxReasonJSON)
}

// JSONSize is how many bytes encoding/json writes s in, quotes included:
// what a text costs where it is kept as JSON.
func JSONSize(s string) int {
	return jsonenc.Size(s) + 2
}
