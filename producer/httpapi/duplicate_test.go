package httpapi

import (
	"encoding/json"
	"testing"
	"time"
)

// TestSameFileAfterTheStaleTimeIsA200Duplicate: the same file
// sent again after --stale-after is answered 200 duplicate, not 201
// resumed, and nothing more reaches the topic.
func TestSameFileAfterTheStaleTimeIsA200Duplicate(t *testing.T) {
	h := newHTTPEnv(t)
	h.up.StaleAfter = 200 * time.Millisecond
	file := xlsx(t, "stale-http", validRows(20)...)
	send := func() (int, UploadResponse) {
		ct, body := multipartBody(t, "file", file, nil)
		resp, b := h.do(t, "POST", "/v1/uploads", token(t, "a"), ct, body)
		var r UploadResponse
		json.Unmarshal(b, &r)
		return resp.StatusCode, r
	}
	if code, r := send(); code != 201 || r.Published != 20 {
		t.Fatalf("first upload: %d %+v", code, r)
	}
	time.Sleep(2 * h.up.StaleAfter)
	if code, r := send(); code != 200 || !r.Duplicate || r.Resumed || r.Published != 0 {
		t.Errorf("the same file after the stale time: %d duplicate %v resumed %v published %d; want 200, a duplicate, nothing published",
			code, r.Duplicate, r.Resumed, r.Published)
	}
	if n := len(consume(t, h.brokers)); n != 20 {
		t.Errorf("the topic holds %d messages, want 20", n)
	}
}
