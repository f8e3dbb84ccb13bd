package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
)

// parseBool reads the boolean query parameter name. Absent is false;
// present, it must be exactly "true" or "false", once. Anything else (1,
// yes, TRUE, maybe, an empty value, the parameter twice) is refused rather
// than guessed: a lax reading once took ?dry_run=maybe for "publish".
func parseBool(q url.Values, name string) (bool, error) {
	vs, ok := q[name]
	if !ok {
		return false, nil
	}
	if len(vs) != 1 {
		return false, fmt.Errorf("the query parameter %s must be given once, as true or false; it was given %d times", name, len(vs))
	}
	switch vs[0] {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("the query parameter %s must be true or false, got %q", name, vs[0])
}

// boolParams reads the boolean query parameters names of r into the
// variables vs points to (in the same order). On a value that is not a
// boolean it answers 400 problem+json with code bad_parameter naming the
// parameter, and reports false.
func boolParams(w http.ResponseWriter, r *http.Request, names []string, vs ...*bool) bool {
	q := r.URL.Query()
	for i, name := range names {
		v, err := parseBool(q, name)
		if err != nil {
			writeProblem(w, r, problem{Status: http.StatusBadRequest, Code: "bad_parameter", Detail: err.Error(), Parameter: name})
			return false
		}
		*vs[i] = v
	}
	return true
}
