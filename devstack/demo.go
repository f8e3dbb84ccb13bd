package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/producer/httpapi"
	"github.com/bulkreg/bulkreg/termui"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Upload is one spreadsheet the demo sends, as one seller.
type Upload struct {
	Seller string
	Path   string
}

// DemoUploads are the sample spreadsheets under testdata/demo.
func DemoUploads(dir string) []Upload {
	return []Upload{
		{Seller: "seller-a", Path: filepath.Join(dir, "seller-a-500.xlsx")},
		{Seller: "seller-b", Path: filepath.Join(dir, "seller-b-120.xlsx")},
		{Seller: "seller-c", Path: filepath.Join(dir, "seller-c-40.xlsx")},
	}
}

// Outcome is what the demo saw at the end.
type Outcome struct {
	Statuses   []uploadstatus.Status
	Compliance compliance.Report
	Audit      sandbox.Audit
	Elapsed    time.Duration
}

// OK is true when every row of every upload was registered, the sandbox
// answered no 429 and no seller's window was ever exceeded, by either count.
func (o Outcome) OK() error {
	var problems []string
	for _, st := range o.Statuses {
		if st.Registered != st.Total {
			problems = append(problems, fmt.Sprintf("upload of %s: %d of %d rows registered (%d failed)", st.SellerID, st.Registered, st.Total, st.Failed))
		}
	}
	for seller, a := range o.Audit.Sellers {
		if a.RateLimited > 0 {
			problems = append(problems, fmt.Sprintf("%s: the registry answered %d × 429", seller, a.RateLimited))
		}
		if a.Exceeded {
			problems = append(problems, fmt.Sprintf("%s: the registry counted %d at once as %s counts (limit %d)", seller, a.MaxCounted, o.Audit.Policy, o.Audit.Limit))
		}
	}
	if o.Compliance.Exceeded {
		problems = append(problems, "the compliance report says a seller's limit was exceeded")
	}
	if len(problems) > 0 {
		return fmt.Errorf("the demo did not end well:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// Counting says in words how the registry counts its limit.
func Counting(o Options) string {
	switch o.Policy {
	case "fixed":
		return "in fixed windows aligned to the clock"
	case "token-bucket":
		burst := o.Burst
		if burst == 0 {
			burst = o.Limit
		}
		return fmt.Sprintf("as a token bucket of %d", burst)
	}
	return "in any trailing window"
}

// Demo uploads the files through the producer's HTTP service as their
// sellers, prints every interval the progress of each upload and each
// seller's use of its window, and when every upload is finished prints the
// compliance report and the registry's own audit.
func (s *Stack) Demo(ctx context.Context, out io.Writer, uploads []Upload, interval time.Duration) (Outcome, error) {
	start := time.Now()
	type job struct {
		Upload
		id, token string
	}
	var jobs []job
	for _, u := range uploads {
		token, err := httpapi.MintToken(s.Secret, u.Seller, time.Hour, time.Now())
		if err != nil {
			return Outcome{}, err
		}
		resp, err := s.upload(ctx, token, u.Path)
		if err != nil {
			return Outcome{}, fmt.Errorf("upload %s as %s: %w", u.Path, u.Seller, err)
		}
		fmt.Fprintf(out, "uploaded %-22s as %-9s → upload %s: %d rows published, %d invalid\n",
			filepath.Base(u.Path), u.Seller, resp.UploadID, resp.Published, resp.Invalid)
		jobs = append(jobs, job{Upload: u, id: resp.UploadID, token: token})
	}
	fmt.Fprintln(out, "\nwatch the uploads in a browser while the demo runs; each link signs its seller in, once:")
	for _, j := range jobs {
		link, err := s.SignInLink(j.Seller)
		if err != nil {
			return Outcome{}, err
		}
		fmt.Fprintf(out, "  %-9s %s\n", j.Seller, link)
	}
	o := s.Options
	fmt.Fprintf(out, "\nthe registry takes %d registrations per seller per %v, counted %s; %d consumers share the work.\n", o.Limit, o.Window, Counting(o), o.Consumers)
	for _, j := range jobs {
		if st, err := s.status(ctx, j.token, j.id); err == nil && st.Valid > o.Limit && o.Policy == "sliding" {
			lower := time.Duration((st.Valid+o.Limit-1)/o.Limit-1) * (o.Window + o.Margin)
			fmt.Fprintf(out, "%s's %d rows cannot finish sooner than %v after its first call (window + margin %v between each %d).\n",
				j.Seller, st.Valid, lower, o.Window+o.Margin, o.Limit)
		}
	}
	fmt.Fprintln(out, "progress (# registered, x failed, . waiting) and each seller's window as the throttle sees it:")

	tick := time.NewTicker(interval)
	defer tick.Stop()
	var statuses []uploadstatus.Status
	for {
		statuses = statuses[:0]
		done := true
		for _, j := range jobs {
			st, err := s.status(ctx, j.token, j.id)
			if err != nil {
				return Outcome{}, err
			}
			statuses = append(statuses, st)
			done = done && st.Done()
		}
		s.printProgress(ctx, out, time.Since(start), statuses)
		if done {
			break
		}
		select {
		case <-ctx.Done():
			return Outcome{Statuses: statuses}, fmt.Errorf("stopped before every upload finished: %w", ctx.Err())
		case <-tick.C:
		}
	}
	res := Outcome{Statuses: statuses, Elapsed: time.Since(start), Audit: s.Sandbox.Audit()}
	rep, err := s.compliance(ctx)
	if err != nil {
		return res, err
	}
	res.Compliance = rep
	fmt.Fprintf(out, "\nevery upload finished after %s.\n\n", res.Elapsed.Round(100*time.Millisecond))
	fmt.Fprintln(out, "── compliance report (GET /v1/compliance, from the consumers' call history) ──")
	termui.ComplianceTable(out, rep)
	fmt.Fprintln(out, "\n── the registry's own audit (GET /audit on the sandbox) ──")
	writeAudit(out, res.Audit)
	return res, nil
}

func (s *Stack) printProgress(ctx context.Context, out io.Writer, elapsed time.Duration, statuses []uploadstatus.Status) {
	fmt.Fprintf(out, "\nt=%5.1fs\n", elapsed.Seconds())
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, st := range statuses {
		var window string
		if s.RedisReal {
			window = "?"
			if p, err := s.Throttle.Peek(ctx, st.SellerID); err == nil {
				window = fmt.Sprintf("%3d/%d in window", p.InWindow, s.Options.Limit)
				if wait := p.NextFree.Sub(p.Now); wait > 0 {
					window += fmt.Sprintf(", next slot in %4.1fs", wait.Seconds())
				}
			}
		} else {
			// The in-process stand-in cannot run the read-only peek script
			// (its Lua does not know the "#!lua flags=no-writes" line), so
			// show the registry's own count instead.
			window = fmt.Sprintf("%3d/%d in window (registry's count)", s.registryInWindow(st.SellerID), s.Options.Limit)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", st.SellerID, termui.ProgressBar(st, 30), window)
	}
	tw.Flush()
}

// registryInWindow counts the seller's registrations the sandbox accepted in
// the window ending now.
func (s *Stack) registryInWindow(seller string) int {
	from := time.Now().Add(-s.Options.Window)
	n := 0
	for _, at := range s.Sandbox.AcceptedTimes(seller) {
		if at.After(from) {
			n++
		}
	}
	return n
}

func writeAudit(out io.Writer, a sandbox.Audit) {
	// The most the registry counted at once, as its policy counts.
	most, capacity := "MAX IN ANY WINDOW", a.Limit
	switch a.Policy {
	case sandbox.PolicyFixed:
		most = "MAX IN A FIXED WINDOW"
	case sandbox.PolicyTokenBucket:
		most, capacity = "MOST TOKENS TAKEN", a.Burst
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SELLER\tPRODUCTS\tACCEPTED\tREPLAYS\t429s\t%s\tFIRST → LAST\n", most)
	sellers := make([]string, 0, len(a.Sellers))
	for s := range a.Sellers {
		sellers = append(sellers, s)
	}
	slices.Sort(sellers)
	for _, s := range sellers {
		x := a.Sellers[s]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d of %d\t%s\n", s, x.Products, x.Accepted, x.Replays, x.RateLimited, x.MaxCounted, capacity,
			x.Last.Sub(x.First).Round(10*time.Millisecond))
	}
	tw.Flush()
}

func (s *Stack) upload(ctx context.Context, token, path string) (httpapi.UploadResponse, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return httpapi.UploadResponse{}, err
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", filepath.Base(path))
	if err != nil {
		return httpapi.UploadResponse{}, err
	}
	if _, err := fw.Write(data); err != nil {
		return httpapi.UploadResponse{}, err
	}
	if err := mw.Close(); err != nil {
		return httpapi.UploadResponse{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.ProducerURL+"/v1/uploads", &body)
	if err != nil {
		return httpapi.UploadResponse{}, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	var resp httpapi.UploadResponse
	return resp, do(req, token, &resp)
}

func (s *Stack) status(ctx context.Context, token, id string) (uploadstatus.Status, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.ProducerURL+"/v1/uploads/"+id, nil)
	if err != nil {
		return uploadstatus.Status{}, err
	}
	var st uploadstatus.Status
	return st, do(req, token, &st)
}

func (s *Stack) compliance(ctx context.Context) (compliance.Report, error) {
	token, err := httpapi.MintOperatorToken(s.OperatorSecret, "demo", time.Hour, time.Now())
	if err != nil {
		return compliance.Report{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.ProducerURL+"/v1/compliance", nil)
	if err != nil {
		return compliance.Report{}, err
	}
	var rep compliance.Report
	return rep, do(req, token, &rep)
}

func do(req *http.Request, token string, into any) error {
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s answered %d: %s", req.Method, req.URL.Path, resp.StatusCode, bytes.TrimSpace(raw))
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("%s %s: the answer is not the expected JSON: %w", req.Method, req.URL.Path, err)
	}
	return nil
}
