package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testbin"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// TestOpenAPIMatchesRoutes: every API route is in the OpenAPI document and
// every operation of the document is a route; the document is 3.1 and each
// operation answers errors as problem documents.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	s := &Server{}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	raw, err := webFiles.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if method == "parameters" {
				continue
			}
			documented[strings.ToUpper(method)+" "+path] = true
			var o struct {
				Responses map[string]struct {
					Content map[string]json.RawMessage `json:"content"`
				} `json:"responses"`
			}
			json.Unmarshal(op, &o)
			for code, r := range o.Responses {
				if code[0] >= '4' {
					if _, ok := r.Content["application/problem+json"]; !ok {
						t.Errorf("%s %s answers %s without application/problem+json", method, path, code)
					}
				}
			}
		}
	}
	routed := map[string]bool{}
	for _, rt := range s.routes() {
		if rt.api {
			routed[rt.method+" "+rt.path] = true
		} else if strings.HasPrefix(rt.path, "/v1/") {
			t.Errorf("page route %s %s is under /v1/, the API's prefix", rt.method, rt.path)
		}
	}
	for k := range routed {
		if !documented[k] {
			t.Errorf("route %s is not in openapi.json", k)
		}
	}
	for k := range documented {
		if !routed[k] {
			t.Errorf("openapi.json documents %s, which no route serves", k)
		}
	}
	if len(routed) == 0 {
		t.Fatal("no API routes")
	}
}

// sessionEnv is a service with sign-in sessions in a real Redis.
type sessionEnv struct {
	*httpEnv
	s   *Server
	log *testbin.Output
}

