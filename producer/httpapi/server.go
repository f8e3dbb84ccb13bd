// Package httpapi is the HTTP side of the upload service (`producer serve`):
// the JSON API integrators call (problem+json errors, an OpenAPI document,
// server-sent events), the pages sellers use (upload, check, history, live
// progress; Korean and English), and their authentication: bearer tokens
// (JWT) for the API, a sign-in link and a session cookie for the pages. It
// parses, publishes and reads nothing itself: every use case is a call to
// package upload.
package httpapi

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkreg/bulkreg/internal/logctx"
	"github.com/bulkreg/bulkreg/internal/sellertime"
	"github.com/bulkreg/bulkreg/producer/upload"
)

//go:embed web/templates/*.html web/static/* openapi.json
var webFiles embed.FS

// Server is the HTTP upload service. Set Uploader and Auth; every other
// field's zero value means its documented default.
type Server struct {
	Uploader *upload.Uploader
	Auth     Auth
	// Sessions keeps the pages' sign-in sessions and spent sign-in links;
	// nil: no sign-in, the pages ask to sign in and the API takes bearer
	// tokens only.
	Sessions SessionStore
	// SessionTTL is how long a page session lasts after signing in. Default 8 h.
	SessionTTL time.Duration
	// LinkMaxAge is the longest a sign-in link may be valid (its token's
	// exp − now); a longer-lived token is not a link. Default 15 min.
	LinkMaxAge time.Duration
	// SellerCenterURL is where sellers sign in to the seller center that
	// hands out sign-in links: every page that asks to sign in links to it.
	// Empty: those pages say in words where to get a link.
	SellerCenterURL string
	// SecureCookies marks the session cookie Secure (and names it with the
	// __Host- prefix) on every answer; set it behind a proxy that ends TLS.
	// A request that arrives over TLS gets a Secure cookie anyway.
	SecureCookies bool
	// Categories are the marketplace's categories: the template lists them
	// and its category column takes only their codes. None: any code of
	// the rule's form, and the template says where codes are found.
	Categories []upload.Category
	// MaxFileSize is the largest spreadsheet accepted; the request body may
	// be this plus 64 KiB of multipart framing. Default 10 MiB.
	MaxFileSize int64
	Metrics     *Metrics
	Logger      *slog.Logger
	// Compliance, when set, serves GET /v1/compliance (operators).
	Compliance http.Handler
	// MaxUploads is the most uploads (and checks) handled at once; each
	// holds its file in memory, so more are answered 503 with Retry-After.
	// Default 16.
	MaxUploads int
	// MaxUploadsPerSeller is the most uploads of one seller handled at once;
	// more are answered 429, so one seller cannot take every upload slot.
	// Default 2.
	MaxUploadsPerSeller int
	// MinUploadRate is the slowest average rate, in bytes per second, at
	// which an upload's body may arrive after UploadGrace; a slower client
	// is cut off (408) and gives its slot back. Default 16 KiB/s: the
	// 500-row template file (about 100 KB) takes a few seconds at that rate.
	MinUploadRate int64
	// UploadGrace is the time a body may take before MinUploadRate applies
	// (connection set-up, a slow start). Default 10 s.
	UploadGrace time.Duration
	// ReadTimeout, when set, is the server's own limit on reading a request
	// (NewHTTPServer's readTimeout): the rate deadline never extends it.
	ReadTimeout time.Duration
	// MaxReports is the most result reports built or downloaded at once
	// (each reads the upload's cells and holds a workbook in memory until
	// it is sent); more are answered 503. Default 4.
	MaxReports int
	// MaxReportsPerSeller is the most reports of one seller built or
	// downloaded at once; more are answered 429, so one seller cannot take
	// every report slot. Default 2.
	MaxReportsPerSeller int
	// MinDownloadRate is the slowest average rate, in bytes per second, at
	// which a client may read an answer written while it holds a slot (a
	// report, an upload's or a check's result) once DownloadGrace has
	// passed; a slower client is cut off and its slot given back. Default
	// 16 KiB/s.
	MinDownloadRate int64
	// DownloadGrace is the time from an answer's first byte before
	// MinDownloadRate applies. Default 10 s.
	DownloadGrace time.Duration
	// WriteTimeout, when set, is the server's own limit on writing an
	// answer (NewHTTPServer's writeTimeout): the rate deadline never
	// extends it.
	WriteTimeout time.Duration
	// EventsInterval is how often an event stream reads the upload's
	// progress; an event is sent when it changed. Default 1 s.
	EventsInterval time.Duration
	// MaxStreamsPerSeller is the most event streams one seller holds open;
	// more are answered 429. Default 8.
	MaxStreamsPerSeller int
	// MaxStreamTime ends an event stream after this long; the browser
	// reconnects by itself. Default 30 min.
	MaxStreamTime time.Duration
	// SellerZone is the time zone pages, events and reports say times in
	// while the seller's browser has not told its own (zoneCookie).
	// Default Asia/Seoul.
	SellerZone *time.Location

	once    sync.Once
	handler http.Handler
	pages   map[string]*template.Template
	openapi []byte
	// templateXLSX is the upload template, written once at init.
	templateXLSX templateFile
	streams      *sellerSlots
	work         *sellerWork
	cop          *http.CrossOriginProtection
	stop         chan struct{} // closed by StopStreams
	stopMu       sync.Once
	sellerZone   *time.Location // SellerZone or its default
	zones        sellertime.Zones
}

