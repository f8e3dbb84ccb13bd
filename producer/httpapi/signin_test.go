package httpapi

import (
	"context"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/testbin"
	"github.com/bulkreg/bulkreg/internal/testredis"
)

// signInEnv is a service with sessions in a real Redis and nothing else:
// the sign-in pages need no Kafka.
type signInEnv struct {
	srv *httptest.Server
	s   *Server
	rdb *redis.Client
	log *testbin.Output
}

func newSignInEnv(t *testing.T, leeway time.Duration) *signInEnv {
	t.Helper()
	e, _ := newSignInEnvRedis(t, leeway)
	return e
}

func newSignInEnvRedis(t *testing.T, leeway time.Duration) (*signInEnv, *testredis.Server) {
	t.Helper()
	srvRedis := testredis.Start(t)
	rdb := srvRedis.Client()
	logs := &testbin.Output{}
	s := &Server{Auth: Auth{Secret: secret, Leeway: leeway}, Sessions: NewRedisSessions(rdb),
		Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &signInEnv{srv: srv, s: s, rdb: rdb, log: logs}, srvRedis
}

// link mints a sign-in link for seller valid for ttl from now.
func (e *signInEnv) link(t *testing.T, seller string, ttl time.Duration, now time.Time) (link string, l SignInLink) {
	t.Helper()
	link, err := Minter{Secret: secret}.Link(e.srv.URL, seller, ttl, now)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := url.Parse(link)
	// Read back with no limit on the age: only the claims are wanted.
	l, err = Auth{Secret: secret, Leeway: time.Hour}.VerifyLink(tok.Query().Get("token"), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return link, l
}

func (e *signInEnv) spent(t *testing.T, l SignInLink) bool {
	t.Helper()
	spent, err := e.s.Sessions.LinkSpent(context.Background(), l.ID)
	if err != nil {
		t.Fatal(err)
	}
	return spent
}

// browserClient is a client with a cookie jar that does not follow
// redirects, so each answer (and its Set-Cookie) can be looked at.
func browserClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// send sends a request with the headers given ("Name: value"), a form body
// when form is not nil, and returns the answer and its body.
func send(t *testing.T, c *http.Client, method, u string, form url.Values, headers ...string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// pageForm returns the fields of the page's form with the id given, as the
// browser posts them; nil when the page has no such form.
func pageForm(page, id string) url.Values {
	_, rest, ok := strings.Cut(page, `<form method="post" action="/signin" id="`+id+`">`)
	if !ok {
		return nil
	}
	rest, _, _ = strings.Cut(rest, "</form>")
	f := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(rest, -1) {
		f.Set(m[1], html.UnescapeString(m[2]))
	}
	return f
}

// signInWith opens link with c as a person does: the link's page, then its
// button. It returns the button's answer (303 to /uploads, with the
// session cookie), not followed.
func signInWith(t *testing.T, c *http.Client, link string) *http.Response {
	t.Helper()
	c = noFollow(c)
	resp, page := send(t, c, "GET", link, nil, "Sec-Fetch-Site: cross-site")
	form := pageForm(page, "signin")
	if resp.StatusCode != http.StatusOK || form == nil {
		t.Fatalf("the sign-in link's page: %d, want 200 with the sign-in button:\n%.1500s", resp.StatusCode, page)
	}
	u, _ := url.Parse(link)
	resp, page = send(t, c, "POST", u.Scheme+"://"+u.Host+"/signin", form, "Sec-Fetch-Site: same-origin", "Origin: "+u.Scheme+"://"+u.Host)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/uploads" {
		t.Fatalf("the sign-in button: %d → %q, want 303 to /uploads:\n%.1500s", resp.StatusCode, resp.Header.Get("Location"), page)
	}
	return resp
}

func noFollow(c *http.Client) *http.Client {
	n := *c
	n.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &n
}

// signedInAs is who the pages say c is signed in as ("" when no one), and
// the page's CSRF token.
func signedInAs(t *testing.T, c *http.Client, base string) (seller, csrf string) {
	t.Helper()
	resp, page := send(t, noFollow(c), "GET", base+"/upload", nil, "Accept-Language: en")
	if resp.StatusCode == http.StatusUnauthorized {
		return "", ""
	}
	_, rest, ok := strings.Cut(page, `<span class="who">Signed in as `)
	_, tok, ok2 := strings.Cut(page, `<meta name="csrf-token" content="`)
	if resp.StatusCode != http.StatusOK || !ok || !ok2 {
		t.Fatalf("the upload page: %d, want 200 naming the seller:\n%.1500s", resp.StatusCode, page)
	}
	seller, _, _ = strings.Cut(rest, "<")
	csrf, _, _ = strings.Cut(tok, `"`)
	return seller, csrf
}

func sessionCookie(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	u, _ := url.Parse(base)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == cookiePlain {
			return ck.Value
		}
	}
	return ""
}

// TestOnlySignInLinksOpenSessions: only a sign-in link's token (purpose
// "signin") opens a session at /signin, and that token is not a bearer
// token: a bearer token minted with a lifetime within the sign-in link's
// limit (producer token --ttl 10m) opens no 8-hour session.
func TestOnlySignInLinksOpenSessions(t *testing.T) {
	e := newSessionEnv(t)
	now := time.Now()
	m := Minter{Secret: secret}
	bearer, err := m.Seller("seller-a", 10*time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	c := browserClient()
	for _, req := range []struct {
		method string
		form   url.Values
		u      string
	}{{"GET", nil, e.srv.URL + "/signin?token=" + bearer}, {"POST", url.Values{"token": {bearer}}, e.srv.URL + "/signin"}} {
		resp, _ := send(t, c, req.method, req.u, req.form)
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Errorf("a 10-minute bearer token at %s /signin: %d with cookies %v, want 401 and no session", req.method, resp.StatusCode, resp.Cookies())
		}
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
	if resp := signInWith(t, c, link); len(resp.Cookies()) != 1 {
		t.Fatalf("the sign-in link: cookies %v, want a session cookie", resp.Cookies())
	}
	if resp, err := c.Get(e.srv.URL + "/uploads"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the pages after the sign-in link: %v %v, want 200", resp.StatusCode, err)
	}
	// The bearer token still works as one.
	if resp, b := e.do(t, "GET", "/v1/uploads", bearer, "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("the bearer token on the API: %d %s, want 200", resp.StatusCode, b)
	}
}

// The verifier accepts a link until exp + leeway, so a spent mark that
// ended at exp would let a used link open a new session again. The mark
// must outlive every moment the verifier accepts the link: exp + Leeway, whenever the link was used
// (long before exp, just before it, or after it within the leeway), and by
// 2 × Leeway more, the most two replicas' clocks may differ.
func TestSpentLinkMarkOutlivesTheLeeway(t *testing.T) {
	const leeway = 30 * time.Second // the production value
	e := newSignInEnv(t, leeway)
	for _, c := range []struct {
		name string
		exp  time.Duration // exp − now when the link is used
	}{
		{"used at once, a 15-minute link", DefaultLinkMaxAge},
		{"used 2 s before exp", 2 * time.Second},
		{"used 1 s after exp, within the leeway", -time.Second},
		{"used 28 s after exp, within the leeway", -28 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Minted 20 min ago with a lifetime ending c.exp from now.
			now := time.Now()
			minted := now.Add(-20 * time.Minute)
			link, l := e.link(t, "seller-a", now.Add(c.exp).Sub(minted), minted)
			signInWith(t, browserClient(), link)
			pttl, err := e.rdb.PTTL(context.Background(), hashed("bulkreg:signin:", l.ID)).Result()
			if err != nil {
				t.Fatal(err)
			}
			accepted := time.Until(l.Expires.Add(leeway)) // the verifier's last moment
			t.Logf("the spent mark lives %v more; the verifier accepts the link %v more", pttl, accepted.Round(time.Millisecond))
			if least := accepted + 2*leeway; pttl < least || pttl > least+2*time.Second {
				t.Errorf("the spent mark lives %v more; the link is accepted %v more: want between %v and %v", pttl, accepted, least, least+2*time.Second)
			}
			resp, page := send(t, browserClient(), "GET", link, nil, "Accept-Language: en")
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "was used already") || len(resp.Cookies()) != 0 {
				t.Errorf("the used link again: %d, want 401, the link-used page and no cookie:\n%.1500s", resp.StatusCode, page)
			}
		})
	}
}

