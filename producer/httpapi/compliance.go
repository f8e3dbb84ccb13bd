package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/throttle"
)

// ComplianceReporter builds the compliance report (*compliance.Recorder).
type ComplianceReporter interface {
	Report(ctx context.Context, policy throttle.Policy) (compliance.Report, error)
}

// ComplianceHandler serves GET /v1/compliance to operators: the report of
// every seller, so a seller's token is refused (403: an operator endpoint).
// The report counts as policy does (the API's limit, window, counting
// policy and bucket); ?limit= and ?window= override its limit and window.
func ComplianceHandler(auth Auth, rep ComplianceReporter, policy throttle.Policy) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := auth.Operator(r); err != nil {
			switch {
			case errors.Is(err, ErrNoToken):
				writeProblem(w, r, problem{Status: http.StatusUnauthorized, Code: "no_token", Detail: PublicMessage(err)})
			case errors.Is(err, ErrNotOperator):
				writeProblem(w, r, problem{Status: http.StatusForbidden, Code: "not_operator", Detail: PublicMessage(err)})
			default:
				writeProblem(w, r, problem{Status: http.StatusUnauthorized, Code: "bad_token", Detail: PublicMessage(err)})
			}
			return
		}
		markAuthenticated(r)
		l, win := policy.Limit, policy.Window
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				writeProblem(w, r, problem{Status: http.StatusBadRequest, Code: "bad_limit", Detail: fmt.Sprintf("limit must be a whole number > 0, got %q", v)})
				return
			}
			l = n
		}
		if v := r.URL.Query().Get("window"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				writeProblem(w, r, problem{Status: http.StatusBadRequest, Code: "bad_window", Detail: fmt.Sprintf("window must be a duration such as 60s, got %q", v)})
				return
			}
			win = d
		}
		p := policy
		p.Limit, p.Window = l, win
		report, err := rep.Report(r.Context(), p)
		if err != nil {
			writeProblem(w, r, problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: "the compliance report cannot be read now: " + err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, report)
	})
}