// Defaults of Server's limits.
const (
	DefaultMaxUploads          = 16
	DefaultMaxUploadsPerSeller = 2
	DefaultMinUploadRate       = 16 << 10
	DefaultUploadGrace         = 10 * time.Second
	DefaultMaxReports          = 4
	DefaultMaxReportsPerSeller = 2
	DefaultMinDownloadRate     = 16 << 10
	DefaultDownloadGrace       = 10 * time.Second
	DefaultSessionTTL          = 8 * time.Hour
	DefaultLinkMaxAge          = 15 * time.Minute
	DefaultEventsInterval      = time.Second
	DefaultMaxStreamsPerSeller = 8
	DefaultMaxStreamTime       = 30 * time.Minute
	// maxFileNameLen bounds the file name kept with an upload (in bytes).
	maxFileNameLen = 255
)

const multipartSlack = 64 << 10

func (s *Server) maxFile() int64 {
	if s.MaxFileSize > 0 {
		return s.MaxFileSize
	}
	return 10 << 20
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

func (s *Server) log() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// logr is the service's logger with the request's attributes (its id).
func (s *Server) logr(r *http.Request) *slog.Logger {
	return logctx.Logger(r.Context(), s.log())
}

// route is one endpoint: its method and path pattern (http.ServeMux
// syntax), the name it is counted under, and whether it belongs to the
// JSON API (and so to the OpenAPI document) or to the pages.
type route struct {
	method, path, name string
	api                bool
	h                  http.HandlerFunc
}

// routes is every endpoint the service answers. TestOpenAPIMatchesRoutes
// holds the API's routes and the OpenAPI document to each other.
func (s *Server) routes() []route {
	lim := &limits{
		uploads: newSlotPool(orDefault(s.MaxUploads, DefaultMaxUploads), orDefault(s.MaxUploadsPerSeller, DefaultMaxUploadsPerSeller),
			"too_many_uploads", "you have %d uploads in progress; send the next one when one of them is answered",
			"%d uploads are being handled; try again in a few seconds"),
		reports: newSlotPool(orDefault(s.MaxReports, DefaultMaxReports), orDefault(s.MaxReportsPerSeller, DefaultMaxReportsPerSeller),
			"too_many_reports", "you have %d reports being built or downloaded; ask for the next one when one of them has arrived",
			"%d reports are being built for others; try again in a few seconds"),
	}
	return []route{
		{"POST", "/v1/uploads", "upload", true, s.apiPostUpload(lim)},
		{"GET", "/v1/uploads", "list", true, s.apiListUploads},
		{"GET", "/v1/uploads/{id}", "status", true, s.apiGetUpload},
		{"GET", "/v1/uploads/{id}/events", "events", true, s.apiEvents},
		{"GET", "/v1/uploads/{id}/report.xlsx", "report", true, s.apiReport(lim)},
		{"GET", "/v1/template.xlsx", "template", true, s.apiTemplate},
		{"GET", "/v1/compliance", "compliance", true, s.apiCompliance},
		{"GET", "/v1/openapi.json", "openapi", true, s.apiOpenAPI},

		{"GET", "/{$}", "page_home", false, s.pageHome},
		{"GET", "/signin", "page_signin", false, s.pageSignIn},
		{"POST", "/signin", "page_signin_post", false, s.pagePostSignIn},
		{"POST", "/signout", "page_signout", false, s.pageSignOut},
		{"GET", "/upload", "page_upload", false, s.pageUpload},
		{"POST", "/upload/check", "page_check", false, s.pageCheck(lim)},
		{"POST", "/upload", "page_register", false, s.pageRegister(lim)},
		{"GET", "/uploads", "page_uploads", false, s.pageUploads},
		{"GET", "/uploads/{id}", "page_detail", false, s.pageDetail},
		{"GET", "/assets/{name}", "assets", false, s.assets},
		{"GET", "/favicon.ico", "favicon", false, s.favicon},
	}
}

// limits are the slots the upload and report routes share.
type limits struct {
	uploads *slotPool // uploads and checks
	reports *slotPool
}

// Handler routes the service. Known paths asked with another method are
// answered 405 with Allow, unknown ones 404, both as problem documents.
// Every request is logged once (method, route, status, duration, seller).
func (s *Server) Handler() http.Handler {
	s.once.Do(s.init)
	return s.handler
}

func (s *Server) init() {
	s.stop = make(chan struct{})
	s.cop = http.NewCrossOriginProtection()
	s.streams = newSellerSlots(orDefault(s.MaxStreamsPerSeller, DefaultMaxStreamsPerSeller))
	s.work = newSellerWork()
	s.pages = parsePages()
	s.openapi, _ = webFiles.ReadFile("openapi.json")
	s.templateXLSX = buildTemplate(s.Categories)
	s.sellerZone = s.SellerZone
	if s.sellerZone == nil {
		s.sellerZone, _ = s.zones.Load(sellertime.DefaultZone) // the database is embedded: it has the zone
	}
	mux := http.NewServeMux()
	names := map[string]string{}
	for _, rt := range s.routes() {
		pattern := rt.method + " " + rt.path
		mux.HandleFunc(pattern, rt.h)
		names[pattern] = rt.name
	}
	s.handler = s.accessLog(names, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			s.noRoute(w, r, mux)
			return
		}
		mux.ServeHTTP(w, r)
	}))
}