// The same in real time with the durations shrunk: a link used once is
// refused at every moment from just before its exp to past exp + leeway,
// by its page and by a replayed button, and never opens a session.
func TestSpentLinkRefusedAroundExpiry(t *testing.T) {
	const leeway = 1500 * time.Millisecond
	e := newSignInEnv(t, leeway)
	now := time.Now()
	link, l := e.link(t, "seller-a", 2*time.Second, now)
	holder := browserClient()
	signInWith(t, holder, link)
	replay := url.Values{"token": {linkToken(t, link)}}
	probes := []struct {
		name  string
		at    time.Duration // from exp
		spent bool          // refused as used (else as expired)
	}{
		{"50 ms before exp", -50 * time.Millisecond, true},
		{"50 ms after exp", 50 * time.Millisecond, true},
		{"half the leeway after exp", leeway / 2, true},
		{"100 ms before exp + leeway", leeway - 100*time.Millisecond, true},
		{"100 ms after exp + leeway", leeway + 100*time.Millisecond, false},
	}
	for _, p := range probes {
		time.Sleep(time.Until(l.Expires.Add(p.at)))
		at := time.Since(l.Expires)
		mark := len(e.log.String())
		resp, page := send(t, browserClient(), "GET", link, nil)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, `<p class="alert" role="alert">`) || len(resp.Cookies()) != 0 {
			t.Errorf("%s (exp %+v): the link's page %d, want 401 saying the link was used, no cookie:\n%.1000s", p.name, at, resp.StatusCode, page)
		}
		resp, _ = send(t, browserClient(), "POST", e.srv.URL+"/signin", replay)
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Errorf("%s (exp %+v): the button replayed: %d with cookies %v, want 401 and no session", p.name, at, resp.StatusCode, resp.Cookies())
		}
		logs := e.log.String()[mark:]
		if p.spent && time.Since(l.Expires) >= leeway {
			t.Logf("%s: the probe ran late (exp %+v), past the leeway: the reason is not checked", p.name, time.Since(l.Expires))
			continue
		}
		if used := strings.Count(logs, "sign-in link used again; refused"); p.spent && used != 2 {
			t.Errorf("%s (exp %+v): %d of 2 refusals say the link was used:\n%s", p.name, at, used, logs)
		}
		if expired := strings.Count(logs, "it has expired"); !p.spent && expired != 2 {
			t.Errorf("%s (exp %+v): %d of 2 refusals say the link expired:\n%s", p.name, at, expired, logs)
		}
		t.Logf("%s: probed at exp %+v", p.name, at.Round(time.Millisecond))
	}
	if seller, _ := signedInAs(t, holder, e.srv.URL); seller != "seller-a" {
		t.Errorf("the first session: signed in as %q, want seller-a", seller)
	}
}

