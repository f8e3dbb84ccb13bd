package registryclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A 302 from the registry is not followed: the auth header never reaches
// the host it points to, and the row is retried as transient.
func TestRedirectIsNotFollowed(t *testing.T) {
	var reached atomic.Int32
	var leaked atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		leaked.Store(r.Header.Get("X-Api-Key"))
		w.WriteHeader(201)
		w.Write([]byte(`{"product_id":"p"}`))
	}))
	defer other.Close()
	// "localhost" is another host name than the registry's 127.0.0.1.
	target := strings.Replace(other.URL, "127.0.0.1", "localhost", 1) + "/v1/sellers/s/products?token=abc"
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target, code) }))
		defer reg.Close()
		c, err := New(Options{BaseURL: reg.URL, AuthHeader: "X-Api-Key: key-8c1f", AllowInsecureAuth: true})
		if err != nil {
			t.Fatal(err)
		}
		res := c.Register(context.Background(), "seller-1", "u:1", product)
		if res.Class != Misconfigured || res.Status != code || res.Err == nil || !strings.Contains(res.Err.Error(), "redirect") {
			t.Errorf("%d: class %v status %d err %v, want a redirect, misconfigured (the registry URL is not the API's)", code, res.Class, res.Status, res.Err)
		}
		if res.Err != nil && strings.Contains(res.Err.Error(), "token=abc") {
			t.Errorf("the error shows the redirect's query: %v", res.Err)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests (X-Api-Key %q), want none", n, leaked.Load())
	}
}

func TestAuthHeaderNeedsHTTPS(t *testing.T) {
	for _, tt := range []struct {
		url      string
		insecure bool
		ok       bool
	}{
		{"https://registry.example.com", false, true},
		{"http://registry.example.com", false, false},
		{"http://registry.example.com", true, false}, // the opt-out is for loopback only
		{"http://10.0.0.8:8081", true, false},
		{"http://127.0.0.1:8081", false, false},
		{"http://127.0.0.1:8081", true, true},
		{"http://localhost:8081", true, true},
		{"http://[::1]:8081", true, true},
	} {
		_, err := New(Options{BaseURL: tt.url, AuthHeader: "Authorization: Bearer tok-3a7e", AllowInsecureAuth: tt.insecure})
		if (err == nil) != tt.ok {
			t.Errorf("%s (insecure %v): err = %v, want ok=%v", tt.url, tt.insecure, err, tt.ok)
		}
		if err != nil && strings.Contains(err.Error(), "tok-3a7e") {
			t.Errorf("the error shows the header's value: %v", err)
		}
	}
	if _, err := New(Options{BaseURL: "http://registry.example.com"}); err != nil {
		t.Errorf("plain http without an auth header: %v", err)
	}
}

// A seller id that is not one path segment of letters, digits, _ and -
// is never put into a URL.
func TestBadSellerIDsMakeNoCall(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	defer srv.Close()
	c, err := New(Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"..", "a/b", "a\nb", "."} {
		if res := c.Register(context.Background(), id, "u:1", product); res.Class != Permanent || res.Code != "bad_seller_id" {
			t.Errorf("seller %q: class %v code %q, want permanent bad_seller_id", id, res.Class, res.Code)
		}
	}
	if calls.Load() != 0 {
		t.Errorf("%d calls made", calls.Load())
	}
}
