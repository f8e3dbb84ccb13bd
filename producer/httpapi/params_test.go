package httpapi

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

func TestParseBool(t *testing.T) {
	cases := []struct {
		query string
		want  bool
		ok    bool
	}{
		{"", false, true},
		{"other=1", false, true},
		{"p=true", true, true},
		{"p=false", false, true},
		{"p=maybe", false, false},
		{"p=1", false, false},
		{"p=0", false, false},
		{"p=TRUE", false, false},
		{"p=True", false, false},
		{"p=t", false, false},
		{"p=yes", false, false},
		{"p=", false, false},
		{"p", false, false},
		{"p=true%20", false, false},
		{"p=true&p=true", false, false},
		{"p=true&p=false", false, false},
	}
	for _, c := range cases {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseBool(q, "p")
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("?%s: %v, %v; want %v, accepted %v", c.query, got, err, c.want, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "p must be") {
			t.Errorf("?%s: error %q does not name the parameter", c.query, err)
		}
	}
}

// TestBooleanParametersAreStrict: ?dry_run=maybe must not publish for
// real. Every boolean parameter of the API refuses what is not
// true or false with 400 bad_parameter naming it, before any slot, body or
// publishing.
func TestBooleanParametersAreStrict(t *testing.T) {
	h := newHTTPEnv(t)
	tok := token(t, "a")
	file := xlsx(t, "bools", validRows(2)...)
	for _, param := range []string{"dry_run", "strict", "failed_only"} {
		for _, v := range []string{"maybe", "1", "0", "TRUE", "yes", "", "true&" + param + "=true"} {
			path, method := "/v1/uploads?", "POST"
			if param == "failed_only" {
				path, method = "/v1/uploads/0123456789abcdef/report.xlsx?", "GET"
			}
			path += param + "=" + v
			var ct string
			var body *strings.Reader
			if method == "POST" {
				c, b := multipartBody(t, "file", file, nil)
				ct, body = c, strings.NewReader(b.String())
			} else {
				body = strings.NewReader("")
			}
			resp, b := h.do(t, method, path, tok, ct, body)
			var p struct {
				Code, Parameter, Detail string
			}
			json.Unmarshal(b, &p)
			if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/problem+json" ||
				p.Code != "bad_parameter" || p.Parameter != param || !strings.Contains(p.Detail, param) {
				t.Errorf("%s %s: %d %s %s, want 400 problem+json bad_parameter naming %s", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), b, param)
			}
		}
	}
	if n := len(consume(t, h.brokers)); n != 0 {
		t.Fatalf("refused parameters published %d messages", n)
	}
	// The two values that are booleans still mean what they say.
	ct, body := multipartBody(t, "file", file, nil)
	if resp, b := h.do(t, "POST", "/v1/uploads?dry_run=true&strict=false", tok, ct, body); resp.StatusCode != 200 || !strings.Contains(string(b), `"dry_run": true`) {
		t.Errorf("dry_run=true: %d %s, want 200 with the check", resp.StatusCode, b)
	}
	if n := len(consume(t, h.brokers)); n != 0 {
		t.Errorf("dry_run=true published %d messages", n)
	}
	ct, body = multipartBody(t, "file", file, nil)
	if resp, b := h.do(t, "POST", "/v1/uploads?dry_run=false&strict=true", tok, ct, body); resp.StatusCode != 201 {
		t.Errorf("dry_run=false: %d %s, want 201", resp.StatusCode, b)
	}
	if n := len(consume(t, h.brokers)); n != 2 {
		t.Errorf("dry_run=false published %d messages, want 2", n)
	}
}
