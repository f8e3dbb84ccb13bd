package sandbox

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

// With BasicAuth a registration needs the credentials; without them, or
// with others, it is answered 401 and registers nothing. Every request is
// kept whole for the test to read.
func TestBasicAuthAndRequestsKept(t *testing.T) {
	srv, ts := start(t, Options{BasicAuth: "svc:pw-1", KeepRequests: 3})
	send := func(auth string) int {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/sellers/s/products?x=1", strings.NewReader(productJSON("A")))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k1")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	basic := func(cred string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(cred)) }
	for _, tt := range []struct {
		auth string
		want int
	}{
		{"", 401}, {basic("svc:pw-2"), 401}, {"Bearer pw-1", 401}, {basic("svc:pw-1"), 201}, {"basic " + base64.StdEncoding.EncodeToString([]byte("svc:pw-1")), 200},
	} {
		if got := send(tt.auth); got != tt.want {
			t.Errorf("Authorization %q: %d, want %d", tt.auth, got, tt.want)
		}
	}
	if a := srv.Audit().Sellers["s"]; a.Accepted != 1 || a.Invalid != 3 {
		t.Errorf("audit %+v: want 1 accepted, 3 refused", a)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests kept, want the first 3", len(reqs))
	}
	if r := reqs[1]; r.Method != "POST" || r.Target != "/v1/sellers/s/products?x=1" || r.Header.Get("Authorization") != basic("svc:pw-2") || !strings.Contains(r.Body, `"seller_sku":"A"`) {
		t.Errorf("request kept: %+v", r)
	}
}

// DropSKUs' registrations get no answer; others are answered.
func TestChaosDropsSKUs(t *testing.T) {
	srv, ts := start(t, Options{})
	if err := srv.SetChaos(Chaos{DropSKUs: []string{"A"}}); err != nil {
		t.Fatal(err)
	}
	for sku, answered := range map[string]bool{"A": false, "B": true} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/sellers/s/products", strings.NewReader(productJSON(sku)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k-"+sku)
		resp, err := ts.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		if (err == nil) != answered {
			t.Errorf("SKU %s: err %v, want answered=%v", sku, err, answered)
		}
	}
	if a := srv.Audit().Sellers["s"]; a.Accepted != 1 || a.Injected != 1 {
		t.Errorf("audit %+v: want B registered, A's drop injected", a)
	}
}
