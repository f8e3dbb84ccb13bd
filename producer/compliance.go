package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/bulkreg/bulkreg/compliance"
)

// ComplianceReporter builds the compliance report (*compliance.Recorder).
type ComplianceReporter interface {
	Report(ctx context.Context, limit int, window time.Duration) (compliance.Report, error)
}

// ComplianceHandler serves GET /v1/compliance to operators: the report of
// every seller, so a seller's token is refused (403: an operator endpoint).
// ?limit= and ?window= override the configured limit and window.
func ComplianceHandler(auth Auth, rep ComplianceReporter, limit int, window time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := auth.Operator(r); err != nil {
			if errors.Is(err, ErrNoToken) {
				writeError(w, http.StatusUnauthorized, "no_token", err.Error())
				return
			}
			writeError(w, http.StatusForbidden, "not_operator", err.Error())
			return
		}
		l, win := limit, window
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				writeError(w, http.StatusBadRequest, "bad_limit", fmt.Sprintf("limit must be a whole number > 0, got %q", v))
				return
			}
			l = n
		}
		if v := r.URL.Query().Get("window"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				writeError(w, http.StatusBadRequest, "bad_window", fmt.Sprintf("window must be a duration such as 60s, got %q", v))
				return
			}
			win = d
		}
		report, err := rep.Report(r.Context(), l, win)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "unavailable", "the compliance report cannot be read now: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, report)
	})
}

// WriteComplianceText prints the report as a table, one seller a line.
func WriteComplianceText(w io.Writer, rep compliance.Report) {
	fmt.Fprintf(w, "compliance at %s: limit %d per %s, history of %s\n", rep.At.Local().Format(time.DateTime), rep.Limit, rep.Window, rep.Retention)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SELLER\tCALLS\tACCEPTED\tMAX IN WINDOW\tCURRENT WINDOW\t429s\tEXCEEDED")
	for _, s := range rep.Sellers {
		ex := "no"
		if s.Exceeded {
			ex = "YES"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", s.Seller, s.Calls, s.Accepted, s.MaxInWindow, s.CurrentWindow, s.RateLimited, ex)
	}
	tw.Flush()
	if len(rep.Sellers) == 0 {
		fmt.Fprintln(w, "no calls in the history")
	}
}
