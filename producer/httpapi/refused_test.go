package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testbin"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/producer/upload"
)

// TestARefusedCheckIsAPageInTheSellersLanguage: when every upload slot is
// taken, the seller's own (429) or the service's (503), the check and
// Register answer the page's form and the page's script with a page in the
// seller's language that says the file was not checked, what to do and
// when to try again (Retry-After kept), never the problem document. A
// request that asks for JSON, and the API, keep application/problem+json.
func TestARefusedCheckIsAPageInTheSellersLanguage(t *testing.T) {
	e := newEnv(t, nil, upload.WriterOptions{})
	s := &Server{Uploader: e.up, Auth: Auth{Secret: secret}, Sessions: NewRedisSessions(testredis.Start(t).Client()),
		Logger: slog.New(slog.NewJSONHandler(&testbin.Output{}, nil)), MaxUploads: 2, MaxUploadsPerSeller: 1, UploadGrace: time.Minute}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	se := &sessionEnv{httpEnv: &httpEnv{env: e, srv: srv}, s: s}
	c, csrf := se.signIn(t, "seller-a")

	post := func(path, lang string, header map[string]string) (*http.Response, string) {
		t.Helper()
		ct, body := multipartBody(t, "file", xlsx(t, "refused", validRows(2)...), map[string]string{"csrf_token": csrf})
		req, _ := http.NewRequest("POST", srv.URL+path, body)
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Accept-Language", lang)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	form := map[string]string{"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
	script := map[string]string{"X-Fragment": "1", "X-CSRF-Token": csrf}
	asksJSON := map[string]string{"Accept": "application/json"}

	check := func(name string, status int, retry string, ko, en []string) {
		t.Helper()
		for _, tc := range []struct {
			path, lang string
			header     map[string]string
			want       []string
		}{
			{"/upload/check", "ko", form, ko}, {"/upload/check", "en", form, en},
			{"/upload/check", "ko", script, ko}, {"/upload", "ko", form, ko},
		} {
			resp, page := post(tc.path, tc.lang, tc.header)
			if resp.StatusCode != status || resp.Header.Get("Retry-After") != retry || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Errorf("%s, %s %s (%s, %v): %d, Retry-After %q, %s; want %d, %q, a page:\n%.600s", name, "POST", tc.path, tc.lang, tc.header, resp.StatusCode,
					resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), status, retry, page)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(page, w) {
					t.Errorf("%s, POST %s (%s, %v) does not say %q:\n%.2000s", name, tc.path, tc.lang, tc.header, w, page)
				}
			}
			if strings.Contains(page, `"status"`) || strings.Contains(page, "urn:bulkreg") {
				t.Errorf("%s, POST %s (%s): the page shows the problem document:\n%.600s", name, tc.path, tc.lang, page)
			}
		}
		resp, b := post("/upload/check", "ko", asksJSON)
		if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(b, `"status"`) {
			t.Errorf("%s, a check that asks for JSON: %d %s, want %d application/problem+json:\n%.600s", name, resp.StatusCode, resp.Header.Get("Content-Type"), status, b)
		}
		ct, body := multipartBody(t, "file", xlsx(t, "refused-api", validRows(2)...), nil)
		if resp, b := se.do(t, "POST", "/v1/uploads", token(t, "seller-a"), ct, body); resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s, the API: %d %s, want %d application/problem+json:\n%.600s", name, resp.StatusCode, resp.Header.Get("Content-Type"), status, b)
		}
	}

	// The seller's one slot is held by an upload still arriving.
	held := startTrickle(t, srv.URL, token(t, "seller-a"), 100*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	check("the seller's uploads all in progress", http.StatusTooManyRequests, "5",
		[]string{"지금은 이 파일을 받을 수 없습니다", "검사하지도 등록하지도 않았습니다", "약 5초 후에 다시 시도해 주세요"},
		[]string{"This file cannot be taken right now", "neither checked nor registered", "Try again once it is done, in about 5 s."})

	// The service's two slots are held by two other sellers' uploads.
	held.conn.Close()
	startTrickle(t, srv.URL, token(t, "seller-b"), 100*time.Millisecond)
	startTrickle(t, srv.URL, token(t, "seller-c"), 100*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	check("every upload slot of the service taken", http.StatusServiceUnavailable, "2",
		[]string{"지금은 이 파일을 받을 수 없습니다", "많은 파일을 처리하고 있어 이 파일은 검사하지도 등록하지도 않았습니다", "약 2초 후에 다시 시도해 주세요"},
		[]string{"This file cannot be taken right now", "neither checked nor registered", "Try again in about 2 s."})
}