// StopStreams ends every event stream, so a graceful shutdown does not wait
// for them (register it with http.Server.RegisterOnShutdown).
func (s *Server) StopStreams() {
	s.once.Do(s.init)
	s.stopMu.Do(func() { close(s.stop) })
}

// noRoute answers what the mux would (404, or 405 with Allow) as a problem
// document or, for a browser asking for a page, as a page.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request, mux *http.ServeMux) {
	h, _ := mux.Handler(r)
	rec := &headerRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	status := rec.status
	if status == 0 {
		status = http.StatusNotFound
	}
	if allow := rec.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if status == http.StatusMethodNotAllowed {
		writeProblem(w, r, problem{Status: status, Code: "method_not_allowed",
			Detail: r.Method + " is not allowed on " + r.URL.Path + "; allowed: " + rec.header.Get("Allow")})
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/v1/") && wantsHTML(r) {
		s.renderMessage(w, r, s.pageSession(r), http.StatusNotFound, "notfound.title", "notfound.body")
		return
	}
	writeProblem(w, r, problem{Status: http.StatusNotFound, Code: "not_found", Detail: "no such endpoint: " + r.Method + " " + r.URL.Path})
}

// headerRecorder keeps only the status and headers a handler writes.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header         { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (h *headerRecorder) WriteHeader(code int)        { h.status = code }

func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// reqInfo is what handlers tell the access log about a request.
type reqInfo struct {
	seller    string
	requestID string
}

type ctxKey struct{}

func info(r *http.Request) *reqInfo {
	if i, ok := r.Context().Value(ctxKey{}).(*reqInfo); ok {
		return i
	}
	return &reqInfo{}
}

