package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/devstack"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/producer/httpapi"
)

// The layout tests look at every seller page in every state a seller meets,
// at a phone's 390 px and a desktop's 1280 px, in Korean and English.

// screen is a size the pages are looked at.
type screen struct {
	name string
	w, h int64
}

var (
	phone   = screen{"phone", 390, 844}
	desktop = screen{"desktop", 1280, 800}
	screens = []screen{phone, desktop}
	langs   = []string{"ko", "en"}
)

// seeAt shows the tab at s: a phone held upright (mobile, touch) or a
// desktop window.
func seeAt(t *testing.T, ctx context.Context, s screen) {
	t.Helper()
	if s == phone {
		within(t, ctx, 10*time.Second, chromedp.EmulateViewport(s.w, s.h, chromedp.EmulateMobile, chromedp.EmulateTouch))
		return
	}
	within(t, ctx, 10*time.Second, chromedp.EmulateReset(), chromedp.EmulateViewport(s.w, s.h))
}

// fits looks at the page's present state at each screen and fails the test
// when the page is wider than the window (it would scroll sideways; a table
// scrolls in its own box instead), when axe-core finds a violation, or, in
// Korean, when a word is broken across two lines. shot, when given, saves
// the Korean phone's screen. The tab is left at the desktop size.
func fits(t *testing.T, ctx context.Context, state, lang, shot string) {
	t.Helper()
	for _, s := range screens {
		seeAt(t, ctx, s)
		where := fmt.Sprintf("%s (%s, %d px)", state, lang, s.w)
		w := eval[[]string](t, ctx, `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => {
			const wide = [...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > innerWidth + 0.5 && !e.closest(".scroll, .table-scroll"))
				.slice(0, 3).map(e => e.tagName + "#" + e.id + "." + e.className + " " + Math.round(e.getBoundingClientRect().right));
			r([String(document.scrollingElement.scrollWidth), String(innerWidth), wide.join("; "), document.documentElement.lang]);
		})))`)
		// A phone zooms a page that is too wide out, which widens
		// innerWidth: the page must fit the screen's own width.
		sw, iw := atoi(t, w[0]), atoi(t, w[1])
		if int64(iw) != s.w || sw > iw {
			t.Errorf("%s: the page is %d px wide in a %d px window (it scrolls sideways); past the edge: %s", where, sw, iw, w[2])
		}
		if w[3] != lang {
			t.Errorf("%s: the page is in %q", where, w[3])
		}
		axeClean(t, ctx, where)
		if broken := brokenTimes(t, ctx); len(broken) > 0 {
			t.Errorf("%s: times broken across lines (a phone may break after the date only): %q", where, broken)
		}
		if lang == "ko" {
			if broken := brokenWords(t, ctx); len(broken) > 0 {
				t.Errorf("%s: Korean words broken across lines: %q", where, broken)
			}
		}
		if shot != "" && lang == "ko" && s == phone {
			shotScreen(t, ctx, shot)
		}
	}
}

// shotScreen saves what the screen shows (not the whole page: a phone's
// screen is what a seller sees).
func shotScreen(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	saveScreenshot(t, name, png)
}

// brokenWords lists the Korean words (runs of Hangul syllables) that are
// shown across more than one line: "등록/됨" is a word broken in two.
func brokenWords(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `(() => {
		// Text only a screen reader gets (clipped to a pixel) has no lines.
		const clipped = el => { for (let a = el; a; a = a.parentElement) { const c = getComputedStyle(a); if (c.clipPath !== "none" || c.clip !== "auto") return true; } return false; };
		const out = [], walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
		for (let n; (n = walk.nextNode());) {
			const el = n.parentElement;
			if (!el || !el.checkVisibility({contentVisibilityAuto: true}) || clipped(el)) continue;
			for (const m of n.data.matchAll(/[\uAC00-\uD7A3]+/g)) {
				const r = document.createRange();
				r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
				const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
				if (tops.size > 1) out.push(m[0] + " in " + el.tagName + "#" + el.id);
			}
		}
		return out.slice(0, 5);
	})()`)
}

