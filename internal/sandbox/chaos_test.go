package sandbox

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestChaos(t *testing.T) {
	cases := []struct {
		name   string
		chaos  Chaos
		seller string
		body   string
		status int
		code   string
		retry  string // the Retry-After header wanted, "" none
	}{
		{"401 burst", Chaos{Status: 401}, "s", productJSON("A"), 401, "unauthorized", ""},
		{"403 burst", Chaos{Status: 403}, "s", productJSON("A"), 403, "forbidden", ""},
		{"whole-API 503", Chaos{Status: 503}, "s", productJSON("A"), 503, "unavailable", ""},
		{"the failing seller", Chaos{Sellers: []string{"s"}}, "s", productJSON("A"), 503, "unavailable", ""},
		{"another seller flows", Chaos{Sellers: []string{"other"}}, "s", productJSON("A"), 201, "", ""},
		{"the poison SKU", Chaos{SKUs: []string{"A"}}, "s", productJSON("A"), 503, "unavailable", ""},
		{"another SKU flows (the body is put back)", Chaos{SKUs: []string{"B"}}, "s", productJSON("A"), 201, "", ""},
		{"429 storm", Chaos{Storm: true, StormRetryAfter: 2}, "s", productJSON("A"), 429, "rate_limited", "2"},
		{"storm's Retry-After is at least 1", Chaos{Storm: true}, "s", productJSON("A"), 429, "rate_limited", "1"},
		{"a name the API refuses", Chaos{RefuseNameContaining: "상"}, "s", productJSON("A"), 422, "invalid_value", ""},
		{"a name it accepts", Chaos{RefuseNameContaining: "BANNED"}, "s", productJSON("A"), 201, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, ts := start(t, Options{Latency: 20 * time.Millisecond})
			if err := srv.SetChaos(tc.chaos); err != nil {
				t.Fatal(err)
			}
			r := mustCall(t, ts.Client(), ts.URL, tc.seller, "k1", tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d %s, want %d", r.status, r.body, tc.status)
			}
			if tc.code != "" && r.apiErr(t).Code != tc.code {
				t.Errorf("error code %q, want %q", r.apiErr(t).Code, tc.code)
			}
			if got := r.header.Get("Retry-After"); got != tc.retry {
				t.Errorf("Retry-After %q, want %q", got, tc.retry)
			}
			a := srv.Audit().Sellers[tc.seller]
			wantInjected := 0
			if tc.status != 201 && tc.status != 422 {
				wantInjected = 1
			}
			if a.Injected != wantInjected || a.RateLimited != 0 || a.Failed != 0 {
				t.Errorf("audit %+v: want %d injected, no 429 or failure of the contract's", a, wantInjected)
			}
			if tc.status != 201 && a.Accepted != 0 {
				t.Errorf("an injected answer registered %d products", a.Accepted)
			}
			calls := srv.Calls()
			if len(calls) != 1 {
				t.Fatalf("call log %+v, want one call", calls)
			}
			c := calls[0]
			if c.Status != tc.status || c.Key != "k1" || c.Seller != tc.seller || c.Injected != (wantInjected == 1) {
				t.Errorf("call log %+v", c)
			}
			if c.Handled.Sub(c.Received) < 20*time.Millisecond {
				t.Errorf("handled %s after it arrived, want the 20ms latency first (the counting moment moves with it)", c.Handled.Sub(c.Received))
			}
			if (tc.status == 201 || tc.status == 422 || len(tc.chaos.SKUs) > 0) && c.SKU != "A" {
				t.Errorf("call log SKU %q, want A", c.SKU)
			}
			// Off: the same key registers.
			if err := srv.SetChaos(Chaos{}); err != nil {
				t.Fatal(err)
			}
			if r := mustCall(t, ts.Client(), ts.URL, tc.seller, "k2", productJSON("A2")); r.status != 201 {
				t.Errorf("after chaos is off: %d, want 201", r.status)
			}
		})
	}
}

func TestChaosRefusesUnusableSwitches(t *testing.T) {
	srv, ts := start(t, Options{})
	for _, c := range []Chaos{{Status: 429}, {Status: 200}, {Status: 99}, {StormRetryAfter: -1}} {
		if err := srv.SetChaos(c); err == nil {
			t.Errorf("SetChaos(%+v) took it", c)
		}
	}
	if err := srv.SetChaos(Chaos{Status: 401}); err != nil {
		t.Fatal(err)
	}
	// Over HTTP: PUT switches on, GET reads it, DELETE switches off.
	req, _ := http.NewRequest(http.MethodPut, ts.URL+"/admin/chaos", strings.NewReader(`{"status":429}`))
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("PUT a 429 status: %d, want 400", resp.StatusCode)
	}
	if got := srv.Chaos(); got.Status != 401 {
		t.Errorf("a refused switch changed chaos to %+v", got)
	}
	req, _ = http.NewRequest(http.MethodDelete, ts.URL+"/admin/chaos", nil)
	if resp, err = ts.Client().Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := srv.Chaos(); got.Status != 0 {
		t.Errorf("after DELETE: %+v", got)
	}
}