// statusRecorder keeps the status and the bytes written for the access log.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	bytes int64
	body  *watchedBody // the request's body; nil when it has none
}

// watchedBody notes whether the handler began reading a request's body.
type watchedBody struct {
	io.ReadCloser
	read atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.ReadCloser.Read(p)
}

// Unwrap lets http.ResponseController reach the connection (read and write
// deadlines, flushing the event stream).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// WriteHeader closes the connection after a refusal sent before the
// request's body was read (no token, too many uploads, the wrong content
// type): net/http reads up to 256 KiB of an unread body before it sends
// the answer on a connection it keeps, so a client sending slowly waited
// for its refusal as long as its body took.
func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	if code >= 400 && r.body != nil && !r.body.read.Load() {
		r.Header().Set("Connection", "close")
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// accessLog logs one line per request: method, route pattern, status,
// duration, bytes, the seller and the request id. Never the URL's query or
// a header: a sign-in link carries its token in the query.
//
// The request id is the client's X-Request-Id when it is a plausible id
// (validRequestID), else a new random one; it is answered in X-Request-Id,
// named in every log line logged with the request's context (logctx) and in
// every problem document, so a seller's report of an error leads to its lines.
func (s *Server) accessLog(names map[string]string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			id = newRequestID()
		}
		ri := &reqInfo{requestID: id}
		ctx := context.WithValue(r.Context(), ctxKey{}, ri)
		r = r.WithContext(logctx.With(ctx, slog.String("request_id", id)))
		rec := &statusRecorder{ResponseWriter: w}
		if r.Body != nil && r.Body != http.NoBody {
			rec.body = &watchedBody{ReadCloser: r.Body}
			r.Body = rec.body
		}
		securityHeaders(rec.Header())
		rec.Header().Set("X-Request-Id", id)
		next.ServeHTTP(rec, r)
		if rec.code == 0 {
			rec.code = http.StatusOK
		}
		name := names[r.Pattern]
		switch {
		case name != "":
		case rec.code == http.StatusMethodNotAllowed:
			name = routeMethodNotAllowed
		default:
			name = routeUnmatched
		}
		took := time.Since(start)
		s.Metrics.request(name, rec.code, took)
		route := r.Pattern
		if route == "" {
			route = name
		}
		// The id is named here directly: a logger built from the context
		// (logr) for this one line cost 8 allocations a request.
		s.log().LogAttrs(r.Context(), slog.LevelInfo, "request", slog.String("request_id", id),
			slog.String("method", r.Method), slog.String("route", route),
			slog.Int("status", rec.code), slog.Float64("duration_seconds", took.Seconds()),
			slog.Int64("bytes", rec.bytes), slog.String("seller", ri.seller))
	})
}

// validRequestID accepts a client's request id of 1 to 64 letters, digits
// and - _ . : (a UUID, a ULID, a proxy's trace id): nothing that could break
// a log line or a header, nor grow without bound.
func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// newRequestID returns 128 random bits in hex.
func newRequestID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func routeOrNone(p string) string {
	if p == "" {
		return "(none)"
	}
	return p
}

// securityHeaders: the pages load nothing from elsewhere and run only
// their own script; no page may be framed.
func securityHeaders(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
}

// assets serves the embedded stylesheet and script.
func (s *Server) assets(w http.ResponseWriter, r *http.Request) {
	static, _ := fs.Sub(webFiles, "web/static")
	name := r.PathValue("name")
	b, err := fs.ReadFile(static, name)
	if err != nil {
		writeProblem(w, r, problem{Status: http.StatusNotFound, Code: "not_found", Detail: "no such file: " + name})
		return
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b)
}

// favicon serves the pages' icon (a 32 px PNG in an ICO, embedded) where
// browsers look for it without being told, so no page's visit asks for
// something missing.
func (s *Server) favicon(w http.ResponseWriter, r *http.Request) {
	b, _ := webFiles.ReadFile("web/static/favicon.ico") // embedded: it is there
	w.Header().Set("Content-Type", "image/x-icon")
	w.Header().Set("Cache-Control", "public, max-age=86400")
	w.Write(b)
}
