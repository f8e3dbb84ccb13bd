package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/throttle"
)

var operatorSecret = []byte("operator-secret-operator-secret-0123456789")

func TestComplianceHandler(t *testing.T) {
	ctx := context.Background()
	rec := compliance.NewRecorder(testredis.Start(t).Client(), time.Hour)
	now := time.Now()
	for i := range 5 {
		status, class := 201, "registered"
		if i == 4 {
			status, class = 429, "rate_limited"
		}
		if err := rec.Record(ctx, "seller-a", compliance.Call{At: now.Add(-time.Second + time.Duration(i)*10*time.Millisecond), Status: status, Class: class, Key: "u:" + itoa(i+2)}); err != nil {
			t.Fatal(err)
		}
	}
	auth := Auth{Secret: secret, OperatorSecret: operatorSecret}
	h := ComplianceHandler(auth, rec, throttle.Policy{Limit: 3, Window: time.Minute})
	op, _ := MintOperatorToken(operatorSecret, "ops", time.Hour, now)
	// Whoever can mint sellers' tokens can write "role": "operator" into one.
	forged, _ := MintOperatorToken(secret, "ops", time.Hour, now)
	cases := []struct {
		name, tok, query string
		status           int
	}{
		{"operator", op, "", 200},
		{"seller token", token(t, "seller-a"), "", 403},
		{"operator role signed with the seller key", forged, "", 403},
		{"garbage", "x.y.z", "", 401},
		{"no token", "", "", 401},
		{"bad window", op, "?window=soon", 400},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/v1/compliance"+c.query, nil)
		if c.tok != "" {
			r.Header.Set("Authorization", "Bearer "+c.tok)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, w.Code, w.Body, c.status)
			continue
		}
		if c.status != 200 {
			continue
		}
		var rep compliance.Report
		json.Unmarshal(w.Body.Bytes(), &rep)
		if len(rep.Sellers) != 1 || rep.Sellers[0].Calls != 5 || rep.Sellers[0].Accepted != 4 || rep.Sellers[0].RateLimited != 1 ||
			rep.Sellers[0].MaxInWindow != 4 || !rep.Sellers[0].Exceeded || !rep.Exceeded {
			t.Errorf("report %s: want seller-a with 5 calls, 4 accepted in one window over the limit 3, one 429", w.Body)
		}
		// This Redis was never initialised (producer redis-init), so it
		// cannot tell whether it lost data: the answer does not vouch for
		// the period, and says so.
		if g := rep.Sellers[0].Uncovered; rep.Complete || g == nil || g.Cause != compliance.CauseUnknown || !g.To.After(g.From) {
			t.Errorf("report %s: want seller-a's period not covered (unknown) and the report not complete", w.Body)
		}
	}
	// An operator's token is no seller's: it cannot read uploads.
	if _, err := auth.Verify(op); err == nil {
		t.Error("an operator's token passed as a seller's")
	}
}

// FuzzVerify: no input makes token checking panic or accept a token not
// signed with the secret.
func FuzzVerify(f *testing.F) {
	good, _ := MintToken(secret, "s", time.Hour, time.Now())
	f.Add(good)
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJzIn0.")
	f.Add("a.b.c")
	a := Auth{Secret: secret}
	f.Fuzz(func(t *testing.T, tok string) {
		seller, err := a.Verify(tok)
		// Only a token signed with the secret verifies (the fuzzer cannot
		// forge HMAC), so the only seller that can come out is the seed's.
		if err == nil && seller != "s" {
			t.Errorf("token %q verified as %q", tok, seller)
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", tok)
		a.Seller(r)
	})
}
