package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

var secret = []byte("0123456789abcdef0123456789abcdef-test")

func token(t testing.TB, seller string) string {
	t.Helper()
	tok, err := MintToken(secret, seller, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestAuth(t *testing.T) {
	a := Auth{Secret: secret}
	now := time.Now()
	sign := func(m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(m, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	claims := func(extra jwt.MapClaims) jwt.MapClaims {
		c := jwt.MapClaims{"iss": DefaultIssuer, "aud": DefaultAudience}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	good := claims(jwt.MapClaims{"sub": "seller-1", "exp": now.Add(time.Hour).Unix()})
	cases := []struct {
		name, header, seller string
	}{
		{"valid", "Bearer " + token(t, "seller-1"), "seller-1"},
		{"lower-case scheme", "bearer " + token(t, "seller-1"), "seller-1"},
		{"no header", "", ""},
		{"basic auth", "Basic dXNlcjpwYXNz", ""},
		{"wrong secret", "Bearer " + sign(jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), good), ""},
		{"alg none", "Bearer " + sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good), ""},
		{"HS512 with the right secret", "Bearer " + sign(jwt.SigningMethodHS512, secret, good), ""},
		{"no exp", "Bearer " + sign(jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"sub": "seller-1"})), ""},
		{"expired", "Bearer " + sign(jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"sub": "seller-1", "exp": now.Add(-time.Minute).Unix()})), ""},
		{"no sub", "Bearer " + sign(jwt.SigningMethodHS256, secret, claims(jwt.MapClaims{"exp": now.Add(time.Hour).Unix()})), ""},
		{"garbage", "Bearer not.a.token", ""},
		{"sound claims signed by hand", "Bearer " + sign(jwt.SigningMethodHS256, secret, good), "seller-1"},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		got, err := a.Seller(r)
		if got != c.seller || (c.seller == "") != (err != nil) {
			t.Errorf("%s: Seller = %q, %v; want %q", c.name, got, err, c.seller)
		}
	}
	if _, err := (Auth{Secret: []byte("short")}).Verify(token(t, "x")); err == nil {
		t.Error("a server with a short secret accepted a token")
	}
	if _, err := MintToken([]byte("short"), "s", time.Hour, now); err == nil {
		t.Error("MintToken accepted a short secret")
	}
}

type httpEnv struct {
	*env
	srv   *httptest.Server
	admin *httptest.Server // /metrics and /healthz
}

func newHTTPEnv(t *testing.T) *httpEnv {
	e := newEnv(t, nil, upload.WriterOptions{})
	reg := prometheus.NewRegistry()
	e.up.Metrics = upload.NewMetrics(reg)
	s := &Server{Uploader: e.up, Auth: Auth{Secret: secret}, MaxFileSize: 200 << 10, Metrics: NewMetrics(reg)}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	admin := httptest.NewServer(AdminHandler(reg, func(context.Context) error { return nil }, nil))
	t.Cleanup(admin.Close)
	return &httpEnv{env: e, srv: srv, admin: admin}
}

func multipartBody(t testing.TB, field string, data []byte, extra map[string]string) (string, *bytes.Buffer) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range extra {
		mw.WriteField(k, v)
	}
	fw, err := mw.CreateFormFile(field, "products.xlsx")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(data)
	mw.Close()
	return mw.FormDataContentType(), &buf
}

func (h *httpEnv) do(t *testing.T, method, path, tok, contentType string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	return h.doURL(t, method, h.srv.URL+path, tok, contentType, body)
}