// brokenTimes lists the dates ("2026-12-01") and times (the half of the
// day, the clock and the zone: "오전 5:42:56 (KST)", "5:42:56 AM (KST)")
// shown across more than one line: "오전⏎5:42:56" and "2026-12-⏎01" are
// broken in two.
func brokenTimes(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `(() => {
		const out = [], walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
		for (let n; (n = walk.nextNode());) {
			const el = n.parentElement;
			if (!el || !el.checkVisibility({contentVisibilityAuto: true})) continue;
			for (const m of n.data.matchAll(/\d{4}-\d{2}-\d{2}|(?:오전|오후) \d{1,2}:\d{2}:\d{2} \([^()]*\)|\d{1,2}:\d{2}:\d{2} [AP]M \([^()]*\)/g)) {
				const r = document.createRange();
				r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
				const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
				if (tops.size > 1) out.push(m[0] + " in " + el.tagName + "#" + el.id);
			}
		}
		return out.slice(0, 5);
	})()`)
}

// errorsSeen collects the tab's answers of 400 and more to anything but a
// page (a style sheet, a script, an icon, a stream): a page with a missing
// part.
type errorsSeen struct {
	mu   sync.Mutex
	seen []string
}

func watchErrors(t *testing.T, ctx context.Context) *errorsSeen {
	t.Helper()
	e := &errorsSeen{}
	if err := chromedp.Listen(ctx, func(ev any) {
		if r, ok := ev.(*network.EventResponseReceived); ok && r.Type != network.ResourceTypeDocument && r.Type != network.ResourceTypeFetch && r.Response.Status >= 400 {
			e.mu.Lock()
			e.seen = append(e.seen, fmt.Sprintf("%d %s (%s)", r.Response.Status, r.Response.URL, r.Type))
			e.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *errorsSeen) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.seen...)
}

// layoutRow is a product row of the template's columns.
type layoutRow struct{ sku, name, category, price, stock, image string }

// templateFile writes a file with the template's header (the labels with
// "*" and the field's name, as sellers' files have them) and rows.
func templateFile(t *testing.T, name string, rows []layoutRow) string {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	sh := f.GetSheetName(0)
	header := excel.TemplateHeader()
	if err := f.SetSheetRow(sh, "A1", &header); err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		vals := []any{r.sku, r.name, r.category, r.price, r.stock, "오늘상점", r.image}
		if err := f.SetSheetRow(sh, "A"+strconv.Itoa(i+2), &vals); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), name)
	if err := f.SaveAs(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func goodRow(prefix string, n int) layoutRow {
	return layoutRow{fmt.Sprintf("%s-%04d", prefix, n), "스테인리스 텀블러 " + strconv.Itoa(n), "50000101", "12900", "30", fmt.Sprintf("https://img.example.com/%s/%d.jpg", prefix, n)}
}

// partlyFailedRows: two rows register, four fail with the reasons a seller
// meets, one quoting a long address without a space (a long token).
func partlyFailedRows() []layoutRow {
	bad := func(n int, f func(*layoutRow)) layoutRow { r := goodRow("PART", n); f(&r); return r }
	return []layoutRow{
		goodRow("PART", 1), goodRow("PART", 2),
		bad(3, func(r *layoutRow) { r.category = "생활용품-주방" }),
		bad(4, func(r *layoutRow) {
			r.image = "//img.example.com/" + strings.Repeat("summer-collection-", 8) + "main.jpg"
		}),
		bad(5, func(r *layoutRow) { r.price = "12,900원" }),
		bad(6, func(r *layoutRow) { r.stock = "-3" }),
	}
}

// waitDone waits until the API says the upload is done.
func waitDone(t *testing.T, base, tok, id string) {
	t.Helper()
	testwait.For(t, 60*time.Second, "upload "+id+" is done", func() bool {
		code, b := apiGet(t, base+"/v1/uploads/"+id, tok)
		var st struct{ Total, Waiting int }
		return code == 200 && json.Unmarshal(b, &st) == nil && st.Total > 0 && st.Waiting == 0
	})
}

// nav opens url and waits for the page's h1.
func nav(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	within(t, ctx, 20*time.Second, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("h1")))
}

// withLang adds lang to a URL's query.
func withLang(url, lang string) string {
	if strings.Contains(url, "?") {
		return url + "&lang=" + lang
	}
	return url + "?lang=" + lang
}

