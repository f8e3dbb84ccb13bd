// Package answers sends one upload through every answer the upload service
// gives about it (the pages, the JSON, the event stream, the reports) and
// measures each: its bytes, the process CPU it took and the RSS it grew.
// producer/httpapi's hostile test and go run ./bench/hostile share it, so
// the test and the published table measure the same requests.
//
// The requests go straight to the service's handler (no network, no client
// in the measurement), authenticated with a bearer token, which the pages
// take as they take a session.
package answers

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/bulkreg/bulkreg/internal/hostile"
)

// Kinds of answers, in the order Run sends them.
const (
	Upload     = "upload_json"    // POST /v1/uploads
	DryRun     = "dry_run_json"   // POST /v1/uploads?dry_run=true
	CheckPage  = "check_page"     // POST /upload/check
	CheckFrag  = "check_fragment" // POST /upload/check with X-Fragment (the page's script)
	Register   = "register_page"  // POST /upload without confirmation
	DetailPage = "detail_page"    // GET /uploads/{id}
	Status     = "status_json"    // GET /v1/uploads/{id}
	Events     = "event_stream"   // GET /v1/uploads/{id}/events, its first event
	History    = "history_page"   // GET /uploads
	Report     = "report_xlsx"    // GET /v1/uploads/{id}/report.xlsx
	FixFile    = "fix_file_xlsx"  // GET /v1/uploads/{id}/report.xlsx?failed_only=true
	Template   = "template_xlsx"  // GET /v1/template.xlsx
	NoUpload   = "no upload: the file was refused"
	Languages  = "ko,en"
	statusNone = 0
)

// Kinds lists every kind Run measures.
var Kinds = []string{Upload, DryRun, CheckPage, CheckFrag, Register, DetailPage, Status, Events, History, Report, FixFile}

// Answer is what one answer cost.
type Answer struct {
	Kind   string        `json:"kind"`
	Lang   string        `json:"lang"`
	Status int           `json:"status"`
	Bytes  int64         `json:"bytes"`
	CPU    time.Duration `json:"cpu_ns"`
	Wall   time.Duration `json:"wall_ns"`
	// RSSGrowth is the process's peak RSS during the request less its RSS
	// before it (hostile.PeakRSS); 0 unless Options.RSS.
	RSSGrowth int64 `json:"rss_growth_bytes"`
}

// Options are how Run sends the requests.
type Options struct {
	// Token is a bearer token of the seller (httpapi.MintToken).
	Token string
	// FileName is the uploaded file's name.
	FileName string
	// Langs are the languages each answer is asked in (default ko and en).
	Langs []string
	// RSS samples the RSS of each request (a collection before each: slower).
	RSS bool
	// Kinds, when not empty, limits the answers to these (Upload is always
	// sent when an answer needs the upload).
	Kinds []string
}

