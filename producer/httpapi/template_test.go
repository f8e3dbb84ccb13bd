package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/internal/hostile"
	"github.com/bulkreg/bulkreg/producer/upload"
)

// TestTemplateIsServedFromBytesBuiltOnce: the unauthenticated template is
// written once, served with an ETag and Cache-Control, and a client that
// has it gets a 304 without it. A request costs a copy of the bytes (a few
// dozen allocations), not a workbook written anew (thousands).
func TestTemplateIsServedFromBytesBuiltOnce(t *testing.T) {
	h := (&Server{Uploader: &upload.Uploader{}, Auth: Auth{Secret: secret}}).Handler()
	get := func(header ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/v1/template.xlsx", nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	first := get()
	etag := first.Header().Get("ETag")
	if first.Code != http.StatusOK || etag == "" || first.Header().Get("Cache-Control") != templateCacheControl {
		t.Fatalf("template: %d, ETag %q, Cache-Control %q", first.Code, etag, first.Header().Get("Cache-Control"))
	}
	f, err := excelize.OpenReader(bytes.NewReader(first.Body.Bytes()))
	if err != nil {
		t.Fatalf("the template is not an xlsx: %v", err)
	}
	f.Close()
	if again := get(); !bytes.Equal(again.Body.Bytes(), first.Body.Bytes()) || again.Header().Get("ETag") != etag {
		t.Error("a second request got other bytes or another ETag")
	}
	if w := get("If-None-Match", etag); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("If-None-Match with the ETag: %d and %d bytes, want 304 and none", w.Code, w.Body.Len())
	}
	if w := get("If-None-Match", `"other"`); w.Code != http.StatusOK || w.Body.Len() != first.Body.Len() {
		t.Errorf("If-None-Match with another ETag: %d and %d bytes, want the template", w.Code, w.Body.Len())
	}
	allocs := testing.AllocsPerRun(50, func() { get() })
	const n = 200
	c0 := hostile.CPU()
	for range n {
		get()
	}
	perRequest := (hostile.CPU() - c0) / n
	t.Logf("a template request: %.0f allocations, %v CPU", allocs, perRequest.Round(time.Microsecond))
	if allocs > 200 {
		t.Errorf("a template request makes %.0f allocations; a copy of bytes built once makes a few dozen", allocs)
	}
}