// endSessions ends every page session in the store, as their expiry does.
func endSessions(t *testing.T, stack *devstack.Stack) {
	t.Helper()
	ctx := context.Background()
	keys, err := stack.Redis.Keys(ctx, "bulkreg:session:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the sessions in Redis: %v, %v", keys, err)
	}
	for _, k := range keys {
		if err := stack.Redis.Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

const sellerCenter = "https://seller.example.com/signin?next=bulkreg"

// TestEveryPageFitsInTheBrowser visits every page in every state a seller
// reaches (the upload form, a check with problems and after a jump to a
// cell, the register confirmation, the progress while registering, partly
// failed, finished, the marketplace notice, the history, not found, the
// sign-in pages, signed out, a link expired or used, and a session that
// ended while the page was open) at 390 and 1280 px, in Korean and English:
// no page is wider than the window, axe-core finds nothing, no Korean word
// and no time (past its date) breaks across lines, and no part of a page
// (style, script, icon) is missing. On a phone the preview keeps its row
// numbers in view after a jump, and with the text at 200 % the file input
// and tables still work.
func TestEveryPageFitsInTheBrowser(t *testing.T) {
	// A browser and a stack of its own, and nothing timed closer than
	// seconds: it runs beside another such test (the notices and the
	// outage, which read the circuit's timing, run alone).
	t.Parallel()
	// A slow seller: an upload of 500 rows keeps registering through the test.
	ctx, stack := browserStack(t, devstack.Options{Consumers: 1, Partitions: 2, Limit: 3, Window: 2 * time.Second, Margin: 100 * time.Millisecond,
		SellerCenterURL: sellerCenter,
		Circuit:         circuit.Settings{Window: 2 * time.Second, MinCalls: 4, MinFailedRows: 2, ProbeMin: 200 * time.Millisecond, ProbeMax: time.Second, ProbeLease: 3 * time.Second}})
	base := stack.ProducerURL
	missing := watchErrors(t, ctx)
	tokA, _ := httpapi.MintToken(stack.Secret, "seller-a", 10*time.Minute, time.Now())
	partly := apiUpload(t, base, tokA, templateFile(t, "여름-신상품-일괄등록.xlsx", partlyFailedRows()))
	done := apiUpload(t, base, tokA, templateFile(t, "done.xlsx", []layoutRow{goodRow("DONE", 1), goodRow("DONE", 2)}))
	var many []layoutRow
	for i := range 500 {
		many = append(many, goodRow("MANY", i+1))
	}
	registering := apiUpload(t, base, tokA, templateFile(t, "many.xlsx", many))
	waitDone(t, base, tokA, partly)
	waitDone(t, base, tokA, done)

	link := func(seller string) string {
		l, err := stack.SignInLink(seller)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	first := link("seller-a")
	openSignInLink(t, ctx, first)
	poll(t, ctx, `location.pathname === "/uploads"`)
	checkFile := productFile(t, 40, 33)

	for _, lang := range langs {
		nav(t, ctx, withLang(base+"/upload", lang))
		fits(t, ctx, "the upload form", lang, "")

		within(t, ctx, 20*time.Second, chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{checkFile}),
			chromedp.Click(chromedp.CSS("#check")), chromedp.WaitVisible(chromedp.CSS(`#problems a[href="#cell-D33"]`)))
		fits(t, ctx, "the check result with a problem", lang, "")

		// The jump to D33, far down and right in the preview: on a phone the
		// preview scrolls both ways, and the row's number stays in view at
		// the left of the box, the cell beside it, not under it.
		for _, s := range screens {
			seeAt(t, ctx, s)
			within(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS(`#problems a[href="#cell-D33"]`)))
			poll(t, ctx, `document.activeElement && document.activeElement.id === "cell-D33"`)
			v := eval[[]float64](t, ctx, `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => {
				const cell = document.getElementById("cell-D33"), row = cell.parentElement.querySelector("th"), box = cell.closest(".scroll");
				const c = cell.getBoundingClientRect(), h = row.getBoundingClientRect(), b = box.getBoundingClientRect();
				const at = document.elementFromPoint(h.left + h.width / 2, h.top + h.height / 2);
				r([h.left - b.left, b.right - h.right, c.left - h.right, b.right - c.right, at === row || row.contains(at) ? 1 : 0, box.scrollLeft]);
			})))`)
			if v[0] < -1 || v[1] < -1 || v[2] < -1 || v[3] < -1 || v[4] != 1 {
				t.Errorf("after the jump to D33 at %d px (%s; the preview scrolled %.0f px sideways): the row number is %.0f px from the box's left and %.0f px from its right, in view: %v; the cell starts %.0f px after the row number and ends %.0f px before the box's right: want the row number and the cell in view, side by side",
					s.w, lang, v[5], v[0], v[1], v[4] == 1, v[2], v[3])
			}
			if s == phone && v[5] <= 0 {
				t.Errorf("at 390 px the preview did not scroll sideways to D33 (%.0f px): the test does not show the row number staying", v[5])
			}
			if s == phone && lang == "ko" {
				shotScreen(t, ctx, "jump-phone-ko")
			}
		}
		fits(t, ctx, "the check page after a jump", lang, "")

		within(t, ctx, 20*time.Second, chromedp.Click(chromedp.CSS("#register")), chromedp.WaitVisible(chromedp.CSS("#confirm-register")))
		fits(t, ctx, "the register confirmation", lang, "")

		nav(t, ctx, withLang(base+"/uploads/"+registering, lang))
		if d := eval[string](t, ctx, `document.getElementById("progress").dataset.done`); d != "false" {
			t.Fatalf("the 500-row upload is done already (%s): the test cannot show one registering", d)
		}
		fits(t, ctx, "the progress while registering", lang, "")

		nav(t, ctx, withLang(base+"/uploads/"+partly, lang))
		if n := eval[int](t, ctx, `document.querySelectorAll("#failed tbody tr").length`); n != 4 {
			t.Errorf("the partly failed upload lists %d failed rows, want 4", n)
		}
		fits(t, ctx, "the partly failed upload", lang, "")
		if lang == "ko" {
			seeAt(t, ctx, phone)
			eval[bool](t, ctx, `(document.getElementById("failed-title").scrollIntoView(), true)`)
			shotScreen(t, ctx, "partly-failed-rows-phone-ko")
			seeAt(t, ctx, desktop)
		}

		nav(t, ctx, withLang(base+"/uploads/"+done, lang))
		fits(t, ctx, "the finished upload", lang, "")

		nav(t, ctx, withLang(base+"/uploads", lang))
		fits(t, ctx, "the history", lang, "")

		nav(t, ctx, withLang(base+"/no-such-page", lang))
		fits(t, ctx, "the not-found page", lang, "")

		// Another seller's link while signed in: the switch question.
		nav(t, ctx, withLang(link("seller-b"), lang))
		if h := text(t, ctx, "main h1"); !strings.Contains(h, "seller-b") && !strings.Contains(h, "판매자") && !strings.Contains(h, "seller") {
			t.Errorf("seller-b's link while signed in shows %q", h)
		}
		fits(t, ctx, "the switch page", lang, "")
	}

	// The marketplace stops answering (two sellers' calls fail): the notice.
	tokC, _ := httpapi.MintToken(stack.Secret, "seller-c", 10*time.Minute, time.Now())
	var others []layoutRow
	for i := range 100 {
		others = append(others, goodRow("OTHER", i+1))
	}
	apiUpload(t, base, tokC, templateFile(t, "other.xlsx", others))
	stack.Sandbox.SetOutage(sandbox.Outage{All: true})
	for _, lang := range langs {
		nav(t, ctx, withLang(base+"/uploads/"+registering, lang))
		testwait.For(t, 30*time.Second, "the marketplace notice shows", func() bool { return visible(t, ctx, "#outage") })
		fits(t, ctx, "the marketplace notice", lang, "")
	}
	stack.Sandbox.SetOutage(sandbox.Outage{})

	// Signed out, and every way to a sign-in page without a session.
	within(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS(".signout summary")), chromedp.WaitVisible(chromedp.CSS("#signout-yes")))
	within(t, ctx, 20*time.Second, chromedp.Click(chromedp.CSS("#signout-yes")))
	poll(t, ctx, `location.search.includes("signed_out")`)
	for _, lang := range langs {
		nav(t, ctx, withLang(base+"/signin?signed_out=1", lang))
		fits(t, ctx, "the signed-out page", lang, "")
		nav(t, ctx, withLang(base+"/uploads", lang))
		fits(t, ctx, "a page without a session", lang, "")
		nav(t, ctx, withLang(base+"/signin?token=not-a-link", lang))
		fits(t, ctx, "an expired or broken link", lang, "")
		nav(t, ctx, withLang(first, lang))
		fits(t, ctx, "a link used before", lang, "")
		within(t, ctx, 20*time.Second, chromedp.Navigate(withLang(link("seller-a"), lang)), chromedp.WaitVisible(chromedp.CSS("#signin-yes")))
		fits(t, ctx, "a sign-in link's page", lang, "")
	}

	// A session that ends while the upload page is open: Check says to
	// sign in again.
	for _, lang := range langs {
		openSignInLink(t, ctx, withLang(link("seller-a"), lang))
		poll(t, ctx, `location.pathname === "/uploads"`)
		nav(t, ctx, withLang(base+"/upload", lang))
		within(t, ctx, 20*time.Second, chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{checkFile}))
		endSessions(t, stack)
		within(t, ctx, 20*time.Second, chromedp.Click(chromedp.CSS("#check")))
		poll(t, ctx, `document.querySelector("#check-result a[href^='https://seller.example.com']") !== null`)
		fits(t, ctx, "the ended session", lang, "session-ended-phone-ko")
	}

	// Text at 200 % (the browser's font size doubled) on a phone: the file
	// input stays on the screen and can be pressed, the tables scroll in
	// their boxes, the page still fits.
	openSignInLink(t, ctx, withLang(link("seller-a"), "ko"))
	poll(t, ctx, `location.pathname === "/uploads"`)
	fontSize := func(px int64) {
		within(t, ctx, 10*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, page.SetFontSizes, page.SetFontSizesParams{FontSizes: &page.FontSizes{Standard: px, Fixed: px * 13 / 16}})
			return err
		}))
	}
	fontSize(32)
	defer fontSize(16)
	for _, lang := range langs {
		nav(t, ctx, withLang(base+"/upload", lang))
		within(t, ctx, 20*time.Second, chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{checkFile}),
			chromedp.Click(chromedp.CSS("#check")), chromedp.WaitVisible(chromedp.CSS(`#problems`)))
		seeAt(t, ctx, phone)
		v := eval[[]string](t, ctx, `(() => {
			const f = document.getElementById("file"), r = f.getBoundingClientRect();
			f.scrollIntoView({block: "center"});
			const q = f.getBoundingClientRect(), at = document.elementFromPoint(q.left + Math.min(q.width / 2, 20), q.top + q.height / 2);
			return [getComputedStyle(document.body).fontSize, String(Math.round(r.left)), String(Math.round(r.right)), String(at === f), String(document.scrollingElement.scrollWidth), String(innerWidth)];
		})()`)
		if v[0] != "32px" || atoi(t, v[1]) < 0 || atoi(t, v[2]) > 390 || v[3] != "true" || atoi(t, v[4]) > atoi(t, v[5]) {
			t.Errorf("text at 200 %% (%s): body font %s, the file input spans x %s-%s and can be pressed: %s; the page is %s px wide in %s: want 32px, within 0-390, pressable, no sideways scroll", lang, v[0], v[1], v[2], v[3], v[4], v[5])
		}
		if lang == "ko" {
			shotScreen(t, ctx, "text-200-phone-ko")
		}
		nav(t, ctx, withLang(base+"/uploads/"+partly, lang))
		seeAt(t, ctx, phone)
		tv := eval[[]string](t, ctx, `(() => {
			const box = document.getElementById("failed").closest(".table-scroll, .scroll");
			return [String(!!box), String(document.scrollingElement.scrollWidth), String(innerWidth)];
		})()`)
		if tv[0] != "true" || atoi(t, tv[1]) > atoi(t, tv[2]) {
			t.Errorf("text at 200 %% (%s), the partly failed upload: failed rows in a scroll box: %s; the page is %s px wide in %s", lang, tv[0], tv[1], tv[2])
		}
		seeAt(t, ctx, desktop)
	}
	if m := missing.list(); len(m) > 0 {
		t.Errorf("parts of pages answered with errors: %q", m)
	}
}
