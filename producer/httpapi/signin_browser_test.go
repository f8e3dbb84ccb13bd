package httpapi_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/bulkreg/bulkreg/devstack"
)

// openSignInLink opens a sign-in link in the browser and presses the
// link's page's button, which signs in.
func openSignInLink(t *testing.T, ctx context.Context, link string) {
	t.Helper()
	within(t, ctx, 20*time.Second, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#signin-yes")), chromedp.Click(chromedp.CSS("#signin-yes")))
}

// TestSwitchSellerInTheBrowser: switching sellers by a sign-in link, in
// Chromium, whose SameSite=Strict cookie the design leans on:
// a seller signed in as seller-a follows seller-b's link from another site
// (the seller center, or anyone's page). The link's GET carries no session
// (Strict), so its page offers to sign in; the button's same-origin POST
// carries it, so the service asks before switching, staying focused; a
// page of another site that posts the link by itself is refused; only the
// switch button switches.
func TestSwitchSellerInTheBrowser(t *testing.T) {
	// A browser and a stack of its own, and nothing timed closer than
	// seconds: it runs beside another such test (the notices and the
	// outage, which read the circuit's timing, run alone).
	t.Parallel()
	ctx, stack := browserStack(t, devstack.Options{Consumers: 1, Partitions: 1})
	base := stack.ProducerURL
	links := map[string]string{}
	for _, name := range []string{"a", "b", "b-again"} {
		seller := "seller-" + strings.TrimSuffix(name, "-again")
		l, err := stack.SignInLink(seller)
		if err != nil {
			t.Fatal(err)
		}
		links[name] = l
	}
	// Another site: localhost is not the same site as 127.0.0.1.
	center := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/post" {
			tok := strings.SplitN(links["b"], "token=", 2)[1]
			fmt.Fprintf(w, `<!doctype html><title>other</title><form id="f" method="post" action="%s/signin"><input type="hidden" name="token" value="%s"></form><script>document.getElementById("f").submit()</script>`,
				html.EscapeString(base), html.EscapeString(tok))
			return
		}
		fmt.Fprintf(w, `<!doctype html><title>seller center</title><a id="go" href="%s">bulkreg</a>`, html.EscapeString(links[strings.TrimPrefix(r.URL.Path, "/")]))
	}))
	t.Cleanup(center.Close)
	other := strings.Replace(center.URL, "127.0.0.1", "localhost", 1)
	if !strings.Contains(base, "127.0.0.1") {
		t.Fatalf("the service is at %s; the test needs it at 127.0.0.1 to have another site at localhost", base)
	}
	follow := func(name string) {
		t.Helper()
		within(t, ctx, 20*time.Second, chromedp.Navigate(other+"/"+name), chromedp.WaitVisible(chromedp.CSS("#go")), chromedp.Click(chromedp.CSS("#go")),
			chromedp.WaitVisible(chromedp.CSS("main h1")))
	}
	who := func() string {
		t.Helper()
		within(t, ctx, 20*time.Second, chromedp.Navigate(base+"/upload"), chromedp.WaitVisible(chromedp.CSS("main h1")))
		return text(t, ctx, ".who")
	}

	// The first sign-in, from the seller center.
	follow("a")
	if h := text(t, ctx, "main h1"); h != "Sign in as seller seller-a?" {
		t.Errorf("seller-a's link from another site shows %q", h)
	}
	axeClean(t, ctx, "the sign-in link's page")
	atPhone(t, ctx, "the sign-in link's page", "")
	within(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS("#signin-yes")))
	poll(t, ctx, `location.pathname === "/uploads" && document.querySelector(".who").innerText === "Signed in as seller-a"`)

	// seller-b's link from another site: its GET carries no session.
	follow("b")
	if h := text(t, ctx, "main h1"); h != "Sign in as seller seller-b?" {
		t.Errorf("seller-b's link from another site shows %q, want the sign-in page (a Strict cookie is not sent cross-site)", h)
	}
	within(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS("#signin-yes")), chromedp.WaitVisible(chromedp.CSS("#switch-yes")))
	if h, body, focus := text(t, ctx, "main h1"), text(t, ctx, "main p"), eval[string](t, ctx, `document.activeElement.id`); h != "Switch to another seller?" ||
		!strings.Contains(body, "You are signed in as seller seller-a. This link signs in seller seller-b") || focus != "switch-stay" {
		t.Errorf("the button while signed in as seller-a: %q / %q, focus on %q; want the switch page, staying focused", h, body, focus)
	}
	axeClean(t, ctx, "the switch page")
	atPhone(t, ctx, "the switch page", "switch-seller")
	within(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS("#switch-stay")))
	poll(t, ctx, `location.pathname === "/uploads" && document.querySelector(".who").innerText === "Signed in as seller-a"`)

	// Another site's page posts seller-b's link by itself: refused.
	within(t, ctx, 20*time.Second, chromedp.Navigate(other+"/post"))
	poll(t, ctx, `location.host !== "`+strings.TrimPrefix(other, "http://")+`" && document.querySelector("main h1") !== null`)
	if h := text(t, ctx, "main h1"); h == "Switch to another seller?" || h == "Your uploads" {
		t.Errorf("a post from another site shows %q, want a refusal", h)
	}
	if w := who(); w != "Signed in as seller-a" {
		t.Errorf("after another site's post: %q, want still seller-a", w)
	}

	// Confirmed on the switch page: now seller-b.
	follow("b-again")
	within(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS("#signin-yes")), chromedp.WaitVisible(chromedp.CSS("#switch-yes")), chromedp.Click(chromedp.CSS("#switch-yes")))
	poll(t, ctx, `location.pathname === "/uploads" && document.querySelector(".who").innerText === "Signed in as seller-b"`)
}
