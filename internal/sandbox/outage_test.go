package sandbox

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestOutageSwitch(t *testing.T) {
	srv, ts := start(t, Options{})
	c := ts.Client()
	admin := func(method, body string) (int, OutageReport) {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+"/admin/outage", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var r OutageReport
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("%s /admin/outage answered %q: %v", method, b, err)
			}
		}
		return resp.StatusCode, r
	}

	if r := mustCall(t, c, ts.URL, "s", "k1", productJSON("A")); r.status != http.StatusCreated {
		t.Fatalf("no outage: %d, want 201", r.status)
	}

	// One poison SKU: it fails every time; the others register.
	if code, r := admin(http.MethodPut, `{"skus":["POISON"]}`); code != http.StatusOK || len(r.SKUs) != 1 {
		t.Fatalf("PUT skus: %d %+v", code, r)
	}
	for i := range 3 {
		if r := mustCall(t, c, ts.URL, "s", "kp", productJSON("POISON")); r.status != http.StatusServiceUnavailable || r.apiErr(t).Code != "unavailable" {
			t.Fatalf("poison call %d: %d %s, want 503 unavailable", i+1, r.status, r.body)
		}
	}
	if r := mustCall(t, c, ts.URL, "s", "k2", productJSON("B")); r.status != http.StatusCreated {
		t.Fatalf("another SKU during the poison outage: %d %s, want 201 (the body was put back for the handler)", r.status, r.body)
	}
	if _, r := admin(http.MethodGet, ""); r.Refused != 3 || len(r.RefusedAt) != 3 {
		t.Errorf("GET after 3 poison calls: %+v, want 3 refused", r)
	}

	// Everything fails, nothing registers.
	admin(http.MethodPut, `{"all":true}`)
	for _, sku := range []string{"C", "POISON"} {
		if r := mustCall(t, c, ts.URL, "s", "k-"+sku, productJSON(sku)); r.status != http.StatusServiceUnavailable {
			t.Fatalf("full outage, SKU %s: %d, want 503", sku, r.status)
		}
	}
	if r := mustCall(t, c, ts.URL, "s", "k1", productJSON("A")); r.status != http.StatusServiceUnavailable {
		t.Fatalf("full outage, a replay: %d, want 503 (the API is down, not answering replays)", r.status)
	}
	if _, r := admin(http.MethodGet, ""); !r.All || r.Refused != 3 {
		t.Errorf("GET during the full outage: %+v, want all, 3 refused since it was set", r)
	}

	// Off: the API answers again, and nothing was registered meanwhile.
	if code, r := admin(http.MethodDelete, ""); code != http.StatusOK || r.All || len(r.SKUs) != 0 {
		t.Fatalf("DELETE: %d %+v", code, r)
	}
	if r := mustCall(t, c, ts.URL, "s", "k-C", productJSON("C")); r.status != http.StatusCreated {
		t.Fatalf("after the outage: %d, want 201", r.status)
	}
	a := srv.Audit().Sellers["s"]
	if a.Accepted != 3 || a.Failed != 6 {
		t.Errorf("audit %+v, want 3 accepted (A, B, C) and 6 failed", a)
	}

	if code, _ := admin(http.MethodPut, `{"al":true}`); code != http.StatusBadRequest {
		t.Errorf("PUT with an unknown field: %d, want 400", code)
	}
}