func (h *httpEnv) doURL(t *testing.T, method, url, tok, contentType string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// errorCode reads the code of a problem document (RFC 9457), checking the
// members every problem carries.
func errorCode(t *testing.T, b []byte) string {
	t.Helper()
	var p problem
	if err := json.Unmarshal(b, &p); err != nil || p.Detail == "" || p.Title == "" || p.Status == 0 || p.Type != problemType(p.Code) {
		t.Errorf("body %q is not a problem document with a detail", b)
	}
	return p.Code
}

func TestHTTPUploadIsTheSellersOwn(t *testing.T) {
	h := newHTTPEnv(t)
	rows := validRows(3)
	rows[0].Price = "abc"
	ct, body := multipartBody(t, "file", xlsx(t, "http", rows...), map[string]string{"seller": "seller-b", "seller_id": "seller-b"})
	resp, b := h.do(t, "POST", "/v1/uploads", token(t, "seller-a"), ct, body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	var up UploadResponse
	json.Unmarshal(b, &up)
	if !strings.Contains(string(b), `"cell": "D2"`) {
		t.Errorf("problems are not in the JSON contract (row, column, cell, code, message): %s", b)
	}
	if up.UploadID == "" || up.Published != 2 || up.Invalid != 1 || len(up.Problems) != 1 || up.Problems[0].Cell != "D2" || up.State != uploadstatus.Published {
		t.Errorf("upload answer %s", b)
	}
	// The seller came from the token, not from the form fields.
	st, err := h.store.Get(context.Background(), up.UploadID)
	if err != nil || st.SellerID != "seller-a" {
		t.Fatalf("stored upload %+v %v, want seller-a", st, err)
	}

	resp, b = h.do(t, "GET", "/v1/uploads/"+up.UploadID, token(t, "seller-a"), "", nil)
	var got uploadstatus.Status
	json.Unmarshal(b, &got)
	if resp.StatusCode != 200 || got.ID != up.UploadID || got.Total != 3 || got.Failed != 1 || got.Waiting != 2 {
		t.Errorf("owner's status: %d %s", resp.StatusCode, b)
	}
	resp, b = h.do(t, "GET", "/v1/uploads/"+up.UploadID+"/report.xlsx", token(t, "seller-a"), "", nil)
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "spreadsheetml") {
		t.Fatalf("owner's report: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	f, err := excelize.OpenReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	all, _ := f.GetRows(f.GetSheetName(0))
	f.Close()
	if text := flatten(all); !strings.Contains(text, "failed") || !strings.Contains(text, "D2") || !strings.Contains(text, "waiting") {
		t.Errorf("report rows %v: want the failed row with its reason (D2) and the waiting ones", all)
	}

	// Seller B sees nothing: 404 like an id that does not exist, never 403.
	for _, path := range []string{"/v1/uploads/" + up.UploadID, "/v1/uploads/" + up.UploadID + "/report.xlsx", "/v1/uploads/0000000000000000"} {
		resp, b := h.do(t, "GET", path, token(t, "seller-b"), "", nil)
		if resp.StatusCode != http.StatusNotFound || errorCode(t, b) != "not_found" {
			t.Errorf("seller B GET %s: %d %s, want 404 not_found", path, resp.StatusCode, b)
		}
	}
	// B uploading the same file makes B's own upload; A's is untouched.
	ct, body = multipartBody(t, "file", xlsx(t, "http", rows...), nil)
	resp, b = h.do(t, "POST", "/v1/uploads", token(t, "seller-b"), ct, body)
	var upB UploadResponse
	json.Unmarshal(b, &upB)
	if resp.StatusCode != http.StatusCreated || upB.UploadID == up.UploadID || upB.Duplicate {
		t.Errorf("seller B's upload of the same file: %d %s", resp.StatusCode, b)
	}
	// A again: a duplicate, 200.
	ct, body = multipartBody(t, "file", xlsx(t, "http", rows...), nil)
	resp, b = h.do(t, "POST", "/v1/uploads", token(t, "seller-a"), ct, body)
	json.Unmarshal(b, &up)
	if resp.StatusCode != http.StatusOK || !up.Duplicate {
		t.Errorf("seller A's second upload: %d %s, want 200 duplicate", resp.StatusCode, b)
	}

	resp, b = h.doURL(t, "GET", h.admin.URL+"/metrics", "", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `bulkreg_producer_uploads_total{outcome="duplicate"} 1`) ||
		!strings.Contains(string(b), `bulkreg_producer_rows_published_total 4`) {
		t.Errorf("metrics lack the uploads: %s", b)
	}
}

func flatten(rows [][]string) string {
	var sb strings.Builder
	for _, r := range rows {
		sb.WriteString(strings.Join(r, "|"))
		sb.WriteString("\n")
	}
	return sb.String()
}

func TestHTTPRefusals(t *testing.T) {
	h := newHTTPEnv(t)
	file := xlsx(t, "refusals", validRows(2)...)
	expired, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "a", "exp": time.Now().Add(-time.Hour).Unix()}).SignedString(secret)
	big := bytes.Repeat([]byte("x"), 300<<10)
	cases := []struct {
		name     string
		tok      string
		body     func() (string, io.Reader)
		path     string
		status   int
		code     string
		mentions string
	}{
		{"no token", "", func() (string, io.Reader) { ct, b := multipartBody(t, "file", file, nil); return ct, b }, "/v1/uploads", 401, "no_token", "Bearer"},
		{"bad token", "abc.def.ghi", func() (string, io.Reader) { ct, b := multipartBody(t, "file", file, nil); return ct, b }, "/v1/uploads", 401, "bad_token", "not valid"},
		{"expired token", expired, func() (string, io.Reader) { ct, b := multipartBody(t, "file", file, nil); return ct, b }, "/v1/uploads", 401, "bad_token", "expired"},
		{"oversized body", token(t, "a"), func() (string, io.Reader) { ct, b := multipartBody(t, "file", big, nil); return ct, b }, "/v1/uploads", 413, "too_large", "larger than"},
		{"wrong content type", token(t, "a"), func() (string, io.Reader) { return "application/json", strings.NewReader(`{"file":"x"}`) }, "/v1/uploads", 415, "wrong_content_type", "multipart/form-data"},
		{"no content type", token(t, "a"), func() (string, io.Reader) { return "", bytes.NewReader(file) }, "/v1/uploads", 415, "wrong_content_type", "multipart/form-data"},
		{"no file field", token(t, "a"), func() (string, io.Reader) { ct, b := multipartBody(t, "upload", file, nil); return ct, b }, "/v1/uploads", 400, "bad_request", "field named"},
		{"not a spreadsheet", token(t, "a"), func() (string, io.Reader) {
			ct, b := multipartBody(t, "file", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), nil)
			return ct, b
		}, "/v1/uploads", 422, "not_xlsx", ""},
		{"strict with a bad row", token(t, "a"), func() (string, io.Reader) {
			ct, b := multipartBody(t, "file", xlsx(t, "strict", sheetRow{SKU: "A", Price: "0"}), nil)
			return ct, b
		}, "/v1/uploads?strict=true", 422, "invalid_rows", "D2"},
		{"status without token", "", func() (string, io.Reader) { return "", nil }, "/v1/uploads/abc", 401, "no_token", ""},
	}
	for _, c := range cases {
		ct, body := c.body()
		method := "POST"
		if strings.HasPrefix(c.path, "/v1/uploads/") {
			method = "GET"
		}
		resp, b := h.do(t, method, c.path, c.tok, ct, body)
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d %s, want %d", c.name, resp.StatusCode, b, c.status)
			continue
		}
		if code := errorCode(t, b); code != c.code || !strings.Contains(string(b), c.mentions) {
			t.Errorf("%s: body %s, want code %q mentioning %q", c.name, b, c.code, c.mentions)
		}
	}
	if n := len(consume(t, h.brokers)); n != 0 {
		t.Errorf("refused requests published %d messages", n)
	}
}