// token is the link's token, as the page's form posts it.
func linkToken(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("token")
}

// Login CSRF: a seller signed in who opens another seller's fresh link
// from another site must not be signed in as that seller silently (what
// they upload next would go to that account). The link asks first, in the
// seller's language, naming both; only a same-origin POST carrying the
// current session's CSRF token switches, and every other request leaves
// the session and the link as they were.
func TestAnotherSellersLinkAsksBeforeSwitching(t *testing.T) {
	e := newSignInEnv(t, 30*time.Second)
	base := e.srv.URL
	c := browserClient()
	a, _ := e.link(t, "seller-a", 10*time.Minute, time.Now())
	signInWith(t, c, a)
	if seller, _ := signedInAs(t, c, base); seller != "seller-a" {
		t.Fatalf("signed in as %q, want seller-a", seller)
	}
	cookieA := sessionCookie(t, c, base)
	_, csrfA := signedInAs(t, c, base)
	b, lb := e.link(t, "seller-b", 10*time.Minute, time.Now())
	tokB := linkToken(t, b)

	// The switch page: both sellers named, in the seller's language;
	// staying is the first, focused choice; switching posts the session's
	// CSRF token.
	for _, lang := range []struct{ accept, stay, swtch, body string }{
		{"ko-KR", "seller-a 판매자로 계속하기", "seller-b 판매자로 바꾸기", "지금 seller-a 판매자로 로그인되어 있습니다. 이 링크는 seller-b 판매자의 로그인 링크입니다."},
		{"en-US", "Stay signed in as seller-a", "Switch to seller seller-b", "You are signed in as seller seller-a. This link signs in seller seller-b"},
	} {
		resp, page := send(t, c, "GET", b, nil, "Sec-Fetch-Site: cross-site", "Accept-Language: "+lang.accept)
		form := pageForm(page, "switch")
		stay := strings.Index(page, `<a class="button" id="switch-stay" href="/uploads" autofocus>`+lang.stay+`</a>`)
		if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 0 || form == nil || form.Get("csrf_token") != csrfA || form.Get("token") != tokB ||
			!strings.Contains(page, lang.body) || stay < 0 || stay > strings.Index(page, lang.swtch) {
			t.Errorf("%s: seller-b's link opened from another site by seller-a: %d, cookies %v, form %v:\n%.3000s", lang.accept, resp.StatusCode, resp.Cookies(), form, page)
		}
	}

	same := []string{"Sec-Fetch-Site: same-origin", "Origin: " + base}
	for _, r := range []struct {
		name    string
		method  string
		form    url.Values
		headers []string
		status  int
	}{
		{"GET from another site", "GET", nil, []string{"Sec-Fetch-Site: cross-site"}, 200},
		{"GET from a sibling site", "GET", nil, []string{"Sec-Fetch-Site: same-site"}, 200},
		{"GET with no fetch metadata", "GET", nil, nil, 200},
		{"the sign-in button (no CSRF token)", "POST", url.Values{"token": {tokB}}, same, 200},
		{"a wrong CSRF token", "POST", url.Values{"token": {tokB}, "csrf_token": {"guess"}}, same, 200},
		{"another session's CSRF token", "POST", url.Values{"token": {tokB}, "csrf_token": {strings.Repeat("A", len(csrfA))}}, same, 200},
		{"a cross-site POST with the CSRF token", "POST", url.Values{"token": {tokB}, "csrf_token": {csrfA}}, []string{"Sec-Fetch-Site: cross-site"}, 403},
		{"a same-site POST with the CSRF token", "POST", url.Values{"token": {tokB}, "csrf_token": {csrfA}}, []string{"Sec-Fetch-Site: same-site"}, 403},
		{"another Origin with the CSRF token", "POST", url.Values{"token": {tokB}, "csrf_token": {csrfA}}, []string{"Origin: http://evil.example"}, 403},
	} {
		u := b
		if r.method == "POST" {
			u = base + "/signin"
		}
		resp, page := send(t, c, r.method, u, r.form, r.headers...)
		if resp.StatusCode != r.status || len(resp.Cookies()) != 0 || (r.status == 200 && pageForm(page, "switch") == nil) {
			t.Errorf("%s: %d, cookies %v; want %d, no cookie, the switch page when 200:\n%.1500s", r.name, resp.StatusCode, resp.Cookies(), r.status, page)
		}
		if seller, _ := signedInAs(t, c, base); seller != "seller-a" || sessionCookie(t, c, base) != cookieA {
			t.Fatalf("%s: now signed in as %q, want still seller-a with the same session", r.name, seller)
		}
		if e.spent(t, lb) {
			t.Fatalf("%s: seller-b's link is used up; it must stay usable until someone confirms", r.name)
		}
	}

	// Confirmed: the switch page's form, posted from the page.
	_, page := send(t, c, "GET", b, nil)
	resp, _ := send(t, c, "POST", base+"/signin", pageForm(page, "switch"), same...)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/uploads" || len(resp.Cookies()) != 1 {
		t.Fatalf("switch confirmed: %d → %q, cookies %v; want 303 to /uploads with the new session", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	if seller, _ := signedInAs(t, c, base); seller != "seller-b" || !e.spent(t, lb) {
		t.Errorf("after switching: signed in as %q (want seller-b), link used %v", seller, e.spent(t, lb))
	}
	old := browserClient()
	u, _ := url.Parse(base)
	old.Jar.SetCookies(u, []*http.Cookie{{Name: cookiePlain, Value: cookieA}})
	if seller, _ := signedInAs(t, old, base); seller != "" {
		t.Errorf("seller-a's session after the switch: still signed in as %q, want ended", seller)
	}
	if !regexp.MustCompile(`"msg":"switched seller",[^\n]*"from":"seller-a","seller":"seller-b"`).MatchString(e.log.String()) {
		t.Errorf("the switch is not logged:\n%s", e.log.String())
	}
}

// A seller signed in who opens a fresh link of their own goes on with the
// session they have (nothing to ask), and the link is used up.
func TestOwnLinkWhileSignedInContinues(t *testing.T) {
	e := newSignInEnv(t, 30*time.Second)
	c := browserClient()
	first, _ := e.link(t, "seller-a", 10*time.Minute, time.Now())
	signInWith(t, c, first)
	cookie := sessionCookie(t, c, e.srv.URL)
	for _, method := range []string{"GET", "POST"} {
		link, l := e.link(t, "seller-a", 10*time.Minute, time.Now())
		u, form := link, url.Values(nil)
		if method == "POST" {
			u, form = e.srv.URL+"/signin", url.Values{"token": {linkToken(t, link)}}
		}
		resp, page := send(t, c, method, u, form, "Sec-Fetch-Site: cross-site")
		if method == "POST" {
			resp, page = send(t, c, method, u, form, "Sec-Fetch-Site: same-origin")
		}
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/uploads" || len(resp.Cookies()) != 0 {
			t.Errorf("%s of the seller's own fresh link while signed in: %d → %q, cookies %v; want 303 to /uploads, the session kept:\n%.1000s",
				method, resp.StatusCode, resp.Header.Get("Location"), resp.Cookies(), page)
		}
		if seller, _ := signedInAs(t, c, e.srv.URL); seller != "seller-a" || sessionCookie(t, c, e.srv.URL) != cookie || !e.spent(t, l) {
			t.Errorf("%s: signed in as %q, same session %v, link used %v; want seller-a, true, true", method, seller, sessionCookie(t, c, e.srv.URL) == cookie, e.spent(t, l))
		}
	}
}

