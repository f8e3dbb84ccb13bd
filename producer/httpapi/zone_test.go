package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestZone: a page says times in the browser's zone when its cookie names
// one, else in SellerZone (Asia/Seoul by default); a stream in the zone its
// ?tz= names first. A name that is no zone is passed over.
func TestZone(t *testing.T) {
	for _, c := range []struct {
		name          string
		seller        *time.Location
		cookie, query string
		page, stream  string
	}{
		{"nothing known: the default", nil, "", "", "Asia/Seoul", "Asia/Seoul"},
		{"the service's own", time.UTC, "", "", "UTC", "UTC"},
		{"the browser's", nil, "America/New_York", "", "America/New_York", "America/New_York"},
		{"the stream's page's", nil, "America/New_York", "Europe/Berlin", "America/New_York", "Europe/Berlin"},
		{"a cookie that names no zone", nil, "Nowhere/At_All", "", "Asia/Seoul", "Asia/Seoul"},
		{"the server's local zone is not the browser's", nil, "Local", "", "Asia/Seoul", "Asia/Seoul"},
		{"a ?tz= that names no zone", nil, "America/New_York", "../../etc/passwd", "America/New_York", "America/New_York"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Server{SellerZone: c.seller}
			s.Handler()
			r := httptest.NewRequest("GET", "/uploads?tz="+c.query, nil)
			if c.cookie != "" {
				r.AddCookie(&http.Cookie{Name: zoneCookie, Value: c.cookie})
			}
			if got := s.zone(r).String(); got != c.page {
				t.Errorf("page: %s, want %s", got, c.page)
			}
			if got := s.streamZone(r).String(); got != c.stream {
				t.Errorf("stream: %s, want %s", got, c.stream)
			}
		})
	}
}