func TestHTTPTemplateAndHealth(t *testing.T) {
	h := newHTTPEnv(t)
	resp, b := h.do(t, "GET", "/v1/template.xlsx", "", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("template: %d", resp.StatusCode)
	}
	f, err := excelize.OpenReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("template is not an xlsx: %v", err)
	}
	f.Close()
	if resp, b := h.doURL(t, "GET", h.admin.URL+"/healthz", "", "", nil); resp.StatusCode != 200 || string(b) != "ok\n" {
		t.Errorf("healthz: %d %q", resp.StatusCode, b)
	}
	// /metrics and /healthz are on the admin listener only.
	for _, path := range []string{"/metrics", "/healthz"} {
		if resp, b := h.do(t, "GET", path, "", "", nil); resp.StatusCode != 404 {
			t.Errorf("public GET %s: %d %s, want 404", path, resp.StatusCode, b)
		}
	}
	if resp, b := h.do(t, "GET", "/nope", "", "", nil); resp.StatusCode != 404 || errorCode(t, b) != "not_found" {
		t.Errorf("unknown path: %d %s", resp.StatusCode, b)
	}
}

// switchWriter lets a test move the uploader from a dead broker to a live one.
type switchWriter struct {
	mu sync.Mutex
	w  upload.MessageWriter
}

func (s *switchWriter) set(w upload.MessageWriter) { s.mu.Lock(); s.w = w; s.mu.Unlock() }

func (s *switchWriter) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	s.mu.Lock()
	w := s.w
	s.mu.Unlock()
	return w.WriteMessages(ctx, msgs...)
}

