package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/bulkreg/bulkreg/devstack"
	"github.com/bulkreg/bulkreg/producer/httpapi"
)

// TestSmallerPageFixesInTheBrowser, in Korean and English:
//   - a download is offered only when it holds rows: an upload with no
//     failed row offers the full report and neither "failed rows only" nor
//     the fix file (the file would hold the header alone); a partly failed
//     one offers both, and the failed-rows-only file holds exactly its
//     failed rows;
//   - the not-found page keeps the menu, the seller's name and sign-out
//     when signed in, and has none of them signed out;
//   - every page names an icon (<link rel=icon>) that answers 200 with a
//     small image, /favicon.ico answers 200, and no part of any page
//     answers with an error;
//   - arriving at the progress page, after Register or by a link, the focus
//     is on its heading (h1, tabindex=-1), not on the body;
//   - Register is also below the problem list, and does what Register does
//     (asks first, then registers).
func TestSmallerPageFixesInTheBrowser(t *testing.T) {
	// A browser and a stack of its own, and nothing timed closer than
	// seconds: it runs beside another such test (the notices and the
	// outage, which read the circuit's timing, run alone).
	t.Parallel()
	ctx, stack := browserStack(t, devstack.Options{Consumers: 1, Partitions: 2})
	base := stack.ProducerURL
	missing := watchErrors(t, ctx)
	tok, _ := httpapi.MintToken(stack.Secret, "seller-a", 10*time.Minute, time.Now())
	clean := apiUpload(t, base, tok, templateFile(t, "clean.xlsx", []layoutRow{goodRow("CLEAN", 1), goodRow("CLEAN", 2)}))
	partly := apiUpload(t, base, tok, templateFile(t, "partly.xlsx", partlyFailedRows()))
	waitDone(t, base, tok, clean)
	waitDone(t, base, tok, partly)
	link, err := stack.SignInLink("seller-a")
	if err != nil {
		t.Fatal(err)
	}
	openSignInLink(t, ctx, link)
	poll(t, ctx, `location.pathname === "/uploads"`)

	icon := func(where string) {
		t.Helper()
		v := eval[[]string](t, ctx, `(async () => {
			const l = document.querySelector('link[rel="icon"]');
			if (!l) return ["no icon named", "", "", "", ""];
			const a = await fetch(l.href), b = await fetch("/favicon.ico");
			return [l.getAttribute("href"), String(a.status), a.headers.get("content-type") || "", String((await a.arrayBuffer()).byteLength), String(b.status)];
		})()`)
		if v[0] != "/favicon.ico" || v[1] != "200" || !strings.HasPrefix(v[2], "image/") || atoi(t, v[3]) == 0 || atoi(t, v[3]) > 1024 || v[4] != "200" {
			t.Errorf("%s: icon %q answered %s %q, %s bytes; /favicon.ico answered %s; want a small image, 200 both", where, v[0], v[1], v[2], v[3], v[4])
		}
	}
	offered := func(sel string) bool { return visible(t, ctx, sel) }

	for _, lang := range langs {
		// Downloads.
		nav(t, ctx, withLang(base+"/uploads/"+clean, lang))
		icon("the progress page")
		if !offered("#report") || offered("#report-failed") || offered("#fix-file") {
			t.Errorf("an upload with no failed row (%s): full report offered %v, failed rows only %v, fix file %v; want the full report alone",
				lang, offered("#report"), offered("#report-failed"), offered("#fix-file"))
		}
		nav(t, ctx, withLang(base+"/uploads/"+partly, lang))
		if !offered("#report") || !offered("#report-failed") || !offered("#fix-file") {
			t.Errorf("a partly failed upload (%s): full report offered %v, failed rows only %v, fix file %v; want all three",
				lang, offered("#report"), offered("#report-failed"), offered("#fix-file"))
		}
		status, b := download(t, ctx, eval[string](t, ctx, `document.getElementById("report-failed").href`))
		if rows := openXLSX(t, b); status != 200 || len(rows) != 5 {
			t.Errorf("the failed rows only (%s): %d, %d rows; want the header and the 4 failed rows", lang, status, len(rows))
		}
		// Arriving by a link: the heading has the focus.
		if f := eval[string](t, ctx, `document.activeElement.tagName + "#" + document.activeElement.id + " " + document.activeElement.getAttribute("tabindex")`); f != "H1#detail-title -1" {
			t.Errorf("arriving at the progress page by a link (%s), the focus is on %q, want the heading", lang, f)
		}

		// Not found, signed in: the menu stays.
		for _, path := range []string{"/no-such-page", "/uploads/no-such-upload"} {
			nav(t, ctx, withLang(base+path, lang))
			icon("the not-found page")
			v := eval[[]string](t, ctx, `[document.querySelector("main h1").innerText, String(document.querySelectorAll('.top nav:not(.lang) a[href="/upload"], .top nav:not(.lang) a[href="/uploads"]').length),
				(e => e ? e.innerText : "")(document.querySelector(".top .who")), String(document.querySelector(".top .signout summary") !== null)]`)
			if v[1] != "2" || !strings.Contains(v[2], "seller-a") || v[3] != "true" {
				t.Errorf("%s signed in (%s): %q; want the menu's two links, the seller's name and sign-out", path, lang, v)
			}
			fits(t, ctx, "the not-found page signed in", lang, "")
		}

		// Register below the problem list: it asks first, as Register does,
		// and then registers; the progress page has the focus on its heading.
		nav(t, ctx, withLang(base+"/upload", lang))
		icon("the upload page")
		within(t, ctx, 20*time.Second, chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{productFileSKUs(t, 6, 4, "BELOW-"+strings.ToUpper(lang))}),
			chromedp.Click(chromedp.CSS("#check")), chromedp.WaitVisible(chromedp.CSS("#problems")))
		order := eval[[]bool](t, ctx, `(() => {
			const b = document.getElementById("register-below"), after = n => !!(n && (n.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING));
			const before = n => !!(n && (n.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_PRECEDING));
			return [!!b, after(document.getElementById("problems")), before(document.querySelector(".preview")), !!b && b.getClientRects().length > 0];
		})()`)
		if !order[0] || !order[1] || !order[2] || !order[3] {
			t.Errorf("Register below the problem list (%s): there %v, after the problems %v, before the preview %v, shown %v", lang, order[0], order[1], order[2], order[3])
		}
		within(t, ctx, 20*time.Second, chromedp.Click(chromedp.CSS("#register-below")), chromedp.WaitVisible(chromedp.CSS("#confirm-register")))
		if f := eval[string](t, ctx, `document.activeElement.id`); f != "confirm-register" || eval[string](t, ctx, `location.pathname`) != "/upload" {
			t.Errorf("Register below the problems (%s): the focus is on %q at %s; want the question, Register 5 rows, before registering", lang, f, eval[string](t, ctx, `location.pathname`))
		}
		within(t, ctx, 20*time.Second, chromedp.Click(chromedp.CSS("#confirm-register")), chromedp.WaitVisible(chromedp.CSS("#progress")))
		poll(t, ctx, `document.readyState === "complete"`)
		if f := eval[string](t, ctx, `document.activeElement.tagName + "#" + document.activeElement.id`); f != "H1#detail-title" {
			t.Errorf("arriving at the progress page after Register (%s), the focus is on %q, want the heading", lang, f)
		}
		fits(t, ctx, "the progress page on arrival", lang, "")
	}

	// Signed out, the not-found page has no menu to offer.
	within(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS(".signout summary")), chromedp.WaitVisible(chromedp.CSS("#signout-yes")), chromedp.Click(chromedp.CSS("#signout-yes")))
	poll(t, ctx, `location.search.includes("signed_out")`)
	icon("the signed-out page")
	nav(t, ctx, base+"/no-such-page")
	if n := eval[int](t, ctx, `document.querySelectorAll(".top nav:not(.lang), .top .who, .top .signout").length`); n != 0 {
		t.Errorf("the not-found page signed out shows %d of the menu, the name and sign-out", n)
	}
	nav(t, ctx, base+"/uploads")
	icon("the sign-in page")
	if m := missing.list(); len(m) > 0 {
		t.Errorf("parts of pages answered with errors: %s", fmt.Sprint(m))
	}
}