// Run uploads data through h as opt.Token's seller and asks every answer
// about it in each language. An answer that needs the upload (the detail
// page, the reports) is left out when the upload was refused.
func Run(ctx context.Context, h http.Handler, data []byte, opt Options) ([]Answer, error) {
	langs := opt.Langs
	if len(langs) == 0 {
		langs = strings.Split(Languages, ",")
	}
	want := func(k string) bool {
		if len(opt.Kinds) == 0 {
			return true
		}
		for _, x := range opt.Kinds {
			if x == k {
				return true
			}
		}
		return false
	}
	var out []Answer
	measure := func(kind, lang string, req func() *http.Request, stopAt string) (*countingWriter, error) {
		w := newCountingWriter(stopAt)
		r := req()
		if lang != "" {
			r.Header.Set("Accept-Language", lang)
		}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w.cancel = cancel
		r = r.WithContext(rctx)
		var cpu, wall time.Duration
		serve := func() {
			c0, t0 := hostile.CPU(), time.Now()
			h.ServeHTTP(w, r)
			cpu, wall = hostile.CPU()-c0, time.Since(t0)
		}
		var growth int64
		if opt.RSS {
			growth = hostile.PeakRSS(serve)
		} else {
			serve()
		}
		out = append(out, Answer{Kind: kind, Lang: lang, Status: w.status(), Bytes: w.n, CPU: cpu, Wall: wall, RSSGrowth: growth})
		return w, ctx.Err()
	}
	post := func(path string, fields map[string]string, header ...string) func() *http.Request {
		return func() *http.Request {
			var body bytes.Buffer
			mw := multipart.NewWriter(&body)
			for k, v := range fields {
				_ = mw.WriteField(k, v)
			}
			fw, _ := mw.CreateFormFile("file", opt.FileName)
			_, _ = fw.Write(data)
			_ = mw.Close()
			r := httptest.NewRequest(http.MethodPost, path, &body)
			r.Header.Set("Content-Type", mw.FormDataContentType())
			r.Header.Set("Authorization", "Bearer "+opt.Token)
			for i := 0; i+1 < len(header); i += 2 {
				r.Header.Set(header[i], header[i+1])
			}
			return r
		}
	}
	get := func(path string, header ...string) func() *http.Request {
		return func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, path, nil)
			r.Header.Set("Authorization", "Bearer "+opt.Token)
			for i := 0; i+1 < len(header); i += 2 {
				r.Header.Set(header[i], header[i+1])
			}
			return r
		}
	}

	w, err := measure(Upload, "", post("/v1/uploads", nil), "")
	if err != nil {
		return out, err
	}
	var up struct{ UploadID string }
	if w.status() < 300 {
		id, ok := strings.CutPrefix(w.header.Get("Location"), "/v1/uploads/")
		if !ok || id == "" {
			return out, fmt.Errorf("the upload's answer (%d) names no upload (Location %q)", w.status(), w.header.Get("Location"))
		}
		up.UploadID = id
	}
	for _, lang := range langs {
		steps := []struct {
			kind   string
			upload bool // needs the upload
			req    func() *http.Request
			stopAt string
		}{
			{DryRun, false, post("/v1/uploads?dry_run=true", nil), ""},
			{CheckPage, false, post("/upload/check", nil), ""},
			{CheckFrag, false, post("/upload/check", nil, "X-Fragment", "1"), ""},
			{Register, false, post("/upload", nil), ""},
			{DetailPage, true, get("/uploads/" + up.UploadID), ""},
			{Status, true, get("/v1/uploads/" + up.UploadID), ""},
			{Events, true, get("/v1/uploads/"+up.UploadID+"/events", "Accept", "text/event-stream"), "event: progress"},
			{History, false, get("/uploads"), ""},
			{Report, true, get("/v1/uploads/" + up.UploadID + "/report.xlsx"), ""},
			{FixFile, true, get("/v1/uploads/" + up.UploadID + "/report.xlsx?failed_only=true"), ""},
		}
		for _, s := range steps {
			if !want(s.kind) {
				continue
			}
			if s.upload && up.UploadID == "" {
				out = append(out, Answer{Kind: s.kind, Lang: lang, Status: statusNone})
				continue
			}
			if _, err := measure(s.kind, lang, s.req, s.stopAt); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// headKept is how much of an answer countingWriter keeps (to read the
// upload's id from); the rest is counted only.
const headKept = 64 << 10

// countingWriter is an http.ResponseWriter that counts the answer's bytes
// and keeps its start; with stopAt it cancels the request once that text
// was written (an event stream's first event).
type countingWriter struct {
	mu     sync.Mutex
	header http.Header
	code   int
	n      int64
	head   bytes.Buffer
	stopAt string
	cancel func()
}

func newCountingWriter(stopAt string) *countingWriter {
	return &countingWriter{header: http.Header{}, stopAt: stopAt}
}

func (w *countingWriter) Header() http.Header { return w.header }

func (w *countingWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.code == 0 {
		w.code = code
	}
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.n += int64(len(p))
	if room := headKept - w.head.Len(); room > 0 {
		w.head.Write(p[:min(room, len(p))])
	}
	if w.stopAt != "" && w.cancel != nil && bytes.Contains(w.head.Bytes(), []byte(w.stopAt)) {
		w.cancel()
	}
	return len(p), nil
}

// Flush lets an event stream flush.
func (w *countingWriter) Flush() {}

func (w *countingWriter) status() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.code
}