// TestHTTPKafkaDownThenRetry: with Kafka down the upload is answered 503
// with its id; the same file sent again once Kafka is back is published
// under the same id.
func TestHTTPKafkaDownThenRetry(t *testing.T) {
	h := newHTTPEnv(t)
	dead, err := upload.NewWriter(upload.WriterOptions{Brokers: []string{"127.0.0.1:1"}, Topic: topic, MaxAttempts: 1, WriteTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	sw := &switchWriter{w: dead}
	h.up.Writer = sw
	h.up.PublishTimeout = 2 * time.Second
	file := xlsx(t, "down", validRows(4)...)

	ct, body := multipartBody(t, "file", file, nil)
	resp, b := h.do(t, "POST", "/v1/uploads", token(t, "a"), ct, body)
	var failed struct {
		UploadID string `json:"upload_id"`
	}
	json.Unmarshal(b, &failed)
	if resp.StatusCode != http.StatusServiceUnavailable || errorCode(t, b) != "publish_failed" || failed.UploadID == "" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("upload with Kafka down: %d %s, want 503 publish_failed with the upload id and Retry-After", resp.StatusCode, b)
	}
	resp, b = h.do(t, "GET", "/v1/uploads/"+failed.UploadID, token(t, "a"), "", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"state": "publish_failed"`) {
		t.Errorf("status after the failure: %d %s", resp.StatusCode, b)
	}

	sw.set(h.writer)
	ct, body = multipartBody(t, "file", file, nil)
	resp, b = h.do(t, "POST", "/v1/uploads", token(t, "a"), ct, body)
	var up UploadResponse
	json.Unmarshal(b, &up)
	if resp.StatusCode != http.StatusCreated || up.UploadID != failed.UploadID || !up.Resumed || up.Published != 4 || up.State != uploadstatus.Published {
		t.Errorf("the same file again: %d %s, want 201, the same id, resumed, 4 published", resp.StatusCode, b)
	}
	if n := len(consume(t, h.brokers)); n != 4 {
		t.Errorf("topic holds %d messages, want 4", n)
	}
}

// TestSlowClientIsCutOff: a client that trickles its request is
// disconnected at the read timeout instead of holding the connection.
func TestSlowClientIsCutOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewHTTPServer("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }), 300*time.Millisecond, time.Second)
	go hs.Serve(ln)
	defer hs.Close()
	for _, partial := range []string{
		"POST /v1/uploads HTTP/1.1\r\nHost: x\r\n",                                // headers never finished
		"POST /v1/uploads HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc", // body never finished
	} {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		conn.Write([]byte(partial))
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = io.ReadAll(conn) // returns when the server closes the connection
		took := time.Since(start)
		conn.Close()
		if err != nil || took > 2*time.Second {
			t.Errorf("%q: connection held %v (err %v), want closed after about 300ms", partial, took, err)
		}
	}
}

// blockingParser holds every parse until released.
type blockingParser struct {
	entered chan struct{}
	release chan struct{}
	upload.Parser
}

func (p *blockingParser) Parse(ctx context.Context, r io.Reader) (*excel.Sheet, error) {
	p.entered <- struct{}{}
	<-p.release
	return p.Parser.Parse(ctx, r)
}

func TestHTTPUploadsAtOnceAreCapped(t *testing.T) {
	e := newEnv(t, nil, upload.WriterOptions{})
	bp := &blockingParser{entered: make(chan struct{}, 10), release: make(chan struct{}), Parser: e.up.Parser}
	e.up.Parser = bp
	s := &Server{Uploader: e.up, Auth: Auth{Secret: secret}, MaxUploads: 2}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	h := &httpEnv{env: e, srv: srv}
	codes := make(chan int, 2)
	for i := range 2 {
		tok := token(t, "seller-"+itoa(i)) // one seller could hold only MaxUploadsPerSeller
		ct, body := multipartBody(t, "file", xlsx(t, "cap"+itoa(i), validRows(1)...), nil)
		req, _ := http.NewRequest("POST", srv.URL+"/v1/uploads", body)
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer "+tok)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	<-bp.entered
	<-bp.entered // both slots held
	ct, body := multipartBody(t, "file", xlsx(t, "cap-third", validRows(1)...), nil)
	resp, b := h.do(t, "POST", "/v1/uploads", token(t, "seller-third"), ct, body)
	if resp.StatusCode != http.StatusServiceUnavailable || errorCode(t, b) != "busy" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("third upload at once: %d %s, want 503 busy with Retry-After", resp.StatusCode, b)
	}
	close(bp.release)
	for range 2 {
		if c := <-codes; c != http.StatusCreated {
			t.Errorf("held upload answered %d, want 201", c)
		}
	}
	// The slots are free again.
	ct, body = multipartBody(t, "file", xlsx(t, "cap-fourth", validRows(1)...), nil)
	if resp, b := h.do(t, "POST", "/v1/uploads", token(t, "a"), ct, body); resp.StatusCode != http.StatusCreated {
		t.Errorf("upload after the others finished: %d %s", resp.StatusCode, b)
	}
}