func newSessionEnv(t *testing.T) *sessionEnv {
	t.Helper()
	e := newEnv(t, nil, upload.WriterOptions{})
	logs := &testbin.Output{}
	s := &Server{Uploader: e.up, Auth: Auth{Secret: secret}, Sessions: NewRedisSessions(testredis.Start(t).Client()),
		Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &sessionEnv{httpEnv: &httpEnv{env: e, srv: srv}, s: s, log: logs}
}

// signIn opens a fresh sign-in link with a new cookie jar and returns the
// client holding the session and the page's CSRF token.
func (e *sessionEnv) signIn(t *testing.T, seller string) (*http.Client, string) {
	t.Helper()
	link, err := Minter{Secret: secret}.Link(e.srv.URL, seller, 5*time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp := signInWith(t, c, link)
	u, _ := url.Parse(e.srv.URL)
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == cookiePlain {
			cookie = ck
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || len(jar.Cookies(u)) != 1 {
		t.Fatalf("session cookie %+v, want HttpOnly, SameSite=Strict, Path=/", cookie)
	}
	resp, err = c.Get(e.srv.URL + "/upload")
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	page.ReadFrom(resp.Body)
	resp.Body.Close()
	_, rest, ok := strings.Cut(page.String(), `<meta name="csrf-token" content="`)
	if resp.StatusCode != 200 || !ok {
		t.Fatalf("upload page after signing in: %d, no CSRF token", resp.StatusCode)
	}
	tok, _, _ := strings.Cut(rest, `"`)
	return c, tok
}

// TestSignInLinkAndCSRF: a link signs its seller in once; the session
// cookie then works for the pages and the API; a state change with the
// cookie needs the CSRF token and a same-origin request; a bearer token
// needs neither; nothing of a token reaches the log.
func TestSignInLinkAndCSRF(t *testing.T) {
	e := newSessionEnv(t)
	link, err := Minter{Secret: secret}.Link(e.srv.URL, "seller-a", 5*time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	signInWith(t, c, link)
	other, _ := cookiejar.New(nil)
	if resp, _ := (&http.Client{Jar: other}).Get(link); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("second use of the link: %d, want 401", resp.StatusCode)
	}
	long, _ := Minter{Secret: secret}.Link(e.srv.URL, "seller-a", time.Hour, time.Now())
	if resp, _ := (&http.Client{Jar: other}).Get(long); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a link valid for an hour: %d, want 401 (at most %s)", resp.StatusCode, DefaultLinkMaxAge)
	}

	c, csrf := e.signIn(t, "seller-a")
	post := func(c *http.Client, path string, header map[string]string, fields map[string]string) (*http.Response, []byte) {
		ct, body := multipartBody(t, "file", xlsx(t, "csrf-"+path+header["X-CSRF-Token"]+fields["csrf_token"]+header["Sec-Fetch-Site"], validRows(2)...), fields)
		req, _ := http.NewRequest("POST", e.srv.URL+path, body)
		req.Header.Set("Content-Type", ct)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		return resp, b.Bytes()
	}
	cases := []struct {
		name   string
		header map[string]string
		fields map[string]string
		status int
		code   string
	}{
		{"no CSRF token", nil, nil, 403, "csrf"},
		{"a wrong CSRF token", map[string]string{"X-CSRF-Token": "guess"}, nil, 403, "csrf"},
		{"cross-site, with the token", map[string]string{"X-CSRF-Token": csrf, "Sec-Fetch-Site": "cross-site"}, nil, 403, "cross_origin"},
		{"same-site other origin, with the token", map[string]string{"X-CSRF-Token": csrf, "Sec-Fetch-Site": "same-site"}, nil, 403, "cross_origin"},
		{"another Origin, no Sec-Fetch-Site", map[string]string{"X-CSRF-Token": csrf, "Origin": "http://evil.example"}, nil, 403, "cross_origin"},
		{"the token in the header", map[string]string{"X-CSRF-Token": csrf, "Sec-Fetch-Site": "same-origin"}, nil, 201, ""},
		{"the token in the form", nil, map[string]string{"csrf_token": csrf}, 201, ""},
	}
	for _, tc := range cases {
		resp, b := post(c, "/v1/uploads", tc.header, tc.fields)
		if resp.StatusCode != tc.status || (tc.code != "" && errorCode(t, b) != tc.code) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, resp.StatusCode, b, tc.status, tc.code)
		}
	}
	// The page form: refused without the token, registered with it.
	if resp, _ := post(c, "/upload", nil, nil); resp.StatusCode != 403 {
		t.Errorf("page form without the CSRF token: %d, want 403", resp.StatusCode)
	}
	noRedirect := *c
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if resp, _ := post(&noRedirect, "/upload", nil, map[string]string{"csrf_token": csrf}); resp.StatusCode != 303 || !strings.HasPrefix(resp.Header.Get("Location"), "/uploads/") {
		t.Errorf("page form with the CSRF token: %d → %q, want 303 to the upload", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Check without the page's script: the whole page, every problem by cell,
	// and nothing published.
	rows := validRows(3)
	rows[2].Price = "abc"
	ct, body := multipartBody(t, "file", xlsx(t, "nojs-check", rows...), map[string]string{"csrf_token": csrf})
	req, _ := http.NewRequest("POST", e.srv.URL+"/upload/check", body)
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Accept-Language", "en")
	if resp, err := c.Do(req); err != nil {
		t.Fatal(err)
	} else {
		var page bytes.Buffer
		page.ReadFrom(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`<a href="#cell-D4" class="cell">D4</a>`, `id="cell-D4" class="bad" aria-invalid="true"`, "3 rows: 2 ready, 1 with problems", "choose the file again", "<html lang=\"en\">"} {
			if !strings.Contains(page.String(), want) {
				t.Errorf("check page (no script) lacks %q:\n%.3000s", want, page.String())
			}
		}
	}
	// A bearer token is not ambient: no CSRF token needed.
	if resp, b := post(http.DefaultClient, "/v1/uploads", map[string]string{"Authorization": "Bearer " + token(t, "seller-a"), "Sec-Fetch-Site": "cross-site"}, nil); resp.StatusCode != 201 {
		t.Errorf("bearer upload: %d %s, want 201", resp.StatusCode, b)
	}
	// The session reads the seller's own uploads, like a token.
	resp, err := c.Get(e.srv.URL + "/v1/uploads")
	var list ListResponse
	if err == nil {
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != 200 || len(list.Uploads) != 4 {
		t.Errorf("GET /v1/uploads with the session: %v %d uploads, want 4", err, len(list.Uploads))
	}

	// Signing out ends the session.
	form := url.Values{"csrf_token": {csrf}}
	req, _ = http.NewRequest("POST", e.srv.URL+"/signout", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = c.Do(req)
	if err != nil || resp.Request.URL.Path != "/signin" {
		t.Fatalf("sign out: %v %v", resp, err)
	}
	// It says so, not "please sign in" (a new-user review).
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "<h1>로그아웃했습니다</h1>") || strings.Contains(string(b), "로그인이 필요합니다") {
		t.Errorf("after signing out: %d %.600s", resp.StatusCode, b)
	}
	if resp, _ := c.Get(e.srv.URL + "/v1/uploads"); resp.StatusCode != 401 {
		t.Errorf("API after signing out: %d, want 401", resp.StatusCode)
	}

	logs := e.log.String()
	tok := strings.TrimPrefix(strings.Split(link, "token=")[1], "")
	if strings.Contains(logs, tok[:40]) || strings.Contains(logs, csrf) || strings.Contains(logs, "Bearer") {
		t.Errorf("the log holds a token:\n%s", logs)
	}
	if !strings.Contains(logs, `"route":"POST /v1/uploads","status":201`) || !strings.Contains(logs, `"seller":"seller-a"`) ||
		!strings.Contains(logs, `"route":"GET /signin","status":401`) {
		t.Errorf("access log lacks method, route, status or seller:\n%s", logs)
	}
}

// TestAPIConventions: 201 with Location, 405 with Allow, 404 and other
// errors as problem documents, a paginated list with a Link to the next
// page, dry_run that publishes nothing, and the status with eta and
// rows_waiting.
func TestAPIConventions(t *testing.T) {
	h := newHTTPEnv(t)
	tok := token(t, "seller-a")
	var ids []string
	for i := range 3 {
		ct, body := multipartBody(t, "file", xlsx(t, "conv"+itoa(i), validRows(2)...), nil)
		resp, b := h.do(t, "POST", "/v1/uploads", tok, ct, body)
		var up UploadResponse
		json.Unmarshal(b, &up)
		if resp.StatusCode != 201 || resp.Header.Get("Location") != "/v1/uploads/"+up.UploadID {
			t.Fatalf("upload: %d Location %q %s", resp.StatusCode, resp.Header.Get("Location"), b)
		}
		ids = append(ids, up.UploadID)
	}
	// dry_run checks and publishes nothing.
	rows := validRows(2)
	rows[1].Price = "12,000원"
	ct, body := multipartBody(t, "file", xlsx(t, "dry", rows...), nil)
	resp, b := h.do(t, "POST", "/v1/uploads?dry_run=true", tok, ct, body)
	var chk CheckResponse
	json.Unmarshal(b, &chk)
	if resp.StatusCode != 200 || !chk.DryRun || chk.Valid != 1 || chk.Invalid != 1 || len(chk.Problems) != 1 || chk.Problems[0].Cell != "D3" {
		t.Errorf("dry run: %d %s", resp.StatusCode, b)
	}
	if n := len(consume(t, h.brokers)); n != 6 {
		t.Errorf("topic holds %d messages after three uploads of 2 rows and a dry run, want 6", n)
	}
	// A refused file is a problem document with the cell problems.
	ct, body = multipartBody(t, "file", []byte("seller_sku,name\nA,B\n"), nil)
	resp, b = h.do(t, "POST", "/v1/uploads?dry_run=true", tok, ct, body)
	var p problem
	json.Unmarshal(b, &p)
	if resp.StatusCode != 422 || resp.Header.Get("Content-Type") != "application/problem+json" || p.Code != "missing_column" || len(p.Problems) == 0 {
		t.Errorf("refused file: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}

	// Pages of 2, newest first, with a Link to the next page.
	resp, b = h.do(t, "GET", "/v1/uploads?limit=2", tok, "", nil)
	var page ListResponse
	json.Unmarshal(b, &page)
	if resp.StatusCode != 200 || len(page.Uploads) != 2 || page.Uploads[0].ID != ids[2] || page.NextCursor == "" ||
		!strings.Contains(resp.Header.Get("Link"), `rel="next"`) {
		t.Fatalf("first page: %d %s Link %q", resp.StatusCode, b, resp.Header.Get("Link"))
	}
	next := strings.TrimSuffix(strings.TrimPrefix(strings.Split(resp.Header.Get("Link"), ";")[0], "<"), ">")
	resp, b = h.do(t, "GET", next, tok, "", nil)
	page = ListResponse{}
	json.Unmarshal(b, &page)
	if resp.StatusCode != 200 || len(page.Uploads) != 1 || page.Uploads[0].ID != ids[0] || page.NextCursor != "" || resp.Header.Get("Link") != "" {
		t.Errorf("last page: %d %s", resp.StatusCode, b)
	}
	if resp, b := h.do(t, "GET", "/v1/uploads?limit=2", token(t, "seller-b"), "", nil); !strings.Contains(string(b), `"uploads": []`) {
		t.Errorf("another seller's list: %d %s, want empty", resp.StatusCode, b)
	}
	for _, q := range []string{"?limit=0", "?limit=abc", "?cursor=xyz"} {
		if resp, b := h.do(t, "GET", "/v1/uploads"+q, tok, "", nil); resp.StatusCode != 400 || errorCode(t, b) == "" {
			t.Errorf("GET /v1/uploads%s: %d %s, want 400", q, resp.StatusCode, b)
		}
	}

	// The status has the estimate's fields.
	resp, b = h.do(t, "GET", "/v1/uploads/"+ids[0], tok, "", nil)
	var st map[string]any
	json.Unmarshal(b, &st)
	if _, ok := st["eta"]; resp.StatusCode != 200 || !ok || st["rows_waiting"] != float64(2) {
		t.Errorf("status: %s, want eta and rows_waiting 2", b)
	}

	// Wrong method on a known path: 405 with Allow; unknown path: 404.
	for _, c := range []struct {
		method, path string
		status       int
		allow        []string
	}{
		{"DELETE", "/v1/uploads", 405, []string{"GET", "HEAD", "POST"}},
		{"PUT", "/v1/uploads/" + ids[0], 405, []string{"GET", "HEAD"}},
		{"POST", "/v1/template.xlsx", 405, []string{"GET", "HEAD"}},
		{"GET", "/v1/nothing", 404, nil},
	} {
		resp, b := h.do(t, c.method, c.path, tok, "", nil)
		allow := strings.Split(strings.ReplaceAll(resp.Header.Get("Allow"), " ", ""), ",")
		slices.Sort(allow)
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/problem+json" || errorCode(t, b) == "" ||
			(c.allow != nil && !slices.Equal(allow, c.allow)) {
			t.Errorf("%s %s: %d Allow %q %s, want %d Allow %v", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), b, c.status, c.allow)
		}
	}
	resp, b = h.do(t, "GET", "/v1/openapi.json", "", "", nil)
	if resp.StatusCode != 200 || !json.Valid(b) {
		t.Errorf("openapi.json: %d", resp.StatusCode)
	}
}

// TestEventsStream: the stream answers a progress event at once, another
// when a row is recorded, and a done event at the end; another seller gets 404.
func TestEventsStream(t *testing.T) {
	h := newHTTPEnv(t)
	s := &Server{Uploader: h.up, Auth: Auth{Secret: secret}, EventsInterval: 50 * time.Millisecond}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	tok := token(t, "seller-a")
	ct, body := multipartBody(t, "file", xlsx(t, "events", validRows(2)...), nil)
	_, b := h.do(t, "POST", "/v1/uploads", tok, ct, body)
	var up UploadResponse
	json.Unmarshal(b, &up)

	req, _ := http.NewRequest("GET", srv.URL+"/v1/uploads/"+up.UploadID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+token(t, "seller-b"))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 404 {
		t.Fatalf("another seller's stream: %v %v, want 404", resp, err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	go func() {
		time.Sleep(200 * time.Millisecond)
		for _, row := range []int{2, 3} {
			h.store.RecordRow(ctx, up.UploadID, uploadstatusRegistered(row))
			time.Sleep(200 * time.Millisecond)
		}
	}()
	var events []string
	var data []ProgressEvent
	buf := make([]byte, 64<<10)
	var text strings.Builder
	for !strings.Contains(text.String(), "event: done") {
		n, err := resp.Body.Read(buf)
		text.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, block := range strings.Split(text.String(), "\n\n") {
		lines := strings.Split(block, "\n")
		if len(lines) == 2 && strings.HasPrefix(lines[0], "event: ") {
			events = append(events, strings.TrimPrefix(lines[0], "event: "))
			if lines[0] == "event: progress" {
				var ev ProgressEvent
				json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &ev)
				data = append(data, ev)
			}
		}
	}
	if len(data) != 3 || events[len(events)-1] != "done" || data[0].RowsWaiting != 2 ||
		data[1].Registered != 1 || data[2].Percent != 100 || !data[2].Done || data[2].ETA != nil {
		t.Errorf("events %v, data %+v; want progress at 0, 1 and 2 registered, then done", events, data)
	}
}

func uploadstatusRegistered(row int) uploadstatus.RowResult {
	return uploadstatus.RowResult{Row: row, State: uploadstatus.Registered, ProductID: "P" + itoa(row)}
}

// TestEveryMessageInBothLanguages: no page text is missing a language, and
// Accept-Language, the switch and its cookie pick the language.
func TestEveryMessageInBothLanguages(t *testing.T) {
	for k, m := range messages {
		if strings.TrimSpace(m[0]) == "" || strings.TrimSpace(m[1]) == "" {
			t.Errorf("message %q lacks a language: %q", k, m)
		}
		if strings.Count(m[0], "%") != strings.Count(m[1], "%") {
			t.Errorf("message %q: the languages take different arguments: %q", k, m)
		}
	}
	cases := []struct {
		accept, query, cookie, want string
	}{
		{"ko-KR,ko;q=0.9,en;q=0.8", "", "", "ko"},
		{"en-US,en;q=0.9", "", "", "en"},
		{"en-US,en;q=0.9,ko;q=0.8", "", "", "en"},
		{"fr-FR", "", "", "ko"},
		{"", "", "", "ko"},
		{"ko", "lang=en", "", "en"},
		{"en", "", "ko", "ko"},
		{"en", "lang=xx", "", "en"},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/upload?"+c.query, nil)
		r.Header.Set("Accept-Language", c.accept)
		if c.cookie != "" {
			r.AddCookie(&http.Cookie{Name: langCookie, Value: c.cookie})
		}
		if got := pickLang(r); got != c.want {
			t.Errorf("Accept-Language %q, ?%s, cookie %q: %s, want %s", c.accept, c.query, c.cookie, got, c.want)
		}
	}
}
