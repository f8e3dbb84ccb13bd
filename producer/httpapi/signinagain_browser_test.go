package httpapi_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/bulkreg/bulkreg/devstack"
	"github.com/bulkreg/bulkreg/producer/httpapi"
)

// The words of the sign-in pages a seller must read, by language: where a
// link comes from with the seller center configured, without it, and the
// notice after a session ended.
var signInWords = map[string]struct{ center, noCenter, again string }{
	"ko": {"판매자 센터에 로그인한 뒤 bulkreg 로그인 링크를 열어 주세요.", "판매자 센터 주소를 모르면 bulkreg 운영자에게 물어 주세요.", "다시 로그인해 주세요"},
	"en": {"Sign in to your seller center and open the bulkreg sign-in link there.", "If you do not know the seller center's address, ask the bulkreg operator.", "Please sign in again"},
}

// sellerCenterSite is a stand-in for the seller center, on localhost (another
// site than the service's 127.0.0.1): its sign-in page, and /to?u=… a page
// with one link (#go) to u, as the seller center links to bulkreg.
func sellerCenterSite(t *testing.T) (signIn, linkTo func(string) string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/to" {
			fmt.Fprintf(w, `<!doctype html><html lang="en"><title>seller center</title><a id="go" href="%s">bulkreg</a>`, html.EscapeString(r.URL.Query().Get("u")))
			return
		}
		fmt.Fprint(w, `<!doctype html><html lang="en"><title>seller center</title><h1 id="center">Seller center sign-in</h1>`)
	}))
	t.Cleanup(srv.Close)
	base := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	return func(string) string { return base + "/signin?next=bulkreg" },
		func(u string) string { return base + "/to?u=" + url.QueryEscape(u) }
}

// mainLinks are the hrefs of the page's main part, as written.
func mainLinks(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `[...document.querySelectorAll("main a")].map(a => a.getAttribute("href"))`)
}

