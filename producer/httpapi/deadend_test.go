package httpapi

import (
	"bytes"
	"html/template"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestSignInDeadEndsSayWhereALinkComesFrom: every answer that asks a seller
// to sign in (signed out, a link expired or used, a page without a
// session, the sign-in page, and the upload page's script after the
// session ended) links to the configured seller center with a plain
// sentence, Korean and English; without one it says in words where a link
// comes from and links to no page of this service, which would be the
// same sign-in page. The script's answer is a fragment: no page inside the
// page.
func TestSignInDeadEndsSayWhereALinkComesFrom(t *testing.T) {
	e := newSignInEnv(t, 30*time.Second)
	const center = "https://seller.example.com/signin?next=bulkreg&x=1"
	used, _ := e.link(t, "seller-a", 10*time.Minute, time.Now())
	if resp := signInWith(t, browserClient(), used); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("using the link: %d", resp.StatusCode)
	}
	expired, _ := e.link(t, "seller-a", 10*time.Minute, time.Now().Add(-time.Hour))
	checkForm := func() (string, *bytes.Buffer) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		fw, _ := mw.CreateFormFile("file", "p.csv")
		fw.Write([]byte("seller_sku,name\nA-1,x\n"))
		mw.Close()
		return mw.FormDataContentType(), &b
	}
	type answer struct {
		status int
		body   string
	}
	ends := []struct {
		name     string
		status   int
		fragment bool
		get      func(lang string) answer
	}{
		{"signed out", http.StatusOK, false, func(lang string) answer {
			resp, b := send(t, browserClient(), "GET", e.srv.URL+"/signin?signed_out=1&lang="+lang, nil)
			return answer{resp.StatusCode, b}
		}},
		{"an expired link", http.StatusUnauthorized, false, func(lang string) answer {
			resp, b := send(t, browserClient(), "GET", expired+"&lang="+lang, nil)
			return answer{resp.StatusCode, b}
		}},
		{"a used link", http.StatusUnauthorized, false, func(lang string) answer {
			resp, b := send(t, browserClient(), "GET", used+"&lang="+lang, nil)
			return answer{resp.StatusCode, b}
		}},
		{"a page without a session", http.StatusUnauthorized, false, func(lang string) answer {
			resp, b := send(t, browserClient(), "GET", e.srv.URL+"/uploads?lang="+lang, nil)
			return answer{resp.StatusCode, b}
		}},
		{"the sign-in page", http.StatusUnauthorized, false, func(lang string) answer {
			resp, b := send(t, browserClient(), "GET", e.srv.URL+"/signin?lang="+lang, nil)
			return answer{resp.StatusCode, b}
		}},
		{"Check after the session ended", http.StatusUnauthorized, true, func(lang string) answer {
			ct, body := checkForm()
			req, _ := http.NewRequest("POST", e.srv.URL+"/upload/check?lang="+lang, body)
			req.Header.Set("Content-Type", ct)
			req.Header.Set("X-Fragment", "1")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			req.AddCookie(&http.Cookie{Name: cookiePlain, Value: "a-session-that-ended"})
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			return answer{resp.StatusCode, string(b)}
		}},
	}
	for _, configured := range []bool{true, false} {
		e.s.SellerCenterURL = ""
		if configured {
			e.s.SellerCenterURL = center
		}
		for _, lang := range []string{langKO, langEN} {
			for _, end := range ends {
				where := end.name + " (" + lang + ", seller center configured: " + map[bool]string{true: "yes", false: "no"}[configured] + ")"
				a := end.get(lang)
				if a.status != end.status {
					t.Errorf("%s: %d, want %d", where, a.status, end.status)
				}
				page := a.body
				if !end.fragment {
					_, page, _ = strings.Cut(a.body, "<main")
				} else if n := strings.Count(a.body, "<header") + strings.Count(a.body, "<main") + strings.Count(a.body, "<h1") + strings.Count(a.body, "<html"); n != 0 {
					t.Errorf("%s: the script's answer holds a page (header, main, h1 or html):\n%s", where, a.body)
				}
				if end.fragment && !strings.Contains(page, `id="session-ended"`) || end.fragment && !strings.Contains(page, shown(lang, "session.ended.title")) {
					t.Errorf("%s: the script's answer does not say to sign in again:\n%s", where, a.body)
				}
				hrefs := hrefsIn(page)
				if configured {
					if len(hrefs) != 1 || hrefs[0] != center || !strings.Contains(page, shown(lang, "signin.center")) || !strings.Contains(page, shown(lang, "signin.center.link")) {
						t.Errorf("%s: links %q, want only the seller center %q with its sentence:\n%s", where, hrefs, center, page)
					}
					continue
				}
				if len(hrefs) != 0 || !strings.Contains(page, shown(lang, "signin.nocenter")) {
					t.Errorf("%s: links %q, want none and the sentence saying where a link comes from:\n%s", where, hrefs, page)
				}
			}
		}
	}
}

// shown is the message as a page shows it, escaped.
func shown(lang, key string) string { return template.HTMLEscapeString(msg(lang, key)) }

// hrefsIn lists the links of a page's main part, unescaped.
func hrefsIn(page string) []string {
	var out []string
	for rest := page; ; {
		var ok bool
		_, rest, ok = strings.Cut(rest, `href="`)
		if !ok {
			return out
		}
		h, _, _ := strings.Cut(rest, `"`)
		u, err := url.Parse(strings.ReplaceAll(h, "&amp;", "&"))
		if err == nil {
			h = u.String()
		}
		out = append(out, h)
	}
}

// TestAnotherSitesLinkToAPageAsksAgainFromHere: a plain link from another
// site to a page carries no SameSite=Strict session, so its sign-in answer
// asks for the same page again from this origin (which carries the
// session); asked from here without a session it is the sign-in page,
// which asks nothing further (no loop).
func TestAnotherSitesLinkToAPageAsksAgainFromHere(t *testing.T) {
	e := newSignInEnv(t, 30*time.Second)
	cases := []struct {
		site, path string
		refresh    string
	}{
		{"cross-site", "/uploads?lang=en", `<meta http-equiv="refresh" content="0;url=/uploads?lang=en">`},
		{"cross-site", "/upload", `<meta http-equiv="refresh" content="0;url=/upload">`},
		{"same-origin", "/uploads", ""},
		{"none", "/uploads", ""},
		{"same-site", "/uploads", ""},
	}
	for _, c := range cases {
		resp, page := send(t, browserClient(), "GET", e.srv.URL+c.path, nil, "Sec-Fetch-Site: "+c.site)
		got := ""
		if i := strings.Index(page, `<meta http-equiv="refresh"`); i >= 0 {
			got, _, _ = strings.Cut(page[i:], "\n")
		}
		if resp.StatusCode != http.StatusUnauthorized || got != c.refresh {
			t.Errorf("GET %s from %s: %d, refresh %q; want 401 and %q", c.path, c.site, resp.StatusCode, got, c.refresh)
		}
	}
}
