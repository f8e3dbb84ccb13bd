package httpapi

import (
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"
)

// Issue 27: a bearer token minted with a lifetime within the sign-in
// link's limit (producer token --ttl 10m) opened an 8-hour session at
// /signin. Only a sign-in link's token (purpose "signin") opens one, and
// that token is not a bearer token.
func TestOnlySignInLinksOpenSessions(t *testing.T) {
	e := newSessionEnv(t)
	now := time.Now()
	m := Minter{Secret: secret}
	bearer, err := m.Seller("seller-a", 10*time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(e.srv.URL + "/signin?token=" + bearer)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("a 10-minute bearer token at /signin: %d with cookies %v, want 401 and no session", resp.StatusCode, resp.Cookies())
	}
	if resp, err := c.Get(e.srv.URL + "/uploads"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the pages after a bearer token at /signin: %v %v, want 401 (not signed in)", resp.StatusCode, err)
	}
	if !strings.Contains(e.log.String(), "sign-in link refused") {
		t.Errorf("the refusal is not logged:\n%s", e.log.String())
	}

	link, err := m.Link(e.srv.URL, "seller-a", 10*time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	linkToken := strings.TrimPrefix(link, e.srv.URL+"/signin?token=")
	if resp, b := e.do(t, "GET", "/v1/uploads", linkToken, "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a sign-in link's token as a bearer token: %d %s, want 401", resp.StatusCode, b)
	}
	if resp, err := c.Get(link); err != nil || resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 {
		t.Fatalf("the sign-in link: %v %v, want 200 and a session cookie", resp, err)
	}
	if resp, err := c.Get(e.srv.URL + "/uploads"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the pages after the sign-in link: %v %v, want 200", resp.StatusCode, err)
	}
	// The bearer token still works as one.
	if resp, b := e.do(t, "GET", "/v1/uploads", bearer, "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("the bearer token on the API: %d %s, want 200", resp.StatusCode, b)
	}
}