// TestSignInDeadEndsInTheBrowser: signed out, a link expired or used
// already, a page opened without a session and the sign-in page itself,
// in Korean and English: with --seller-center-url each says where a link
// comes from and links to the seller center (its href is the configured
// address, and following it arrives there); without it each says so in
// words, with the operator to ask, and links nowhere (a link to a page of
// the service would show the same sign-in page). A plain link from the seller
// center to a page lands a signed-in seller on it (the Strict cookie is
// sent when the page asks again from its origin) and a signed-out one on
// the sign-in page, which then stays. axe-core and a 390 px phone in each.
func TestSignInDeadEndsInTheBrowser(t *testing.T) {
	// A browser and a stack of its own, and nothing timed closer than
	// seconds: it runs beside another such test (the notices and the
	// outage, which read the circuit's timing, run alone).
	t.Parallel()
	center, linkTo := sellerCenterSite(t)
	ctx, stack := browserStack(t, devstack.Options{Consumers: 1, Partitions: 1, SellerCenterURL: center("")})
	configured := stack.ProducerURL
	// The same service without a seller center, on another host name so
	// that it has cookies of its own.
	bare := httptest.NewServer((&httpapi.Server{Auth: httpapi.Auth{Secret: stack.Secret, Leeway: 30 * time.Second},
		Sessions: httpapi.NewRedisSessions(stack.Redis), LinkMaxAge: devstack.LinkTTL}).Handler())
	t.Cleanup(bare.Close)
	unconfigured := strings.Replace(bare.URL, "127.0.0.1", "localhost", 1)

	mint := func(base string, now time.Time) string {
		l, err := httpapi.Minter{Secret: stack.Secret}.Link(base, "seller-a", 10*time.Minute, now)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	// A link used already, by its button's POST.
	spent := func(base string) string {
		l := mint(base, time.Now())
		tok, _ := url.Parse(l)
		resp, err := http.PostForm(base+"/signin", url.Values{"token": {tok.Query().Get("token")}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return l
	}
	for _, base := range []string{configured, unconfigured} {
		withCenter := base == configured
		ends := []struct{ name, url string }{
			{"the signed-out page", base + "/signin?signed_out=1"},
			{"an expired link", mint(base, time.Now().Add(-time.Hour))},
			{"a link used already", spent(base)},
			{"a page without a session", base + "/uploads"},
			{"the sign-in page", base + "/signin"},
		}
		for _, lang := range langs {
			for _, end := range ends {
				state := fmt.Sprintf("%s (seller center configured: %v)", end.name, withCenter)
				nav(t, ctx, withLang(end.url, lang))
				links, words := mainLinks(t, ctx), text(t, ctx, "main")
				if withCenter {
					if !slices.Equal(links, []string{center("")}) || !strings.Contains(words, signInWords[lang].center) {
						t.Errorf("%s in %s: links %q, says %q; want only the seller center %s, and where a link comes from", state, lang, links, words, center(""))
					}
				} else if len(links) != 0 || !strings.Contains(words, signInWords[lang].noCenter) {
					t.Errorf("%s in %s: links %q, says %q; want no link and the words saying where a link comes from", state, lang, links, words)
				}
				if strings.Contains(text(t, ctx, "header"), "seller-a") {
					t.Errorf("%s in %s: the header names the seller", state, lang)
				}
				fits(t, ctx, state, lang, "")
			}
		}
	}
	// Following the link arrives at the seller center.
	nav(t, ctx, withLang(configured+"/uploads", "ko"))
	within(t, ctx, 20*time.Second, chromedp.Click(chromedp.CSS("#seller-center")))
	poll(t, ctx, `document.getElementById("center") !== null && location.href === `+jsString(center("")))

	// A plain link from the seller center to the uploads page.
	link := mint(configured, time.Now())
	openSignInLink(t, ctx, link)
	poll(t, ctx, `location.pathname === "/uploads" && document.querySelector(".who") !== null`)
	follow := func() {
		t.Helper()
		within(t, ctx, 20*time.Second, chromedp.Navigate(linkTo(configured+"/uploads")), chromedp.WaitVisible(chromedp.CSS("#go")), chromedp.Click(chromedp.CSS("#go")))
		poll(t, ctx, `location.pathname === "/uploads" && document.querySelector("main h1") !== null && document.readyState === "complete"`)
	}
	follow()
	poll(t, ctx, `document.querySelector(".who") !== null`)
	if h := text(t, ctx, "main h1"); h != "등록 내역" {
		t.Errorf("a signed-in seller following the seller center's link to the uploads sees %q, want the uploads", h)
	}
	within(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS(".signout summary")), chromedp.WaitVisible(chromedp.CSS("#signout-yes")), chromedp.Click(chromedp.CSS("#signout-yes")))
	poll(t, ctx, `location.search.includes("signed_out")`)
	follow()
	poll(t, ctx, `document.querySelector("main h1").innerText === "로그인이 필요합니다"`)
	eval[bool](t, ctx, `window.stayed = true`)
	time.Sleep(time.Second) // a page that asked again without end would be gone by now
	if !eval[bool](t, ctx, `window.stayed === true && document.querySelector("main h1").innerText === "로그인이 필요합니다"`) {
		t.Error("signed out, the sign-in page that a link from another site opened did not stay: it asks again without end")
	}
}

func jsString(s string) string { return fmt.Sprintf("%q", s) }

// TestSessionEndedInTheBrowser: the upload page is open with a file chosen
// when the session ends (signed out in another tab; expired in the store).
// Check and Register then show, in place, "sign in again" with the seller
// center's link, focused; no page inside the page (one header, one main,
// one h1); the header no longer names the seller nor offers the menu or
// sign-out; nothing is registered; axe-core finds nothing at 390 and
// 1280 px, in Korean and English.
func TestSessionEndedInTheBrowser(t *testing.T) {
	// A browser and a stack of its own, and nothing timed closer than
	// seconds: it runs beside another such test (the notices and the
	// outage, which read the circuit's timing, run alone).
	t.Parallel()
	center, _ := sellerCenterSite(t)
	ctx, stack := browserStack(t, devstack.Options{Consumers: 1, Partitions: 1, SellerCenterURL: center("")})
	base := stack.ProducerURL
	file := productFile(t, 12, 5)
	link := func() string {
		l, err := stack.SignInLink("seller-a")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ends := []struct {
		how  string
		end  func()
		lang string
	}{
		{"signed out in another tab", func() {
			tab, cancel := chromedp.NewContext(ctx)
			defer cancel()
			// The tab's first action opens it and must carry no deadline:
			// the tab lives as long as that action's context.
			if err := chromedp.Do(tab, chromedp.Navigate("about:blank")); err != nil {
				t.Fatal(err)
			}
			within(t, tab, 20*time.Second, chromedp.Navigate(base+"/uploads"), chromedp.WaitVisible(chromedp.CSS(".signout summary")),
				chromedp.Click(chromedp.CSS(".signout summary")), chromedp.WaitVisible(chromedp.CSS("#signout-yes")), chromedp.Click(chromedp.CSS("#signout-yes")))
			poll(t, tab, `location.search.includes("signed_out")`)
		}, "ko"},
		{"expired", func() { endSessions(t, stack) }, "en"},
	}
	for _, e := range ends {
		for _, button := range []string{"#check", "#register"} {
			openSignInLink(t, ctx, withLang(link(), e.lang))
			poll(t, ctx, `location.pathname === "/uploads"`)
			nav(t, ctx, base+"/upload")
			within(t, ctx, 20*time.Second, chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{file}))
			e.end()
			within(t, ctx, 20*time.Second, chromedp.Click(chromedp.CSS(button)))
			poll(t, ctx, `document.getElementById("session-ended") !== null`)
			state := fmt.Sprintf("%s after the session ended (%s)", button, e.how)
			v := eval[[]string](t, ctx, `[String(document.querySelectorAll("header").length), String(document.querySelectorAll("main").length), String(document.querySelectorAll("h1").length),
				String(document.querySelectorAll("#check-result header, #check-result main, #check-result h1, #check-result nav").length),
				document.activeElement.id, document.querySelector("header").innerText, String(document.querySelectorAll(".top nav:not(.lang), .top .who, .top .signout").length),
				document.querySelector("#session-ended #seller-center").getAttribute("href"), document.getElementById("session-ended").innerText, location.pathname]`)
			if v[0] != "1" || v[1] != "1" || v[2] != "1" || v[3] != "0" {
				t.Errorf("%s: %s headers, %s mains, %s h1s, %s landmarks or h1s in the result: want one page, the notice inside it", state, v[0], v[1], v[2], v[3])
			}
			if v[4] != "notice-title" {
				t.Errorf("%s: the focus is on %q, want the notice's heading", state, v[4])
			}
			if strings.Contains(v[5], "seller-a") || v[6] != "0" {
				t.Errorf("%s: the header says %q with %s of the seller's menu, name and sign-out; want none", state, v[5], v[6])
			}
			if v[7] != center("") || !strings.Contains(v[8], signInWords[e.lang].again) || !strings.Contains(v[8], signInWords[e.lang].center) {
				t.Errorf("%s: the notice says %q and links to %q; want %q with the seller center's link %s", state, v[8], v[7], signInWords[e.lang].again, center(""))
			}
			if v[9] != "/upload" {
				t.Errorf("%s: the page went to %s", state, v[9])
			}
			fits(t, ctx, state, e.lang, "")
		}
	}
	tok, _ := httpapi.MintToken(stack.Secret, "seller-a", time.Minute, time.Now())
	if code, b := apiGet(t, base+"/v1/uploads", tok); code != 200 || strings.Contains(string(b), `"id":`) {
		t.Errorf("after Check and Register with the session ended, the seller's uploads: %d %s; want none", code, b)
	}
}
