package registryclient

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// Review of issue 45 item 6. scrub hides a credential only where the whole
// secret appears verbatim in Err. A proxy's page that is not the contract's
// JSON reaches Err through snippet, which cuts the body at 120 bytes and
// quotes it with %q: a credential cut by the 120-byte end, or one holding a
// character %q escapes (a quote, a backslash), is no longer found, and its
// prefix or escaped form goes to the logs and the dead-letter headers.
func TestReviewEchoedCredentialsCutOrQuotedAreHidden(t *testing.T) {
	for _, tc := range []struct {
		name, password string
		pad            int // bytes of the page before the echoed header
		leak           func(password, basic string) string
	}{
		{"Basic credentials cut by the 120-byte snippet", "S3cr3tPw-long-enough", 120 - len("Authorization: Basic ") - 16,
			func(_, basic string) string { return basic[:16] }},
		{"password cut by the 120-byte snippet", "S3cr3tPw-long-enough", 120 - len("password=") - 12,
			func(p, _ string) string { return p[:12] }},
		{"password with a quote, escaped by %q", `S3cr"tPw`, 0,
			func(p, _ string) string { return strings.ReplaceAll(p, `"`, `\"`) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			basic := base64.StdEncoding.EncodeToString([]byte(testUser + ":" + tc.password))
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusBadGateway)
				pad := strings.Repeat("x", tc.pad)
				if strings.HasPrefix(tc.name, "password") {
					_, p, _ := r.BasicAuth()
					fmt.Fprintf(w, "%spassword=%s", pad, p)
					return
				}
				fmt.Fprintf(w, "%s%s", pad, "Authorization: "+r.Header.Get("Authorization"))
			}))
			defer s.Close()
			u, _ := url.Parse(s.URL)
			u.User = url.UserPassword(testUser, tc.password)
			c, err := New(Options{BaseURL: u.String(), AllowInsecureAuth: true})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			res := c.Register(context.Background(), "seller-1", "u:1", product)
			leak := tc.leak(tc.password, basic)
			if res.Err == nil {
				t.Fatal("a 502 without an error")
			}
			if strings.Contains(res.Err.Error(), leak) {
				t.Errorf("Err holds %q of the credential:\n%v", leak, res.Err)
			}
		})
	}
}
