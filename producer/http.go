package producer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Server is the HTTP upload service. Its zero value is not usable: set
// Uploader, Auth and Gatherer.
type Server struct {
	Uploader *Uploader
	Auth     Auth
	// MaxFileSize is the largest spreadsheet accepted; the request body may
	// be this plus 64 KiB of multipart framing. Default 10 MiB.
	MaxFileSize int64
	Gatherer    prometheus.Gatherer // what /metrics serves
	Metrics     *Metrics
	Logger      *slog.Logger
	// Health reports whether the service can work (Redis answers); nil = always.
	Health func(ctx context.Context) error
	// Compliance, when set, serves GET /v1/compliance.
	Compliance http.Handler
	// MaxUploads is the most uploads handled at once; each holds its file in
	// memory, so more are answered 503 with Retry-After. Default 16.
	MaxUploads int
}

const multipartSlack = 64 << 10

func (s *Server) maxFile() int64 {
	if s.MaxFileSize > 0 {
		return s.MaxFileSize
	}
	return 10 << 20
}

// Handler routes the service.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	n := s.MaxUploads
	if n <= 0 {
		n = 16
	}
	slots := make(chan struct{}, n)
	mux.Handle("POST /v1/uploads", s.route("upload", func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			s.postUpload(w, r)
		default:
			w.Header().Set("Retry-After", "2")
			writeError(w, http.StatusServiceUnavailable, "busy", fmt.Sprintf("%d uploads are being handled; try again in a few seconds", n))
		}
	}))
	mux.Handle("GET /v1/uploads/{id}", s.route("status", s.getUpload))
	mux.Handle("GET /v1/uploads/{id}/report.xlsx", s.route("report", s.getReport))
	mux.Handle("GET /v1/template.xlsx", s.route("template", s.getTemplate))
	if s.Compliance != nil {
		mux.Handle("GET /v1/compliance", s.Compliance)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.Health != nil {
			if err := s.Health(r.Context()); err != nil {
				writeError(w, http.StatusServiceUnavailable, "unhealthy", err.Error())
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return mux
}

// NewHTTPServer wraps h in an http.Server with timeouts, so a slow client
// cannot hold a connection (slowloris) and a stuck upload cannot hold a
// goroutine forever.
func NewHTTPServer(addr string, h http.Handler, readTimeout, writeTimeout time.Duration) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: min(10*time.Second, readTimeout),
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *Server) route(name string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h(rec, r)
		s.Metrics.request(name, rec.code)
	})
}

func (s *Server) log() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.New(slog.DiscardHandler)
}

type apiError struct {
	Code     string    `json:"code"`
	Message  string    `json:"message"`
	Problems []Problem `json:"problems,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]apiError{"error": {Code: code, Message: msg}})
}

// seller authenticates the request or answers 401 itself.
func (s *Server) seller(w http.ResponseWriter, r *http.Request) (string, bool) {
	seller, err := s.Auth.Seller(r)
	if err != nil {
		code := "bad_token"
		if errors.Is(err, ErrNoToken) {
			code = "no_token"
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="bulkreg"`)
		writeError(w, http.StatusUnauthorized, code, err.Error())
		return "", false
	}
	return seller, true
}

// UploadResponse is the answer to POST /v1/uploads.
type UploadResponse struct {
	UploadID  string    `json:"upload_id"`
	Duplicate bool      `json:"duplicate"`
	Resumed   bool      `json:"resumed,omitempty"`
	State     string    `json:"state"`
	Total     int       `json:"total"`
	Published int       `json:"published"`
	Invalid   int       `json:"invalid"`
	Problems  []Problem `json:"problems,omitempty"`
	Warnings  []Problem `json:"warnings,omitempty"`
	StatusURL string    `json:"status_url"`
}

func (s *Server) postUpload(w http.ResponseWriter, r *http.Request) {
	seller, ok := s.seller(w, r)
	if !ok {
		return
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		writeError(w, http.StatusUnsupportedMediaType, "wrong_content_type",
			fmt.Sprintf("send the spreadsheet as multipart/form-data with the file in the field \"file\"; got Content-Type %q", r.Header.Get("Content-Type")))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.maxFile()+multipartSlack)
	strict := r.URL.Query().Get("strict") == "true"
	name, data, err := s.readFile(r)
	if err != nil {
		var tooBig *http.MaxBytesError
		var big errTooLarge
		switch {
		case errors.As(err, &tooBig), errors.As(err, &big):
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the file is larger than %d bytes", s.maxFile()))
		default:
			writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		}
		return
	}
	res, err := s.Uploader.Upload(r.Context(), Request{SellerID: seller, FileName: name, Data: data, Strict: strict})
	if err != nil {
		s.uploadError(w, res, err)
		return
	}
	resp := UploadResponse{UploadID: res.UploadID, Duplicate: res.Duplicate, Resumed: res.Resumed, State: res.Upload.State,
		Total: res.Upload.Total, Published: res.Published, Invalid: res.Invalid, StatusURL: "/v1/uploads/" + res.UploadID}
	if res.Sheet != nil {
		resp.Warnings = Problems(res.Sheet.Warnings)
		for _, row := range res.Sheet.Rows {
			resp.Problems = append(resp.Problems, Problems(row.Problems)...)
		}
	}
	code := http.StatusCreated
	if res.Duplicate {
		code = http.StatusOK
	}
	writeJSON(w, code, resp)
}

type errTooLarge struct{}

