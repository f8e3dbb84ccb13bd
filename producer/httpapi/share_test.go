package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// TestShareFullIsThatSellersOwn429: a seller whose uploads fill their share
// gets 429 share_full with Retry-After and what to do, on the API and on
// the pages in Korean and English; another seller's upload goes through.
func TestShareFullIsThatSellersOwn429(t *testing.T) {
	e := newSessionEnv(t)
	store := uploadstatus.New(testredis.Start(t).Client(), time.Hour, uploadstatus.WithShare(uploadstatus.Share{Uploads: 1}))
	e.up.Statuses, e.up.Index, e.store = store, store, store

	post := func(seller, salt string) (*http.Response, []byte) {
		ct, body := multipartBody(t, "file", xlsx(t, salt, validRows(2)...), nil)
		return e.do(t, "POST", "/v1/uploads", token(t, seller), ct, body)
	}
	if resp, b := post("seller-a", "first"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("first upload: %d %s", resp.StatusCode, b)
	}
	resp, b := post("seller-a", "second")
	if resp.StatusCode != http.StatusTooManyRequests || errorCode(t, b) != "share_full" {
		t.Fatalf("an upload past the share: %d %s, want 429 share_full", resp.StatusCode, b)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 3600 {
		t.Errorf("Retry-After %q, want the seconds until the first upload expires (within the hour)", resp.Header.Get("Retry-After"))
	}
	var p problem
	_ = json.Unmarshal(b, &p)
	for _, want := range []string{"wait until older uploads expire", "ask the operator to delete old uploads or raise the share"} {
		if !strings.Contains(p.Detail, want) {
			t.Errorf("the problem's detail %q does not say %q", p.Detail, want)
		}
	}
	if resp, b := post("seller-b", "second"); resp.StatusCode != http.StatusCreated {
		t.Errorf("another seller's upload: %d %s, want 201", resp.StatusCode, b)
	}

	c, csrf := e.signIn(t, "seller-a")
	for _, tc := range []struct{ lang, title, todo string }{
		{"ko", "올린 파일을 더 보관할 공간이 없습니다", "운영자에게 오래된 업로드 삭제나 한도 확대를 요청해 주세요"},
		{"en", "Your upload storage is full", "ask the operator to delete old uploads or raise your share"},
	} {
		ct, body := multipartBody(t, "file", xlsx(t, "page-"+tc.lang, validRows(2)...), map[string]string{"csrf_token": csrf, "confirmed": "1"})
		resp, page := pageDo(t, c, "POST", e.srv.URL+"/upload", tc.lang, ct, body)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s page past the share: %d, Retry-After %q; want 429 with Retry-After", tc.lang, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		for _, want := range []string{tc.title, tc.todo} {
			if !strings.Contains(string(page), want) {
				t.Errorf("the %s page does not say %q:\n%.3000s", tc.lang, want, page)
			}
		}
	}
}
