package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// refuseCaller answers a request authenticate refused: 401 (with the
// Bearer challenge) for no or a bad token or session, 403 for a
// cross-origin request, 503 when the session store did not answer.
func (s *Server) refuseCaller(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errCrossOrigin):
		s.logr(r).Info("cross-origin request refused", "path", r.URL.Path, "err", err)
		writeProblem(w, r, problem{Status: http.StatusForbidden, Code: "cross_origin", Detail: errCrossOrigin.Error()})
	case isAuthError(err):
		code := "bad_token"
		if errors.Is(err, ErrNoToken) {
			code = "no_token"
		} else {
			s.logr(r).Info("token refused", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="bulkreg"`)
		writeProblem(w, r, problem{Status: http.StatusUnauthorized, Code: code, Detail: PublicMessage(err)})
	default:
		s.logr(r).Error("sign-in check failed", "err", err)
		writeProblem(w, r, problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: "the service cannot check who you are now; try again shortly"})
	}
}

// apiCaller authenticates an API request or answers the refusal itself.
func (s *Server) apiCaller(w http.ResponseWriter, r *http.Request, unsafe bool) (caller, bool) {
	c, err := s.authenticate(r, unsafe)
	if err != nil {
		s.refuseCaller(w, r, err)
		return caller{}, false
	}
	return c, true
}

// slotPool is one kind of slot (uploads, reports): a cap for the service
// and a smaller one per seller, so one seller cannot take every slot.
type slotPool struct {
	all       chan struct{}
	perSeller *sellerSlots
	// Answers when a slot is refused: the seller's own are all taken (429),
	// or the service's (503).
	sellerCode, sellerDetail, busyDetail string
}

// The waits a refused slot's answer names in Retry-After.
const (
	sellerSlotRetry = 5 * time.Second
	busySlotRetry   = 2 * time.Second
)

func newSlotPool(all, perSeller int, sellerCode, sellerDetail, busyDetail string) *slotPool {
	return &slotPool{all: make(chan struct{}, all), perSeller: newSellerSlots(perSeller),
		sellerCode: sellerCode, sellerDetail: sellerDetail, busyDetail: busyDetail}
}

// takeSlot holds one of the seller's and one of the service's slots of the
// pool, or answers 429 or 503 itself. A refusal closes the connection, as
// every refusal before the body is read (statusRecorder.WriteHeader).
//
// The handler answers through the returned writer: it cuts off a client
// that reads the answer slower than MinDownloadRate (after DownloadGrace),
// so a client that never reads gives its slot back within seconds instead
// of the server's write timeout. release gives the slots back; call it
// deferred, so the slots return when the handler does, whatever happened
// (a parse that ran out of time, a client gone, a panic).
func (s *Server) takeSlot(w http.ResponseWriter, r *http.Request, p *slotPool, c caller) (_ http.ResponseWriter, release func(), ok bool) {
	seller := c.seller
	if !p.perSeller.take(seller) {
		w.Header().Set("Retry-After", strconv.Itoa(int(sellerSlotRetry/time.Second)))
		s.refuse(w, r, c, problem{Status: http.StatusTooManyRequests, Code: p.sellerCode, Detail: fmt.Sprintf(p.sellerDetail, p.perSeller.max)},
			"refused.title", "refused.seller", p.perSeller.max, fmtDuration(pickLang(r), sellerSlotRetry))
		return w, nil, false
	}
	select {
	case p.all <- struct{}{}:
	default:
		p.perSeller.give(seller)
		w.Header().Set("Retry-After", strconv.Itoa(int(busySlotRetry/time.Second)))
		s.refuse(w, r, c, problem{Status: http.StatusServiceUnavailable, Code: "busy", Detail: fmt.Sprintf(p.busyDetail, cap(p.all))},
			"refused.title", "refused.busy", fmtDuration(pickLang(r), busySlotRetry))
		return w, nil, false
	}
	rw := &rateWriter{ResponseWriter: w, rc: http.NewResponseController(w),
		grace: orDefault(s.DownloadGrace, DefaultDownloadGrace), rate: orDefault(s.MinDownloadRate, DefaultMinDownloadRate)}
	if s.WriteTimeout > 0 {
		rw.limit = time.Now().Add(s.WriteTimeout)
	}
	var once sync.Once
	return rw, func() {
		once.Do(func() {
			<-p.all
			p.perSeller.give(seller)
			if rw.timedOut {
				s.Metrics.slowReader(r.Pattern)
				s.logr(r).Info("answer read slower than the minimum rate; client cut off, slot given back",
					"seller", seller, "route", r.Pattern, "bytes", rw.n, "after", time.Since(rw.start).Round(time.Millisecond),
					"min_rate", rw.rate)
			}
		})
	}, true
}

// takeUploadSlot is takeSlot for an upload or a check.
func (s *Server) takeUploadSlot(w http.ResponseWriter, r *http.Request, lim *limits, c caller) (http.ResponseWriter, func(), bool) {
	return s.takeSlot(w, r, lim.uploads, c)
}

// form is an upload's multipart form: the file and the CSRF token.
type form struct {
	name string
	data []byte
	csrf string
	// confirmed is the page form's "confirmed" field: "1" when the seller
	// saw what Register will do and confirmed it (pageRegister).
	confirmed string
}

// readUploadForm reads the multipart body under the size limit and the
// minimum rate, or answers the problem itself (413, 408, 415, 400).
func (s *Server) readUploadForm(w http.ResponseWriter, r *http.Request, c caller) (form, bool) {
	seller := c.seller
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		writeProblem(w, r, problem{Status: http.StatusUnsupportedMediaType, Code: "wrong_content_type",
			Detail: fmt.Sprintf("send the spreadsheet as multipart/form-data with the file in the field \"file\"; got Content-Type %q", r.Header.Get("Content-Type"))})
		return form{}, false
	}
	start := time.Now()
	body := &rateReader{r: r.Body, rc: http.NewResponseController(w), start: start,
		grace: orDefault(s.UploadGrace, DefaultUploadGrace), rate: orDefault(s.MinUploadRate, DefaultMinUploadRate)}
	if s.ReadTimeout > 0 {
		body.limit = start.Add(s.ReadTimeout)
	}
	r.Body = http.MaxBytesReader(w, struct {
		io.Reader
		io.Closer
	}{body, r.Body}, s.maxFile()+multipartSlack)
	f, err := s.readFile(r, params["boundary"])
	if err != nil {
		var tooBig *http.MaxBytesError
		var big errTooLarge
		switch {
		case errors.Is(err, errFormTooLarge):
			w.Header().Set("Connection", "close")
			writeProblem(w, r, problem{Status: http.StatusRequestEntityTooLarge, Code: "form_too_large", Detail: err.Error()})
		case errors.Is(err, errTooManyFields):
			w.Header().Set("Connection", "close")
			writeProblem(w, r, problem{Status: http.StatusBadRequest, Code: "too_many_fields", Detail: err.Error()})
		case body.timedOut:
			s.logr(r).Info("upload body too slow; cut off", "seller", seller, "bytes", body.n, "after", time.Since(start).Round(time.Millisecond))
			w.Header().Set("Connection", "close")
			s.refuse(w, r, c, problem{Status: http.StatusRequestTimeout, Code: "too_slow",
				Detail: fmt.Sprintf("the file arrived slower than %d bytes per second; send it again over a faster connection", body.rate)},
				"refused.slow.title", "refused.slow")
		case errors.As(err, &tooBig), errors.As(err, &big):
			s.refuse(w, r, c, problem{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Detail: fmt.Sprintf("the file is larger than %d bytes", s.maxFile())},
				"refused.large.title", "refused.large", byteText(s.maxFile()))
		default:
			writeProblem(w, r, problem{Status: http.StatusBadRequest, Code: "bad_request", Detail: err.Error()})
		}
		return form{}, false
	}
	return f, true
}

type errTooLarge struct{}

func (errTooLarge) Error() string { return "file too large" }

// The form around the file is bounded before the file: a body of part
// headers (10 MiB of them, or a million empty fields) is refused after
// formBudget bytes or maxFormParts parts, without reading the rest.
// The pages' forms send three small fields before the file; an API client
// the file alone.
const (
	// formBudget bounds the bytes of the form before the file's content:
	// every part's header and the fields before the file.
	formBudget = 64 << 10
	// maxFormParts bounds the parts read before the file.
	maxFormParts = 16
)

var (
	errFormTooLarge  = fmt.Errorf("the form's fields and part headers before the file take more than %d bytes: send the file in a field named \"file\", with at most a few small fields", formBudget)
	errTooManyFields = fmt.Errorf("the form has more than %d fields before the file: send the file in a field named \"file\", with at most a few small fields", maxFormParts)
)

// formReader gives the multipart reader at most budget bytes until open is
// set (the file's part has begun), then the rest of the body.
type formReader struct {
	r      io.Reader
	n      int64
	budget int64
	open   bool
}

func (f *formReader) Read(p []byte) (int, error) {
	if !f.open {
		left := f.budget - f.n
		if left <= 0 {
			return 0, errFormTooLarge
		}
		p = p[:min(int64(len(p)), left)]
	}
	n, err := f.r.Read(p)
	f.n += int64(n)
	return n, err
}

// readFile streams the multipart body to the part named "file", keeping
// the CSRF token field on the way (the pages' forms put it first). The
// parts before the file are bounded (formBudget, maxFormParts); nothing
// after the file is read.
func (s *Server) readFile(r *http.Request, boundary string) (form, error) {
	body := &formReader{r: r.Body, budget: formBudget}
	mr := multipart.NewReader(body, boundary)
	var f form
	for parts := 0; ; parts++ {
		if parts == maxFormParts {
			return form{}, errTooManyFields
		}
		part, err := mr.NextPart()
		if err == io.EOF {
			return form{}, errors.New(`no field "file" in the form: send the spreadsheet in a field named "file"`)
		}
		if errors.Is(err, errFormTooLarge) {
			return form{}, errFormTooLarge
		}
		if err != nil {
			return form{}, fmt.Errorf("read the form: %w", err)
		}
		switch part.FormName() {
		case "file":
			body.open = true
			// Sized once from the request's length: a buffer grown by
			// doubling to 10 MiB leaves 16 MiB of garbage behind it.
			var buf bytes.Buffer
			if n := r.ContentLength; n > 0 {
				buf.Grow(int(min(n, s.maxFile()+1)))
			}
			n, err := io.Copy(&buf, io.LimitReader(part, s.maxFile()+1))
			if err != nil {
				return form{}, fmt.Errorf("read the file: %w", err)
			}
			if n > s.maxFile() {
				return form{}, errTooLarge{}
			}
			// Some browsers send the client's full path; only the name is
			// kept, and only its start: it is stored with the upload.
			f.name = cutUTF8(path.Base(strings.ReplaceAll(part.FileName(), `\`, "/")), maxFileNameLen)
			f.data = buf.Bytes()
			return f, nil
		case "csrf_token":
			b, err := io.ReadAll(io.LimitReader(part, 256))
			if err != nil {
				return form{}, fmt.Errorf("read the form: %w", err)
			}
			f.csrf = string(b)
		case "confirmed":
			b, err := io.ReadAll(io.LimitReader(part, 16))
			if err != nil {
				return form{}, fmt.Errorf("read the form: %w", err)
			}
			f.confirmed = string(b)
		default:
			// Other fields (a "seller" among them) are ignored: the seller
			// comes from the token or the session only.
			if _, err := io.Copy(io.Discard, part); err != nil {
				return form{}, fmt.Errorf("read the form: %w", err)
			}
		}
	}
}

// UploadResponse is the answer to POST /v1/uploads.
type UploadResponse struct {
	UploadID  string `json:"upload_id"`
	Duplicate bool   `json:"duplicate"`
	Resumed   bool   `json:"resumed,omitempty"`
	State     string `json:"state"`
	Total     int    `json:"total"`
	Published int    `json:"published"`
	Invalid   int    `json:"invalid"`
	// AlreadyRegistered: rows the seller registered before with the same
	// content; not published again.
	AlreadyRegistered int              `json:"already_registered"`
	Problems          []upload.Problem `json:"problems,omitempty"`
	Warnings          []upload.Problem `json:"warnings,omitempty"`
	// ProblemsOmitted and WarningsOmitted count the problems and warnings
	// left out of the lists above (jsonProblemsBudget); the report lists
	// every row's.
	ProblemsOmitted int    `json:"problems_omitted,omitempty"`
	WarningsOmitted int    `json:"warnings_omitted,omitempty"`
	StatusURL       string `json:"status_url"`
}

// CheckResponse is the answer to POST /v1/uploads?dry_run=true: what the
// upload would do. Nothing is recorded or published.
type CheckResponse struct {
	DryRun            bool             `json:"dry_run"`
	Total             int              `json:"total"`
	Valid             int              `json:"valid"`
	Invalid           int              `json:"invalid"`
	AlreadyRegistered int              `json:"already_registered"`
	Problems          []upload.Problem `json:"problems"`
	Warnings          []upload.Problem `json:"warnings"`
	// ProblemsOmitted and WarningsOmitted count the problems and warnings
	// left out of the lists above (jsonProblemsBudget).
	ProblemsOmitted int `json:"problems_omitted,omitempty"`
	WarningsOmitted int `json:"warnings_omitted,omitempty"`
}

func (s *Server) apiPostUpload(lim *limits) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Authenticate first: a request without a valid token or session
		// must not hold a slot, nor have its body read.
		c, ok := s.apiCaller(w, r, true)
		if !ok {
			return
		}
		// Before a slot or the body: a refused parameter costs nothing.
		var dryRun, strict bool
		if !boolParams(w, r, []string{"dry_run", "strict"}, &dryRun, &strict) {
			return
		}
		w, release, ok := s.takeUploadSlot(w, r, lim, c)
		if !ok {
			return
		}
		defer release()
		f, ok := s.readUploadForm(w, r, c)
		if !ok {
			return
		}
		if !c.csrfOK(r, f.csrf) {
			writeProblem(w, r, problem{Status: http.StatusForbidden, Code: "csrf", Detail: errCSRF.Error()})
			return
		}
		done, err := s.work.take(r.Context(), c.seller)
		if err != nil {
			return // the client went away while the seller's other upload was handled
		}
		defer done()
		if dryRun {
			chk, err := s.Uploader.Check(r.Context(), c.seller, f.data)
			if err != nil {
				s.uploadError(w, r, "", err)
				return
			}
			resp := CheckResponse{DryRun: true, Total: len(chk.Rows), Valid: chk.Valid, Invalid: chk.Invalid, AlreadyRegistered: chk.AlreadyRegistered}
			resp.Problems, resp.ProblemsOmitted = budgetProblems(chk.Problems, jsonProblemsBudget)
			resp.Warnings, resp.WarningsOmitted = budgetProblems(chk.Warnings, jsonWarningsBudget)
			writeJSON(w, http.StatusOK, resp)
			return
		}
		res, err := s.Uploader.Upload(r.Context(), upload.Request{SellerID: c.seller, FileName: f.name, Data: f.data, Strict: strict})
		if err != nil {
			s.uploadError(w, r, res.UploadID, err)
			return
		}
		resp := UploadResponse{UploadID: res.UploadID, Duplicate: res.Duplicate, Resumed: res.Resumed, State: res.Upload.State,
			Total: res.Upload.Total, Published: res.Published, Invalid: res.Invalid, AlreadyRegistered: res.AlreadyRegistered,
			StatusURL: "/v1/uploads/" + res.UploadID}
		if res.Sheet != nil {
			resp.Warnings = upload.Problems(res.Sheet.Warnings)
			for _, row := range res.Sheet.Rows {
				resp.Problems = append(resp.Problems, upload.Problems(row.Problems)...)
			}
			resp.Problems, resp.ProblemsOmitted = budgetProblems(resp.Problems, jsonProblemsBudget)
			resp.Warnings, resp.WarningsOmitted = budgetProblems(resp.Warnings, jsonWarningsBudget)
		}
		code := http.StatusCreated
		if res.Duplicate {
			code = http.StatusOK
		}
		w.Header().Set("Location", resp.StatusURL)
		writeJSON(w, code, resp)
	}
}

// The JSON answers' lists of problems are bounded in bytes: a file's
// problems are at most one per field of 500 rows, but what each quotes is
// the seller's, and the answer stays under the 1 MiB ceiling whatever it is.
const (
	jsonProblemsBudget = 768 << 10
	jsonWarningsBudget = 64 << 10
)

// budgetProblems keeps ps's first problems while their JSON (escapedLen,
// a JSON escape's worst) fits budget bytes, and counts the rest.
func budgetProblems(ps []upload.Problem, budget int) ([]upload.Problem, int) {
	used := 0
	for i, p := range ps {
		used += 80 + escapedLen(p.Column) + escapedLen(p.Cell) + escapedLen(p.Code) + escapedLen(p.Message)
		for k, v := range p.Params {
			used += 8 + escapedLen(k) + escapedLen(v)
		}
		if used > budget {
			return ps[:i], len(ps) - i
		}
	}
	return ps, 0
}

// uploadError answers a failed upload or check.
func (s *Server) uploadError(w http.ResponseWriter, r *http.Request, id string, err error) {
	if ref, ok := upload.Refused(err); ok {
		writeProblem(w, r, problem{Status: http.StatusUnprocessableEntity, Code: ref.Code, Detail: ref.Message, Problems: ref.Problems})
		return
	}
	switch sf, full := upload.ShareFull(err); {
	case full:
		// The seller's own uploads fill their share: their answer alone, a
		// 429 that says how much, when there is room again and what to do.
		setShareRetryAfter(w, sf)
		writeProblem(w, r, problem{Status: http.StatusTooManyRequests, Code: "share_full", UploadID: id, Detail: sf.Error()})
	case errors.Is(err, upload.ErrInProgress):
		writeProblem(w, r, problem{Status: http.StatusConflict, Code: "in_progress", Detail: err.Error(), UploadID: id})
	case errors.Is(err, upload.ErrPublish):
		// err names brokers and their errors: the log has it (Upload logged
		// it), the seller gets what to do.
		w.Header().Set("Retry-After", "5")
		writeProblem(w, r, problem{Status: http.StatusServiceUnavailable, Code: "publish_failed", UploadID: id,
			Detail: "the rows could not be queued for registration now; send the same file again in a few seconds (nothing is registered twice)"})
	default:
		s.logr(r).Error("upload failed", "upload_id", id, "err", err)
		writeProblem(w, r, problem{Status: http.StatusServiceUnavailable, Code: "unavailable", UploadID: id,
			Detail: "the upload could not be processed now; try again shortly"})
	}
}

// checkOwner answers whether id is the seller's upload (nil) or not
// (upload.ErrNotFound) by reading the upload's fields alone, one command
// (HGETALL of its small meta hash), before anything reads its rows: a 404
// for another seller's upload of 500 rows then costs what a 404 for a
// made-up id does, so neither its time nor the Redis work tells that the
// upload exists. Status checks the owner again, after reading.
func (s *Server) checkOwner(ctx context.Context, seller, id string) error {
	if s.Uploader.Index == nil {
		return nil
	}
	sums, err := s.Uploader.Index.Summaries(ctx, []string{id})
	if err != nil {
		return err
	}
	if len(sums) != 1 || sums[0].SellerID != seller {
		return fmt.Errorf("upload %q: %w", id, upload.ErrNotFound)
	}
	return nil
}

// ownUpload loads the caller's upload with its finish estimate, or answers
// 404 (another seller's upload is "not found", so ids do not leak) or 503.
func (s *Server) ownUpload(w http.ResponseWriter, r *http.Request, seller string) (upload.Progress, bool) {
	id := r.PathValue("id")
	var p upload.Progress
	err := s.checkOwner(r.Context(), seller, id)
	if err == nil {
		p, err = s.Uploader.Progress(r.Context(), seller, id)
	}
	if errors.Is(err, upload.ErrNotFound) {
		writeProblem(w, r, problem{Status: http.StatusNotFound, Code: "not_found", Detail: fmt.Sprintf("no upload %q", id)})
		return upload.Progress{}, false
	}
	if err != nil {
		s.logr(r).Error("read upload status", "upload_id", id, "err", err)
		writeProblem(w, r, problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: "the upload status cannot be read now; try again shortly"})
		return upload.Progress{}, false
	}
	if p.Rows == nil {
		p.Rows = []uploadstatus.RowResult{}
	}
	return p, true
}

func (s *Server) apiGetUpload(w http.ResponseWriter, r *http.Request) {
	c, ok := s.apiCaller(w, r, false)
	if !ok {
		return
	}
	if p, ok := s.ownUpload(w, r, c.seller); ok {
		writeJSON(w, http.StatusOK, p)
	}
}

// ListResponse is the answer to GET /v1/uploads.
type ListResponse struct {
	Uploads []UploadSummary `json:"uploads"`
	// NextCursor fetches the next (older) page: ?cursor=…; absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// UploadSummary is one upload of a listing: its fields and counts, not its rows.
type UploadSummary struct {
	ID                string    `json:"id"`
	FileName          string    `json:"file_name"`
	CreatedAt         time.Time `json:"created_at"`
	State             string    `json:"state"`
	Total             int       `json:"total"`
	Registered        int       `json:"registered"`
	AlreadyRegistered int       `json:"already_registered"`
	Failed            int       `json:"failed"`
	// RegisteredTwice counts the registered rows whose SKU the marketplace
	// now holds twice (counted in Registered too).
	RegisteredTwice int    `json:"registered_twice"`
	Waiting         int    `json:"waiting"`
	URL             string `json:"url"`
}

func summary(st uploadstatus.Status) UploadSummary {
	return UploadSummary{ID: st.ID, FileName: st.FileName, CreatedAt: st.CreatedAt, State: st.State, Total: st.Total,
		Registered: st.Registered, AlreadyRegistered: st.AlreadyRegistered, Failed: st.Failed, RegisteredTwice: st.Twice, Waiting: st.Waiting, URL: "/v1/uploads/" + st.ID}
}

func (s *Server) apiListUploads(w http.ResponseWriter, r *http.Request) {
	c, ok := s.apiCaller(w, r, false)
	if !ok {
		return
	}
	q := r.URL.Query()
	size := upload.DefaultPageSize
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > upload.MaxPageSize {
			writeProblem(w, r, problem{Status: http.StatusBadRequest, Code: "bad_limit", Detail: fmt.Sprintf("limit must be a whole number from 1 to %d, got %q", upload.MaxPageSize, v)})
			return
		}
		size = n
	}
	page, err := s.Uploader.List(r.Context(), c.seller, q.Get("cursor"), size)
	if errors.Is(err, upload.ErrBadCursor) {
		writeProblem(w, r, problem{Status: http.StatusBadRequest, Code: "bad_cursor", Detail: err.Error()})
		return
	}
	if err != nil {
		s.logr(r).Error("list uploads", "seller", c.seller, "err", err)
		writeProblem(w, r, problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: "your uploads cannot be read now; try again shortly"})
		return
	}
	resp := ListResponse{Uploads: make([]UploadSummary, 0, len(page.Uploads)), NextCursor: page.Next}
	for _, st := range page.Uploads {
		resp.Uploads = append(resp.Uploads, summary(st))
	}
	if page.Next != "" {
		next := url.Values{"cursor": {page.Next}, "limit": {strconv.Itoa(size)}}
		w.Header().Set("Link", fmt.Sprintf(`</v1/uploads?%s>; rel="next"`, next.Encode()))
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) apiReport(lim *limits) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := s.apiCaller(w, r, false)
		if !ok {
			return
		}
		var failedOnly bool
		if !boolParams(w, r, []string{"failed_only"}, &failedOnly) {
			return
		}
		// Another seller's upload is not found before a slot is taken.
		err := s.checkOwner(r.Context(), c.seller, r.PathValue("id"))
		var st uploadstatus.Status
		if err == nil {
			var release func()
			if w, release, ok = s.takeSlot(w, r, lim.reports, c); !ok {
				return
			}
			defer release()
			st, err = s.Uploader.Status(r.Context(), c.seller, r.PathValue("id"))
		}
		if errors.Is(err, upload.ErrNotFound) {
			// A report link is followed in the browser (a page's link, kept
			// after its upload expired): a page with a way back, not JSON.
			if navigated(r) {
				s.renderMessage(w, r, c, http.StatusNotFound, "notfound.title", "notfound.body")
				return
			}
			writeProblem(w, r, problem{Status: http.StatusNotFound, Code: "not_found", Detail: fmt.Sprintf("no upload %q", r.PathValue("id"))})
			return
		}
		var rep upload.Report
		if err == nil {
			rep, err = s.Uploader.BuildReportIn(r.Context(), reportLang(r), s.zone(r), st, failedOnly)
		}
		if err != nil {
			s.logr(r).Error("build report", "upload_id", r.PathValue("id"), "err", err)
			writeProblem(w, r, problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: "the report cannot be built now; try again shortly"})
			return
		}
		w.Header().Set("Content-Type", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
		w.Header().Set("Content-Disposition", upload.ContentDisposition(rep.Name))
		w.Header().Set("Cache-Control", "private, no-store")
		w.Write(rep.XLSX)
	}
}

// navigated reports whether the request is a browser's navigation (a link
// followed, an address typed), which wants a page, not JSON.
func navigated(r *http.Request) bool {
	return r.Header.Get("Sec-Fetch-Mode") == "navigate" || strings.Contains(r.Header.Get("Accept"), "text/html")
}

// templateFile is the upload template, written once: every request is
// served the same bytes (a 304 when the client has them), so the
// unauthenticated download costs a copy, not a workbook written anew.
type templateFile struct {
	xlsx []byte
	etag string
	err  error
}

// templateCacheControl lets a client and a shared cache keep the template
// for an hour, then ask again with its ETag (a 304 when unchanged): the
// template changes only with a new release or new categories, and its
// ETag with it.
const templateCacheControl = "public, max-age=3600"

func buildTemplate(categories []upload.Category) templateFile {
	var buf bytes.Buffer
	if err := upload.WriteTemplate(&buf, categories); err != nil {
		return templateFile{err: fmt.Errorf("write the upload template: %w", err)}
	}
	sum := sha256.Sum256(buf.Bytes())
	return templateFile{xlsx: buf.Bytes(), etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

func (s *Server) apiTemplate(w http.ResponseWriter, r *http.Request) {
	if s.templateXLSX.err != nil {
		s.logr(r).Error("template", "err", s.templateXLSX.err)
		writeProblem(w, r, problem{Status: http.StatusInternalServerError, Code: "template_failed", Detail: "the template could not be written"})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
	h.Set("Content-Disposition", `attachment; filename="bulkreg-template.xlsx"`)
	h.Set("Cache-Control", templateCacheControl)
	h.Set("ETag", s.templateXLSX.etag)
	// ServeContent answers If-None-Match (304) and ranges from the bytes.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(s.templateXLSX.xlsx))
}

func (s *Server) apiCompliance(w http.ResponseWriter, r *http.Request) {
	if s.Compliance == nil {
		writeProblem(w, r, problem{Status: http.StatusNotFound, Code: "not_found", Detail: "this service does not serve the compliance report"})
		return
	}
	s.Compliance.ServeHTTP(w, r)
}

func (s *Server) apiOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Write(s.openapi)
}

// cutUTF8 cuts s to at most n bytes without splitting a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// setShareRetryAfter says in Retry-After, in whole seconds rounded up, when
// enough of the seller's uploads expire for the refused one to fit; nothing
// when it never fits (the file alone is larger than the share).
func setShareRetryAfter(w http.ResponseWriter, sf *uploadstatus.ShareFullError) {
	if sf.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((sf.RetryAfter+time.Second-1)/time.Second), 10))
	}
}

// sharePage answers a page's upload that err refused because the seller's
// share of the upload storage is full: a 429 page in the seller's language
// that says how much they keep, when there is room again and what to do.
// It reports whether it answered.
func (s *Server) sharePage(w http.ResponseWriter, r *http.Request, c caller, err error) bool {
	sf, full := upload.ShareFull(err)
	if !full {
		return false
	}
	setShareRetryAfter(w, sf)
	d := s.data(r, c, "upload", "share.title")
	share := msg(d.Lang, "share.size", byteText(sf.Share.Bytes))
	if sf.Share.Uploads > 0 && sf.Share.Bytes > 0 {
		share = msg(d.Lang, "share.both", sf.Share.Uploads, byteText(sf.Share.Bytes))
	} else if sf.Share.Uploads > 0 {
		share = msg(d.Lang, "share.count", sf.Share.Uploads)
	}
	if sf.RetryAfter > 0 {
		d.Body = msg(d.Lang, "share.body", sf.Uploads, byteText(sf.Bytes), share, fmtWait(d.Lang, sf.RetryAfter))
	} else {
		d.Body = msg(d.Lang, "share.body.never", byteText(sf.Need), share)
	}
	s.render(w, r, http.StatusTooManyRequests, "message", d)
	return true
}

// byteText says a size in MB (a seller reads sizes as the file manager
// shows them).
func byteText(n int64) string {
	if n < 1<<20 {
		return strconv.FormatInt((n+1023)>>10, 10) + " KB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MB"
}

// fmtWait says a wait of minutes to days the way a seller reads it.
func fmtWait(lang string, d time.Duration) string {
	switch {
	case d < time.Hour:
		return fmtDuration(lang, d)
	case d < 48*time.Hour:
		return msg(lang, "share.hours", int((d+time.Hour-1)/time.Hour))
	}
	return msg(lang, "share.days", int((d+24*time.Hour-1)/(24*time.Hour)))
}
