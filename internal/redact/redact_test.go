package redact

import (
	"net/url"
	"strings"
	"testing"
)

func TestURLHidesEveryCredential(t *testing.T) {
	const pw = "S3cr3tPw"
	for _, tt := range []struct{ raw, want string }{
		{"http://svc:" + pw + "@host", "http://svc:xxxxx@host"},
		{"https://svc:" + pw + "@host:8443/base/", "https://svc:xxxxx@host:8443/base/"},
		{"https://svc@host/p", "https://svc@host/p"}, // a user without a password keeps its name
		{"https://host/p?token=" + pw, "https://host/p?token=xxxxx"},
		{"https://host/p?api_key=" + pw + "&page=2", "https://host/p?api_key=xxxxx&page=xxxxx"},
		{"https://host/p?" + pw, "https://host/p?xxxxx"},
		{"https://host/p?a=1&&b", "https://host/p?a=xxxxx&&xxxxx"},
		{"https://host/p#access_token=" + pw, "https://host/p"},
		{"https://svc:" + pw + "@host/p?sig=" + pw + "#" + pw, "https://svc:xxxxx@host/p?sig=xxxxx"},
		{"http://127.0.0.1:8081", "http://127.0.0.1:8081"},
		// Malformed: url.Parse errs or reads the credentials as a path.
		{"http//user:" + pw + "@registry.example.com", "…@registry.example.com"},
		{"user:" + pw + "@registry.example.com/x?token=" + pw, "…@registry.example.com/x?xxxxx"},
		{"http://user:p w" + pw + "@registry.example.com", "…@registry.example.com"},
		{"http://user:" + pw + "%zz@registry.example.com", "…@registry.example.com"},
		{" https://user:" + pw + "@registry.example.com", "…@registry.example.com"},
	} {
		got := URL(tt.raw)
		if got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.raw, got, tt.want)
		}
		if strings.Contains(got, pw) {
			t.Errorf("URL(%q) = %q holds the secret", tt.raw, got)
		}
	}
}

func TestParsedLeavesItsArgumentAlone(t *testing.T) {
	u, _ := url.Parse("https://svc:pw-1@host/p?token=t-1#f")
	before := u.String()
	if got := Parsed(u); got != "https://svc:xxxxx@host/p?token=xxxxx" {
		t.Errorf("Parsed = %q", got)
	}
	if u.String() != before {
		t.Errorf("Parsed changed its argument: %q, was %q", u.String(), before)
	}
}