func (errTooLarge) Error() string { return "file too large" }

// readFile streams the multipart body to the part named "file".
func (s *Server) readFile(r *http.Request) (string, []byte, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return "", nil, fmt.Errorf("the body is not multipart/form-data: %w", err)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return "", nil, errors.New(`no field "file" in the form: send the spreadsheet in a field named "file"`)
		}
		if err != nil {
			return "", nil, fmt.Errorf("read the form: %w", err)
		}
		if part.FormName() != "file" {
			// Other fields (a "seller" among them) are ignored: the seller comes from the token only.
			if _, err := io.Copy(io.Discard, part); err != nil {
				return "", nil, fmt.Errorf("read the form: %w", err)
			}
			continue
		}
		var buf bytes.Buffer
		n, err := io.Copy(&buf, io.LimitReader(part, s.maxFile()+1))
		if err != nil {
			return "", nil, fmt.Errorf("read the file: %w", err)
		}
		if n > s.maxFile() {
			return "", nil, errTooLarge{}
		}
		// Some browsers send the client's full path; only the name is kept.
		name := path.Base(strings.ReplaceAll(part.FileName(), `\`, "/"))
		return name, buf.Bytes(), nil
	}
}

func (s *Server) uploadError(w http.ResponseWriter, res Result, err error) {
	var fe *excel.FileError
	var ir *InvalidRowsError
	switch {
	case errors.As(err, &fe):
		writeJSON(w, http.StatusUnprocessableEntity, map[string]apiError{"error": {Code: fe.Code, Message: fe.Error(), Problems: Problems(fe.Problems)}})
	case errors.As(err, &ir):
		writeJSON(w, http.StatusUnprocessableEntity, map[string]apiError{"error": {Code: "invalid_rows", Message: ir.Error(), Problems: Problems(ir.Problems)}})
	case errors.Is(err, ErrRefused):
		writeError(w, http.StatusUnprocessableEntity, "refused", err.Error())
	case errors.Is(err, ErrInProgress):
		writeError(w, http.StatusConflict, "in_progress", err.Error())
	case errors.Is(err, ErrPublish):
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": apiError{Code: "publish_failed", Message: err.Error()}, "upload_id": res.UploadID})
	default:
		s.log().Error("upload failed", "upload_id", res.UploadID, "err", err)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the upload could not be processed now; try again shortly")
	}
}

// ownStatus loads an upload the seller owns; any other upload is "not
// found" so ids of other sellers' uploads do not leak.
func (s *Server) ownStatus(w http.ResponseWriter, r *http.Request) (uploadstatus.Status, bool) {
	seller, ok := s.seller(w, r)
	if !ok {
		return uploadstatus.Status{}, false
	}
	id := r.PathValue("id")
	st, err := s.Uploader.Status.Get(r.Context(), id)
	if errors.Is(err, uploadstatus.ErrNotFound) || (err == nil && st.SellerID != seller) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no upload %q", id))
		return uploadstatus.Status{}, false
	}
	if err != nil {
		s.log().Error("read upload status", "upload_id", id, "err", err)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the upload status cannot be read now; try again shortly")
		return uploadstatus.Status{}, false
	}
	return st, true
}

func (s *Server) getUpload(w http.ResponseWriter, r *http.Request) {
	st, ok := s.ownStatus(w, r)
	if !ok {
		return
	}
	if st.Rows == nil {
		st.Rows = []uploadstatus.RowResult{}
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) getReport(w http.ResponseWriter, r *http.Request) {
	st, ok := s.ownStatus(w, r)
	if !ok {
		return
	}
	cells, err := s.Uploader.Status.Cells(r.Context(), st.ID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the upload's rows cannot be read now; try again shortly")
		return
	}
	var buf bytes.Buffer
	if err := excel.WriteReport(&buf, st.Header, ReportRows(st, cells), r.URL.Query().Get("failed_only") == "true"); err != nil {
		s.log().Error("write report", "upload_id", st.ID, "err", err)
		writeError(w, http.StatusInternalServerError, "report_failed", "the report could not be written")
		return
	}
	w.Header().Set("Content-Type", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="bulkreg-%s-report.xlsx"`, st.ID))
	w.Write(buf.Bytes())
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	if err := excel.WriteTemplate(&buf); err != nil {
		writeError(w, http.StatusInternalServerError, "template_failed", "the template could not be written")
		return
	}
	w.Header().Set("Content-Type", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
	w.Header().Set("Content-Disposition", `attachment; filename="bulkreg-template.xlsx"`)
	w.Write(buf.Bytes())
}

// ReportRows joins an upload's original cells with its row results: one
// report row per spreadsheet row, "registered", "failed" or "waiting".
func ReportRows(st uploadstatus.Status, cells map[int][]string) []excel.ReportRow {
	results := make(map[int]uploadstatus.RowResult, len(st.Rows))
	for _, r := range st.Rows {
		results[r.Row] = r
	}
	nums := make([]int, 0, len(cells))
	for n := range cells {
		nums = append(nums, n)
	}
	for n := range results {
		if _, ok := cells[n]; !ok {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	out := make([]excel.ReportRow, 0, len(nums))
	for _, n := range nums {
		rr := excel.ReportRow{Number: n, Cells: cells[n], Result: "waiting"}
		if res, ok := results[n]; ok {
			rr.Result = res.State
			if res.State == uploadstatus.Failed {
				rr.Reason = res.Reason
			}
		}
		out = append(out, rr)
	}
	return out
}
