// Package termui is what bulkreg's commands print on a terminal: an upload's
// progress bar and the compliance table. It is the CLI's (cmd/producer,
// cmd/devstack through devstack), not the upload library's: the
// library returns values, the commands decide how they look. It is a view
// over compliance, throttle and uploadstatus, so it sits above them, not
// under internal/, which holds leaves only (layout_test.go).
package termui

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// ProgressBar renders a status as one line: a bar of registered (#),
// already registered (=) and failed (x) rows out of the total, then the counts.
func ProgressBar(s uploadstatus.Status, width int) string {
	if width <= 0 {
		width = 40
	}
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = '.'
	}
	if s.Total > 0 {
		reg := s.Registered * width / s.Total
		already := (s.Registered + s.AlreadyRegistered) * width / s.Total
		failed := (s.Registered + s.AlreadyRegistered + s.Failed) * width / s.Total
		for i := 0; i < failed && i < width; i++ {
			bar[i] = 'x'
		}
		for i := 0; i < already && i < width; i++ {
			bar[i] = '='
		}
		for i := 0; i < reg && i < width; i++ {
			bar[i] = '#'
		}
	}
	pct := 0
	if s.Total > 0 {
		pct = (s.Registered + s.AlreadyRegistered + s.Failed) * 100 / s.Total
	}
	line := fmt.Sprintf("[%s] %3d%%  %d/%d registered", bar, pct, s.Registered, s.Total)
	if s.AlreadyRegistered > 0 {
		line += fmt.Sprintf(", %d already registered", s.AlreadyRegistered)
	}
	return line + fmt.Sprintf(", %d failed, %d waiting", s.Failed, s.Waiting)
}

// ComplianceTable prints the report as a table, one seller a line.
func ComplianceTable(w io.Writer, rep compliance.Report) {
	// MAX is what the API's policy counts against the limit.
	counted, most := "", "MAX IN WINDOW"
	switch rep.Policy {
	case throttle.Fixed:
		counted, most = ", fixed windows", "MAX IN A FIXED WINDOW"
	case throttle.TokenBucket:
		counted, most = fmt.Sprintf(", a token bucket of %d", rep.Burst), "MOST TOKENS TAKEN"
	}
	fmt.Fprintf(w, "compliance at %s: limit %d per %s%s, history of %s\n", rep.At.Local().Format(time.DateTime), rep.Limit, rep.Window, counted, rep.Retention)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SELLER\tCALLS\tACCEPTED\t%s\tCURRENT WINDOW\t429s\tEXCEEDED\n", most)
	for _, s := range rep.Sellers {
		ex := "no"
		if s.Exceeded {
			ex = "YES"
		}
		// Quoted: a seller id is never trusted to be one harmless word,
		// whatever wrote it into the call history.
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", strconv.Quote(s.Seller), s.Calls, s.Accepted, s.MaxCounted, s.CurrentWindow, s.RateLimited, ex)
	}
	tw.Flush()
	if len(rep.Sellers) == 0 {
		fmt.Fprintln(w, "no calls in the history")
	}
	if a := rep.App; a != nil {
		ex := "no"
		if a.Exceeded {
			ex = "YES"
		}
		fmt.Fprintf(w, "app-wide: limit %d per %s, %d accepted, max %d in any window, %d in the current one, exceeded: %s\n",
			a.Limit, a.Window, a.Accepted, a.MaxInWindow, a.CurrentWindow, ex)
	}
	// What the history cannot vouch for, said plainly: a lost history is
	// not a compliant one.
	when := func(t time.Time) string { return t.Local().Format(time.DateTime) }
	if g := rep.SellersUncovered; g != nil {
		fmt.Fprintf(w, "NOT COVERED %s – %s: %s\n", when(g.From), when(g.To), g.Reason)
	}
	for _, s := range rep.Sellers {
		if g := s.Uncovered; g != nil {
			fmt.Fprintf(w, "NOT COVERED %s – %s, seller %s: %s\n", when(g.From), when(g.To), strconv.Quote(s.Seller), g.Reason)
		}
	}
	if !rep.Complete {
		fmt.Fprintln(w, "the history does not cover the whole period: compliance is not vouched for in the periods marked NOT COVERED")
	}
}