// A chat app's preview or a mail scanner fetches a link before the
// seller does: fetching it must not use it up (the seller would get a dead
// link and the fetcher a session). Fetching the link changes nothing; the page's
// button (a same-origin POST) signs in, once, with a SameSite=Strict
// cookie, also when the link was opened from the seller center (another
// site).
func TestLinkPreviewDoesNotUseTheLink(t *testing.T) {
	e := newSignInEnv(t, 30*time.Second)
	link, l := e.link(t, "seller-a", 10*time.Minute, time.Now())
	for _, fetch := range []struct {
		method  string
		headers []string
	}{
		{"GET", []string{"User-Agent: Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"}},
		{"GET", []string{"User-Agent: facebookexternalhit/1.1;kakaotalk-scrap/1.0", "Accept-Language: ko"}},
		{"HEAD", []string{"User-Agent: Microsoft Office/16.0"}},
		{"GET", []string{"Sec-Purpose: prefetch", "Sec-Fetch-Site: cross-site"}},
	} {
		resp, page := send(t, browserClient(), fetch.method, link, nil, fetch.headers...)
		if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 0 || e.spent(t, l) || (fetch.method == "GET" && pageForm(page, "signin") == nil) {
			t.Fatalf("%s %v: %d, cookies %v, link used %v; want 200, the sign-in button, no cookie, the link unused:\n%.1000s",
				fetch.method, fetch.headers, resp.StatusCode, resp.Cookies(), e.spent(t, l), page)
		}
		if h := resp.Header; h.Get("Referrer-Policy") != "no-referrer" || h.Get("Cache-Control") != "no-store" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("the link's page: Referrer-Policy %q, Cache-Control %q, X-Frame-Options %q; want no-referrer, no-store, DENY (the button must not be framed)",
				h.Get("Referrer-Policy"), h.Get("Cache-Control"), h.Get("X-Frame-Options"))
		}
	}
	// The page names the seller and the button, in Korean first; its
	// language switch keeps the link.
	_, page := send(t, browserClient(), "GET", link, nil, "Accept-Language: ko")
	english := `<a href="?` + html.EscapeString(url.Values{"lang": {"en"}, "token": {linkToken(t, link)}}.Encode()) + `" hreflang="en" lang="en">English</a>`
	for _, want := range []string{"<h1>seller-a 판매자로 로그인할까요?</h1>", `id="signin-yes" autofocus>seller-a 판매자로 로그인</button>`, english} {
		if !strings.Contains(page, want) {
			t.Errorf("the link's page lacks %q:\n%.2000s", want, page)
		}
	}
	resp, page := send(t, browserClient(), "GET", link+"&lang=en", nil, "Accept-Language: ko")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "<h1>Sign in as seller seller-a?</h1>") || pageForm(page, "signin").Get("token") != linkToken(t, link) {
		t.Errorf("the link's page switched to English: %d:\n%.2000s", resp.StatusCode, page)
	}

	// The seller, from the seller center (another site), presses the button.
	c := browserClient()
	resp = signInWith(t, c, link)
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == cookiePlain {
			cookie = ck
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || cookie.MaxAge != int(DefaultSessionTTL/time.Second) {
		t.Errorf("session cookie %+v, want HttpOnly, SameSite=Strict, Path=/, %v", cookie, DefaultSessionTTL)
	}
	if seller, _ := signedInAs(t, c, e.srv.URL); seller != "seller-a" || !e.spent(t, l) {
		t.Errorf("after the button: signed in as %q, link used %v; want seller-a, true", seller, e.spent(t, l))
	}
	// Once: the button pressed again elsewhere, or the link opened again
	// without the session, is refused.
	resp, _ = send(t, browserClient(), "POST", e.srv.URL+"/signin", url.Values{"token": {linkToken(t, link)}})
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("the button replayed: %d, cookies %v; want 401, no session", resp.StatusCode, resp.Cookies())
	}
	resp, page = send(t, browserClient(), "GET", link, nil, "Accept-Language: en")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "This sign-in link has expired or was used already.") {
		t.Errorf("the used link's page: %d, want 401 saying it was used:\n%.1000s", resp.StatusCode, page)
	}
	// A form another site posts never signs in, even with an unused link.
	other, lo := e.link(t, "seller-b", 10*time.Minute, time.Now())
	for _, h := range []string{"Sec-Fetch-Site: cross-site", "Origin: http://evil.example"} {
		resp, _ = send(t, browserClient(), "POST", e.srv.URL+"/signin", url.Values{"token": {linkToken(t, other)}}, h)
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 || e.spent(t, lo) {
			t.Errorf("sign-in posted from another site (%s): %d, cookies %v, link used %v; want 403, nothing", h, resp.StatusCode, resp.Cookies(), e.spent(t, lo))
		}
	}
}

// With Redis down a link can be neither checked for use nor used: its page
// and its button answer 503 and set no cookie; nothing signs in on a guess.
func TestSignInLinkWhenRedisIsDown(t *testing.T) {
	e, r := newSignInEnvRedis(t, 30*time.Second)
	link, _ := e.link(t, "seller-a", 10*time.Minute, time.Now())
	r.Stop()
	for _, req := range []struct {
		method, u string
		form      url.Values
	}{{"GET", link, nil}, {"POST", e.srv.URL + "/signin", url.Values{"token": {linkToken(t, link)}}}} {
		resp, page := send(t, browserClient(), req.method, req.u, req.form, "Accept-Language: en")
		if resp.StatusCode != http.StatusServiceUnavailable || len(resp.Cookies()) != 0 || pageForm(page, "signin") != nil {
			t.Errorf("%s with Redis down: %d, cookies %v; want 503, no cookie, no button:\n%.1000s", req.method, resp.StatusCode, resp.Cookies(), page)
		}
	}
	if !strings.Contains(e.log.String(), `"msg":"sign-in failed"`) {
		t.Errorf("the failure is not logged:\n%s", e.log.String())
	}
}
