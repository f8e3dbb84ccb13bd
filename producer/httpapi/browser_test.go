package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/devstack"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/producer/httpapi"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// The browser tests drive Debian's headless chromium through the pages of a
// whole stack (devstack: the embedded broker, a real redis-server, the
// sandbox registry, consumers and the upload service) with a shrunk window.

const (
	limit  = 10
	window = 2 * time.Second
	margin = 100 * time.Millisecond
)

// browser starts headless chromium with a fresh profile; it fails the test
// when chromium is missing (`make deps` installs it).
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed; `make deps` installs it (Debian package chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		// The machine's network is closed: without these Chromium stalls on
		// its own background requests.
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("accept-lang", "en-US,en"),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// browserStack starts chromium and a dev stack for it: real Redis, the
// tests' limit, window and margin (unless o sets a limit), 6 s Kafka sessions, an event every
// 200 ms, its log in the test's artifacts (stack.log); o sets the rest.
// The stack closes when the test ends, before the browser.
func browserStack(t *testing.T, o devstack.Options) (context.Context, *devstack.Stack) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed; `make deps` installs it")
	}
	ctx := browser(t)
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	logf, err := os.Create(filepath.Join(t.ArtifactDir(), "stack.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	o.Redis = "real"
	if o.Limit == 0 { // a test may ask for a slower seller
		o.Limit, o.Window, o.Margin = limit, window, margin
	}
	o.Logger = slog.New(slog.NewJSONHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.SessionTimeout, o.EventsInterval = 6*time.Second, 200*time.Millisecond
	stack, err := devstack.Start(sctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Close)
	return ctx, stack
}

// within runs actions on the tab of ctx with a deadline.
func within(t *testing.T, ctx context.Context, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		t.Fatal(err)
	}
}

// poll waits until the JavaScript expression is true on the tab of ctx.
// A poll does not survive a navigation (a sign-in page moving on by
// itself), so it is asked again until the deadline.
func poll(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, cancel := context.WithDeadline(ctx, deadline)
		_, err := chromedp.Run(c, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c, cancel := context.WithTimeout(ctx, 2*time.Second)
			loc, _ := chromedp.Run(c, chromedp.Location())
			cancel()
			t.Fatalf("waiting for %s (at %s): %v", expr, loc, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// screenshot saves the page as name.png in the test's artifacts, and in
// docs/screenshots when BULKREG_UPDATE_SCREENSHOTS is set (the README's).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	saveScreenshot(t, name, png)
}

func saveScreenshot(t *testing.T, name string, png []byte) {
	t.Helper()
	dirs := []string{t.ArtifactDir()}
	if os.Getenv("BULKREG_UPDATE_SCREENSHOTS") != "" && docsLink(t, name+".png") {
		// Only the screenshots the docs show: the others are the test's artifacts.
		dirs = append(dirs, filepath.Join("..", "..", "docs", "screenshots"))
	}
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// atPhone shows the page at 390×844, a phone held upright, and fails the
// test when the page scrolls sideways there (a table scrolls inside its own
// box; the page does not). shot, when given, saves the phone's screenshot.
// The desktop size comes back afterwards.
func atPhone(t *testing.T, ctx context.Context, page, shot string) {
	t.Helper()
	within(t, ctx, 10*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
	defer within(t, ctx, 10*time.Second, chromedp.EmulateReset(), chromedp.EmulateViewport(1280, 900))
	w := eval[[]string](t, ctx, `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => {
		const wide = [...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > 390.5 && !e.closest(".scroll, .table-scroll"))
			.slice(0, 3).map(e => e.tagName + "#" + e.id + "." + e.className + " " + Math.round(e.getBoundingClientRect().right));
		r([String(document.scrollingElement.scrollWidth), String(innerWidth), wide.join("; ")]);
	})))`)
	// A phone zooms a page that is too wide out, which widens innerWidth:
	// the page must fit the phone's 390 px, not its own width.
	sw, iw := atoi(t, w[0]), atoi(t, w[1])
	if iw != 390 || sw > iw {
		t.Errorf("%s at a 390 px phone: the page is %d px wide in a %d px window (it scrolls sideways); past the edge: %s", page, sw, iw, w[2])
	}
	if broken := brokenTimes(t, ctx); len(broken) > 0 {
		t.Errorf("%s at a 390 px phone: times broken across lines (a phone may break after the date only): %q", page, broken)
	}
	if shot != "" {
		// What the phone's screen shows: a full-page capture resizes the
		// viewport, which a phone never does.
		c, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		png, err := chromedp.Run(c, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot %s: %v", shot, err)
		}
		saveScreenshot(t, shot, png)
	}
}

// axeClean runs axe-core on the page and fails the test on any violation.
// axe-core comes from npm (make deps installs it under ~/.cache/bulkreg/axe,
// or BULKREG_AXE names its axe.min.js); without it a plain go test logs the
// check and leaves it out, and make test, which sets BULKREG_AXE, fails.
func axeClean(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	path, named := os.LookupEnv("BULKREG_AXE")
	if !named {
		home, _ := os.UserHomeDir()
		path = filepath.Join(home, ".cache", "bulkreg", "axe", "node_modules", "axe-core", "axe.min.js")
	}
	src, err := os.ReadFile(path)
	if err != nil {
		if named { // make test names it: a missing copy must not pass as accessible
			t.Fatalf("BULKREG_AXE names %s, which cannot be read (%v); run make deps", path, err)
		}
		t.Logf("axe-core is not installed (%v): %s is not checked for accessibility", err, page)
		return
	}
	v := eval[[]string](t, ctx, string(src)+`;
		axe.run(document, { resultTypes: ["violations"] }).then(r => r.violations.map(v => v.id + " (" + v.impact + "): " + v.nodes.map(n => n.target.join(" ")).slice(0, 3).join(", ")))`)
	for _, x := range v {
		t.Errorf("axe-core on %s: %s", page, x)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q is not a number: %v", s, err)
	}
	return n
}

// text is the innerText of the first element sel matches, "" when none.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return eval[string](t, ctx, `(e => e ? e.innerText : "")(document.querySelector(`+strconv.Quote(sel)+`))`)
}

// visible reports whether sel matches an element that is shown.
func visible(t *testing.T, ctx context.Context, sel string) bool {
	t.Helper()
	return eval[bool](t, ctx, `(e => !!e && e.getClientRects().length > 0)(document.querySelector(`+strconv.Quote(sel)+`))`)
}

// productFile writes a seller's file of n rows; badRow (a spreadsheet row
// number) has a price that is not a number.
func productFile(t *testing.T, n, badRow int) string {
	t.Helper()
	return productFileSKUs(t, n, badRow, "SHOP")
}

// productFileSKUs is productFile with the SKUs' prefix.
func productFileSKUs(t *testing.T, n, badRow int, prefix string) string {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	sh := f.GetSheetName(0)
	header := []any{"판매자상품코드 (seller_sku)", "상품명 (name)", "카테고리코드 (category_code)", "판매가 (price)", "재고수량 (stock)", "브랜드 (brand)", "대표이미지 URL (image_url)"}
	if err := f.SetSheetRow(sh, "A1", &header); err != nil {
		t.Fatal(err)
	}
	names := []string{"무선 이어폰", "스테인리스 텀블러", "면 티셔츠", "캠핑 의자", "유기농 녹차", "가죽 지갑", "요가 매트", "LED 스탠드"}
	for i := range n {
		row := i + 2
		var price any = 10000 + i*500
		if row == badRow {
			price = "12,000원"
		}
		vals := []any{fmt.Sprintf("%s-%04d", prefix, i+1), names[i%len(names)] + " " + strconv.Itoa(i+1), "50000" + strconv.Itoa(100+i%7), price, 20 + i, "오늘상점", fmt.Sprintf("https://img.example.com/p/%d.jpg", i+1)}
		if err := f.SetSheetRow(sh, "A"+strconv.Itoa(row), &vals); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "spring-products.xlsx")
	if err := f.SaveAs(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// openXLSX reads every row of the first sheet of a workbook.
func openXLSX(t *testing.T, b []byte) [][]string {
	t.Helper()
	f, err := excelize.OpenReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the download is not a workbook: %v", err)
	}
	defer f.Close()
	rows, err := f.GetRows(f.GetSheetName(0))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// download fetches url with the page's session and returns the status and body.
func download(t *testing.T, ctx context.Context, url string) (int, []byte) {
	t.Helper()
	v := eval[[]string](t, ctx, `fetch(`+strconv.Quote(url)+`).then(async r => {
		const b = new Uint8Array(await r.arrayBuffer());
		let s = ""; for (const x of b) s += String.fromCharCode(x);
		return [String(r.status), btoa(s)];
	})`)
	status, _ := strconv.Atoi(v[0])
	b, err := base64.StdEncoding.DecodeString(v[1])
	if err != nil {
		t.Fatal(err)
	}
	return status, b
}

// apiUpload posts a file to the API with a bearer token and returns the
// upload's id.
func apiUpload(t *testing.T, base, token, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", filepath.Base(path))
	fw.Write(data)
	mw.Close()
	req, _ := http.NewRequest("POST", base+"/v1/uploads", &body)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r httpapi.UploadResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusCreated || r.UploadID == "" {
		t.Fatalf("upload %s: %d %+v %v", path, resp.StatusCode, r, err)
	}
	return r.UploadID
}

func apiGet(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestSellerInTheBrowser walks the seller's path in a real browser: sign in
// with a link; check a file with one bad cell and see the cell named;
// register it; watch the progress reach 100% over server-sent events while
// the finish estimate stays within one window + 2 s of the real finish;
// download both reports and open them; a cross-site form post is refused;
// a second seller sees neither the upload nor its report, by page or API.
func TestSellerInTheBrowser(t *testing.T) {
	ctx, stack := browserStack(t, devstack.Options{Consumers: 2, Partitions: 2})
	base := stack.ProducerURL
	const rows, badRow = 25, 7 // the bad row shows in the preview's first screen
	file := productFile(t, rows, badRow)

	// Sign in through a link and its button: on to the seller's uploads.
	link, err := stack.SignInLink("seller-a")
	if err != nil {
		t.Fatal(err)
	}
	openSignInLink(t, ctx, link)
	within(t, ctx, 20*time.Second, chromedp.WaitVisible(chromedp.CSS(`table.uploads, main p`)))
	poll(t, ctx, `location.pathname === "/uploads" && document.querySelector("h1").textContent === "Your uploads"`)
	// The link opened again while signed in is no dead end: the history.
	within(t, ctx, 20*time.Second, chromedp.Navigate(link))
	poll(t, ctx, `location.pathname === "/uploads" && document.querySelector("h1").textContent === "Your uploads"`)
	atPhone(t, ctx, "the empty history", "")

	// Check: every problem by cell, next to a preview; nothing registered.
	within(t, ctx, 20*time.Second,
		chromedp.Navigate(base+"/upload"),
		chromedp.WaitVisible(chromedp.CSS("#file")),
		chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{file}),
	)
	screenshot(t, ctx, "upload")
	within(t, ctx, 20*time.Second,
		chromedp.Click(chromedp.CSS("#check")),
		chromedp.WaitVisible(chromedp.CSS("#problems")),
	)
	problems := eval[string](t, ctx, `document.querySelector("#problems").innerText`)
	cell := "D" + strconv.Itoa(badRow)
	if !strings.HasPrefix(problems, cell+" price: must be a whole number") || strings.Count(problems, "\n") != 0 {
		t.Errorf("the check lists %q, want one problem naming %s", problems, cell)
	}
	marked := eval[string](t, ctx, `(c => c ? c.getAttribute("aria-invalid") + "|" + c.textContent : "")(document.getElementById("cell-`+cell+`"))`)
	if !strings.HasPrefix(marked, "true|12,000원") {
		t.Errorf("preview cell %s: %q, want it marked invalid with the seller's text", cell, marked)
	}
	if s := eval[string](t, ctx, `document.querySelector("#check-summary").innerText`); s != "25 rows: 24 ready, 1 with problems" {
		t.Errorf("check summary %q", s)
	}
	if f := eval[string](t, ctx, `document.getElementById("file").files[0].name`); f != "spring-products.xlsx" {
		t.Errorf("after the check the file input holds %q, want the file still chosen", f)
	}
	if p := text(t, ctx, "#plan"); p != "Register registers 24 rows and skips 1 row with problems." {
		t.Errorf("the check says %q, want what Register will do", p)
	}
	if visible(t, ctx, "#confirm") {
		t.Error("Check alone shows the register confirmation")
	}
	screenshot(t, ctx, "check")
	axeClean(t, ctx, "the check page")
	atPhone(t, ctx, "the check page with an error", "check-phone")

	// Jump to a cell far down the preview: it shows below the sticky
	// header, focused, so the next Tab goes on from it.
	within(t, ctx, 20*time.Second,
		chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{productFile(t, 40, 33)}),
		chromedp.Click(chromedp.CSS("#check")),
		chromedp.WaitVisible(chromedp.CSS(`#problems a[href="#cell-D33"]`)),
		chromedp.Click(chromedp.CSS(`#problems a[href="#cell-D33"]`)),
	)
	poll(t, ctx, `document.activeElement && document.activeElement.id === "cell-D33"`)
	jump := eval[[]int](t, ctx, `(() => {
		const c = document.getElementById("cell-D33").getBoundingClientRect(), h = document.querySelector(".preview thead").getBoundingClientRect(),
			box = document.querySelector(".scroll").getBoundingClientRect();
		return [Math.round(c.top), Math.round(h.bottom), Math.round(c.bottom), Math.round(Math.min(box.bottom, innerHeight))];
	})()`)
	if jump[0] < jump[1]-1 || jump[2] > jump[3]+1 {
		t.Errorf("after jumping to D33 the cell spans y %d-%d, the sticky header ends at %d and the box at %d: the cell is hidden", jump[0], jump[2], jump[1], jump[3])
	}
	// Focus moves on from the cell: back (Shift+Tab) to the preview's
	// scroll box, not to the top of the page.
	within(t, ctx, 10*time.Second, chromedp.KeyEvent("\t", chromedp.KeyModifiers(chromedp.ModifierShift)))
	if a := eval[string](t, ctx, `document.activeElement.className + "|" + document.activeElement.getAttribute("aria-labelledby")`); a != "scroll|preview-title" {
		t.Errorf("Shift+Tab after the jump went to %q, want the preview that holds the cell", a)
	}
	// And on (Tab) to the next problem's link, here Register below the
	// list after the only one: nothing focusable follows the preview, and
	// Tab wrapped to the skip link at the top before.
	within(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS(`#problems a[href="#cell-D33"]`)))
	poll(t, ctx, `document.activeElement && document.activeElement.id === "cell-D33"`)
	within(t, ctx, 10*time.Second, chromedp.KeyEvent("\t"))
	if a := eval[string](t, ctx, `document.activeElement.id || document.activeElement.outerHTML.slice(0, 80)`); a != "register-below" {
		t.Errorf("Tab after the jump went to %q, want Register below the list (the only problem was the last)", a)
	}
	atPhone(t, ctx, "the check page after a jump", "")
	within(t, ctx, 20*time.Second,
		chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{file}),
		chromedp.Click(chromedp.CSS("#check")),
		chromedp.WaitVisible(chromedp.CSS(`#problems a[href="#cell-D7"]`)),
	)

	// Register asks first: one row would be skipped.
	within(t, ctx, 20*time.Second,
		chromedp.Click(chromedp.CSS("#register")),
		chromedp.WaitVisible(chromedp.CSS("#confirm-register")),
	)
	if c := text(t, ctx, "#confirm"); !strings.Contains(c, "Some rows will be skipped") || !strings.Contains(c, "Register 24 rows") {
		t.Errorf("the register confirmation says %q", c)
	}
	if loc := eval[string](t, ctx, `location.pathname`); loc != "/upload" {
		t.Errorf("Register went to %s before the seller confirmed", loc)
	}
	screenshot(t, ctx, "confirm")
	axeClean(t, ctx, "the register confirmation")
	// Register: the progress page, updated by events, not by reloading.
	within(t, ctx, 20*time.Second,
		chromedp.Click(chromedp.CSS("#confirm-register")),
		chromedp.WaitVisible(chromedp.CSS("#progress")),
	)
	id := eval[string](t, ctx, `document.getElementById("progress").dataset.upload`)
	eval[bool](t, ctx, `window.sameDocument = true`)
	type reading struct {
		at  time.Time
		eta time.Time
	}
	var readings []reading
	shot := false
	deadline := time.Now().Add(40 * time.Second)
	for {
		v := eval[[]string](t, ctx, `[document.getElementById("progress").dataset.done, document.getElementById("eta").dataset.eta, String(document.getElementById("bar").value), String(document.getElementById("bar").max)]`)
		if v[1] != "" {
			eta, err := time.Parse(time.RFC3339Nano, v[1])
			if err != nil {
				t.Fatalf("the page's estimate %q: %v", v[1], err)
			}
			readings = append(readings, reading{time.Now(), eta})
		}
		if done, _ := strconv.Atoi(v[2]); !shot && done >= 10 && v[0] != "true" {
			screenshot(t, ctx, "progress")
			axeClean(t, ctx, "the progress page")
			if p := text(t, ctx, "#waiting"); !strings.Contains(p, "allows 10 registrations per 2 seconds per seller") || !strings.Contains(p, "You may close this page") {
				t.Errorf("while rows wait the page says %q, want the marketplace's pace and that the page may be closed", p)
			}
			atPhone(t, ctx, "the progress page", "progress-phone")
			shot = true
		}
		if v[0] == "true" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the progress did not reach 100%% within 40 s: %v", v)
		}
		time.Sleep(150 * time.Millisecond)
	}
	final := eval[[]string](t, ctx, `[String(window.sameDocument), document.getElementById("percent").innerText, document.getElementById("n-registered").innerText,
		document.getElementById("n-failed").innerText, document.getElementById("progress").dataset.received || "0", document.querySelector("#failed tbody th").innerText]`)
	if final[0] != "true" || final[1] != "100% done" || final[2] != "24" || final[3] != "1" || final[5] != strconv.Itoa(badRow) {
		t.Errorf("at the end the page shows %q; want the same document at 100%%, 24 registered, 1 failed (row %d)", final, badRow)
	}
	if n, _ := strconv.Atoi(final[4]); n < 3 {
		t.Errorf("the page received %d progress events, want several", n)
	}
	// 1 of 25 failed: partly failed, in words and colour, with the fix
	// file one click away; not "done / every row is done".
	end := eval[[]string](t, ctx, `[document.getElementById("state").textContent, document.getElementById("state").className, document.getElementById("bar").className,
		document.getElementById("eta").innerText, (e => e.hidden ? "" : e.innerText)(document.getElementById("fix")), document.getElementById("fix-file").getAttribute("href")]`)
	if end[0] != "partly failed" || !strings.Contains(end[1], "end-partial") || !strings.Contains(end[2], "end-partial") ||
		end[3] != "Partly failed: 1 of 25 rows needs fixing; the rest are registered." || !strings.Contains(end[4], "Download the fix file: 1 failed row (.xlsx)") ||
		end[5] != "/v1/uploads/"+id+"/report.xlsx?failed_only=true" {
		t.Errorf("at the end the page shows %q, want the partly-failed state with the fix file", end)
	}
	if visible(t, ctx, "#waiting") || visible(t, ctx, "#outage") {
		t.Error("a finished upload still explains waiting or an outage")
	}
	screenshot(t, ctx, "done")
	axeClean(t, ctx, "the finished upload")
	atPhone(t, ctx, "the finished upload", "")
	finish := stack.Sandbox.Audit().Sellers["seller-a"].Last
	bound := window + margin + 2*time.Second
	worst := time.Duration(0)
	for _, r := range readings {
		off := r.eta.Sub(finish)
		if off < 0 {
			off = -off
		}
		worst = max(worst, off)
		if off > bound {
			t.Errorf("the page said at %s that the last row would be registered at %s; it was at %s (%s off, at most %s allowed)",
				r.at.Format("15:04:05.000"), r.eta.Format("15:04:05.000"), finish.Format("15:04:05.000"), off.Round(time.Millisecond), bound)
		}
	}
	if len(readings) < 5 {
		t.Errorf("only %d finish estimates were read while rows waited", len(readings))
	}
	t.Logf("%d estimates read; the worst was %s from the real finish", len(readings), worst.Round(time.Millisecond))

	// Both reports, downloaded by the page's links, open as workbooks.
	href := func(sel string) string {
		return eval[string](t, ctx, `document.querySelector(`+strconv.Quote(sel)+`).href`)
	}
	reportURL, failedURL := href("#report"), href("#report-failed")
	status, full := download(t, ctx, reportURL)
	if all := openXLSX(t, full); status != 200 || len(all) != rows+1 || !strings.Contains(fmt.Sprint(all[badRow-1]), "failed") || !strings.Contains(fmt.Sprint(all[1]), "registered") {
		t.Errorf("full report: %d, %d rows: %v", status, len(all), all)
	}
	status, failedOnly := download(t, ctx, failedURL)
	if failed := openXLSX(t, failedOnly); status != 200 || len(failed) != 2 || failed[1][0] != fmt.Sprintf("SHOP-%04d", badRow-1) {
		t.Errorf("failed-only report: %d %v, want the header and row %d", status, failed, badRow)
	}

	// A form on another origin of the same site posts to the service with
	// the seller's cookie (SameSite=Strict lets a same-site request carry
	// it), without the CSRF token: refused, nothing uploaded.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><form method="post" action="%s/upload" enctype="multipart/form-data"><input name="file" value="x"></form><script>document.forms[0].submit()</script>`, base)
	}))
	defer evil.Close()
	within(t, ctx, 20*time.Second, chromedp.Navigate(evil.URL))
	poll(t, ctx, `location.origin === `+strconv.Quote(base)+` && document.querySelector("h1") !== null`)
	if h := eval[string](t, ctx, `document.querySelector("h1").innerText`); h != "Request refused" {
		t.Errorf("the cross-site post was answered with %q, want the refusal", h)
	}
	within(t, ctx, 20*time.Second, chromedp.Navigate(base+"/uploads"), chromedp.WaitVisible(chromedp.CSS("table.uploads")))
	screenshot(t, ctx, "uploads")
	axeClean(t, ctx, "the history")
	if st := text(t, ctx, "table.uploads tbody td:nth-of-type(2)"); st != "partly failed" {
		t.Errorf("the history says %q of the upload with a failed row, want partly failed", st)
	}
	atPhone(t, ctx, "the history", "uploads-phone")

	// A file whose rows are all registered already: Register would register
	// nothing, and the page says so instead of "press Register".
	within(t, ctx, 20*time.Second,
		chromedp.Navigate(base+"/upload"), chromedp.WaitVisible(chromedp.CSS("#file")),
		chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{productFile(t, 5, 0)}),
		chromedp.Click(chromedp.CSS("#check")), chromedp.WaitVisible(chromedp.CSS("#plan")),
	)
	if p, all := text(t, ctx, "#plan"), text(t, ctx, "#check-result"); p != "All 5 rows are registered already; there is nothing new to register." || strings.Contains(all, "Press Register") {
		t.Errorf("a file registered already: the check says %q (%q)", p, all)
	}
	// Register then points at the plan, said once (not a second time as
	// the question's title), and asks nothing.
	within(t, ctx, 20*time.Second, chromedp.Click(chromedp.CSS("#register")))
	poll(t, ctx, `document.activeElement && document.activeElement.id === "plan"`)
	if visible(t, ctx, "#confirm") || eval[string](t, ctx, `location.pathname`) != "/upload" {
		t.Error("Register offered to register a file whose rows are all registered already")
	}
	if n := strings.Count(text(t, ctx, "#check-result"), "there is nothing new to register"); n != 1 {
		t.Errorf("the page says there is nothing to register %d times, want once", n)
	}

	// Sign out asks first.
	within(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS(".signout summary")), chromedp.WaitVisible(chromedp.CSS("#signout-yes")))
	if c := text(t, ctx, ".signout-confirm"); !strings.Contains(c, "Sign out?") {
		t.Errorf("sign-out confirmation: %q", c)
	}
	atPhone(t, ctx, "the sign-out question", "")
	axeClean(t, ctx, "the sign-out question")
	within(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS(".signout summary")))
	tokA, _ := httpapi.MintToken(stack.Secret, "seller-a", time.Minute, time.Now())
	if _, b := apiGet(t, base+"/v1/uploads", tokA); strings.Count(string(b), `"id":`) != 1 {
		t.Errorf("seller A's uploads after the cross-site post: %s, want only the registered one", b)
	}

	// A second seller, in a browser of its own, in Korean.
	bctx := browser(t)
	linkB, err := stack.SignInLink("seller-b")
	if err != nil {
		t.Fatal(err)
	}
	within(t, bctx, 20*time.Second, chromedp.Navigate(base+"/signin?lang=ko"), chromedp.WaitVisible(chromedp.CSS("h1")))
	if h := text(t, bctx, "h1"); h != "로그인이 필요합니다" {
		t.Errorf("the sign-in page says %q", h)
	}
	atPhone(t, bctx, "the sign-in page", "")
	axeClean(t, bctx, "the sign-in page")
	openSignInLink(t, bctx, linkB+"&lang=ko")
	poll(t, bctx, `location.pathname === "/uploads"`)
	page := eval[string](t, bctx, `document.querySelector("main").innerText`)
	if !strings.Contains(page, "아직 올린 파일이 없습니다.") || strings.Contains(page, "spring-products") || strings.Contains(page, id) {
		t.Errorf("seller B's uploads page:\n%s\nwant it empty, in Korean", page)
	}
	within(t, bctx, 20*time.Second, chromedp.Navigate(base+"/upload"), chromedp.WaitVisible(chromedp.CSS("#file")))
	screenshot(t, bctx, "upload-ko")
	atPhone(t, bctx, "the upload page", "")
	within(t, bctx, 20*time.Second, chromedp.Navigate(base+"/uploads/"+id), chromedp.WaitVisible(chromedp.CSS("h1")))
	if h := eval[string](t, bctx, `document.querySelector("h1").innerText`); h != "찾을 수 없습니다" {
		t.Errorf("seller B opening seller A's upload sees %q, want not found", h)
	}
	if back := eval[string](t, bctx, `(a => a ? a.getAttribute("href") + " " + a.innerText : "")(document.querySelector("main a.back"))`); back != "/uploads 등록 내역으로 돌아가기" {
		t.Errorf("the not-found page's way back: %q", back)
	}
	atPhone(t, bctx, "the not-found page", "")
	axeClean(t, bctx, "the not-found page")
	for _, u := range []string{reportURL, failedURL, base + "/v1/uploads/" + id} {
		if status, b := download(t, bctx, u); status != 404 || bytes.Contains(b, []byte("SHOP-")) {
			t.Errorf("seller B fetching %s: %d", u, status)
		}
	}
	tokB, _ := httpapi.MintToken(stack.Secret, "seller-b", time.Minute, time.Now())
	for _, u := range []string{base + "/v1/uploads/" + id, base + "/v1/uploads/" + id + "/report.xlsx", base + "/v1/uploads/" + id + "/events"} {
		if status, _ := apiGet(t, u, tokB); status != 404 {
			t.Errorf("seller B's token GET %s: %d, want 404", u, status)
		}
	}
	if status, b := apiGet(t, base+"/v1/uploads", tokB); status != 200 || !json.Valid(b) || strings.Contains(string(b), id) {
		t.Errorf("seller B's list: %d %s", status, b)
	}
}

// eventLog runs in each document before its scripts: it keeps when each
// progress event came (ms since the epoch) and its marketplace field.
const eventLog = `(function () {
  var ES = window.EventSource;
  if (!ES) return;
  window.__bulkregEvents = [];
  window.EventSource = function (url, opts) {
    var es = new ES(url, opts);
    es.addEventListener("progress", function (e) {
      var p = {};
      try { p = JSON.parse(e.data); } catch (x) {}
      var ev = {at: Date.now(), marketplace: p.marketplace || "", what: [p.registered, p.rows_waiting, p.rows_ahead, p.eta || "", p.state].join(" ")};
      window.__bulkregEvents.push(ev);
      // This listener runs before the page's own: whether the outage notice
      // shows is read once every listener of the event has run.
      setTimeout(function () {
        var o = document.getElementById("outage");
        ev.shown = !!o && o.getClientRects().length > 0;
      }, 0);
    });
    return es;
  };
  window.EventSource.prototype = ES.prototype;
})();`

// TestOutageInTheBrowser: an upload waiting behind the seller's earlier one
// says why (the marketplace's limit, rows ahead) and that the page may be
// closed; when the marketplace stops answering the page says so within one
// event of the upload's status saying so, and within one event of the API's
// first failed call as the sandbox logged it (what happens, nothing is
// lost, no finish time), and the notice leaves within one event of its
// recovery;
// the upload then ends "all registered".
func TestOutageInTheBrowser(t *testing.T) {
	// A circuit that opens after a few failed calls of two sellers and
	// probes every 200 ms to 1 s: the outage shows in about a second.
	ctx, stack := browserStack(t, devstack.Options{Consumers: 1, Partitions: 2,
		Circuit: circuit.Settings{Window: 2 * time.Second, MinCalls: 4, MinFailedRows: 2, ProbeMin: 200 * time.Millisecond, ProbeMax: time.Second, ProbeLease: 3 * time.Second}})
	base := stack.ProducerURL
	tokA, _ := httpapi.MintToken(stack.Secret, "seller-a", 5*time.Minute, time.Now())
	tokC, _ := httpapi.MintToken(stack.Secret, "seller-c", 5*time.Minute, time.Now())

	// Seller a's earlier upload of 30 rows (3 windows), then 10 more by the
	// page: they wait behind it at 0 %.
	first := apiUpload(t, base, tokA, productFileSKUs(t, 30, 0, "EARLY"))
	link, err := stack.SignInLink("seller-a")
	if err != nil {
		t.Fatal(err)
	}
	// Every document of the tab notes when each progress event came and
	// what it said of the marketplace, to count the events between the
	// API's first failed call and the notice.
	within(t, ctx, 10*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: eventLog})
		return err
	}))
	openSignInLink(t, ctx, link)
	poll(t, ctx, `location.pathname === "/uploads"`)
	within(t, ctx, 20*time.Second,
		chromedp.Navigate(base+"/upload"), chromedp.WaitVisible(chromedp.CSS("#file")),
		chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{productFileSKUs(t, 10, 0, "LATER")}),
		chromedp.Click(chromedp.CSS("#register")), chromedp.WaitVisible(chromedp.CSS("#progress")),
	)
	id := eval[string](t, ctx, `document.getElementById("progress").dataset.upload`)
	poll(t, ctx, `!document.getElementById("ahead").hidden`)
	ahead := eval[[]string](t, ctx, `[document.getElementById("ahead").innerText, document.getElementById("waiting").innerText, document.getElementById("percent").innerText]`)
	if !strings.Contains(ahead[0], "rows of your earlier uploads are ahead of this one: the marketplace registers at most 10 per 2 seconds for each seller") ||
		!strings.Contains(ahead[1], "You may close this page") || ahead[2] != "0% done" {
		t.Errorf("an upload behind the seller's earlier one says %q", ahead)
	}
	screenshot(t, ctx, "waiting")
	axeClean(t, ctx, "the waiting upload")

	// Seller c calls too: one seller's failures never open the circuit.
	apiUpload(t, base, tokC, productFileSKUs(t, 40, 0, "OTHER"))
	status := func(tok, id string) map[string]any {
		code, b := apiGet(t, base+"/v1/uploads/"+id, tok)
		var v map[string]any
		if code != 200 || json.Unmarshal(b, &v) != nil {
			t.Fatalf("status of %s: %d %s", id, code, b)
		}
		return v
	}
	testwait.For(t, 20*time.Second, "the earlier upload's first rows register", func() bool {
		return status(tokA, first)["registered"].(float64) >= 5
	})

	outageAt := time.Now()
	stack.Sandbox.SetOutage(sandbox.Outage{All: true})
	var said time.Time
	testwait.For(t, 20*time.Second, "the upload's status says the marketplace is not answering", func() bool {
		if status(tokA, id)["marketplace"] != "not_answering" {
			return false
		}
		said = time.Now()
		return true
	})
	testwait.For(t, 10*time.Second, "the outage notice shows", func() bool {
		return visible(t, ctx, "#outage-not_answering")
	})
	followsStatus(t, loggedEvents(t, ctx), said, upload.MarketplaceNotAnswering)
	// From the API's first failed call: at most one event without a
	// notice, the next one has one, and it says the outage: several
	// sellers' calls fail, so the seller never reads "failing" first, even
	// before the fleet's circuit opens.
	var firstFailed time.Time
	for _, c := range stack.Sandbox.Calls() {
		if c.Injected && c.Status == http.StatusServiceUnavailable && !c.Received.Before(outageAt) {
			firstFailed = c.Received
			break
		}
	}
	if firstFailed.IsZero() {
		t.Fatal("the sandbox logged no failed call during the outage")
	}
	without, with := 0, time.Time{}
	for _, ev := range loggedEvents(t, ctx) {
		at := ev.at()
		if at.Before(firstFailed) {
			continue
		}
		if ev.Marketplace == "failing" {
			t.Errorf("%v after the first failed call of the outage the page said the marketplace is failing this seller's rows", at.Sub(firstFailed).Round(time.Millisecond))
		}
		if ev.Marketplace == "not_answering" || ev.Marketplace == "failing" {
			with = at
			break
		}
		t.Logf("an event without the notice %v after the first failed call: %s", at.Sub(firstFailed).Round(time.Millisecond), ev.What)
		without++
	}
	t.Logf("the notice came %v after the first failed call, after %d events without it", with.Sub(firstFailed).Round(time.Millisecond), without)
	if with.IsZero() || without > 1 {
		t.Errorf("after the API's first failed call %d events came without the notice (first with it: %v); want it within one event", without, with)
	}
	note := eval[[]string](t, ctx, `[document.getElementById("outage").innerText, document.getElementById("eta").innerText]`)
	if !strings.Contains(note[0], "The marketplace is not answering") || !strings.Contains(note[0], "No row is lost") ||
		!strings.Contains(note[0], "continue by themselves") || note[1] != "The finish time is unknown until the marketplace answers again." {
		t.Errorf("during the outage the page says %q", note)
	}
	time.Sleep(1500 * time.Millisecond) // no countdown: the text stays
	if e := text(t, ctx, "#eta"); e != note[1] {
		t.Errorf("during the outage the finish line changed to %q", e)
	}
	screenshot(t, ctx, "outage")
	axeClean(t, ctx, "the outage notice")
	atPhone(t, ctx, "the outage notice", "outage-phone")
	if f := status(tokA, id)["failed"].(float64); f != 0 {
		t.Errorf("%v rows failed for the outage, want 0", f)
	}

	stack.Sandbox.SetOutage(sandbox.Outage{})
	testwait.For(t, 30*time.Second, "the upload's status says the marketplace answers", func() bool {
		if status(tokA, id)["marketplace"] != "answering" {
			return false
		}
		said = time.Now()
		return true
	})
	testwait.For(t, 10*time.Second, "the outage notice leaves", func() bool {
		return !visible(t, ctx, "#outage")
	})
	followsStatus(t, loggedEvents(t, ctx), said, upload.MarketplaceAnswering)
	poll2 := func(expr string, d time.Duration) {
		testwait.For(t, d, expr, func() bool { return eval[bool](t, ctx, expr) })
	}
	poll2(`document.getElementById("progress").dataset.done === "true"`, 60*time.Second)
	end := eval[[]string](t, ctx, `[document.getElementById("state").textContent, document.getElementById("state").className, document.getElementById("eta").innerText, String(document.getElementById("fix").hidden)]`)
	if end[0] != "all registered" || !strings.Contains(end[1], "end-ok") || end[2] != "Every row is registered (10 registered now)." || end[3] != "true" {
		t.Errorf("after the outage the upload ends %q, want all registered", end)
	}
}

// TestOneSellersFailuresInTheBrowser: the marketplace answers every call of
// this seller alone with 503. That never opens the fleet's circuit (one
// seller's failures are its own), so the outage notice stays hidden, and
// without a notice of its own the page would say nothing while its finish
// time slid a window at a time. The page says the marketplace is failing
// this seller's rows, what becomes of them (retried,
// set aside for an operator, none lost), and that the finish time is
// unknown; once the marketplace takes the rows again the notice leaves and
// the countdown returns.
//
// The circuit's window (2 s) is as long as the seller's limit window, and at
// its limit the seller calls in bursts a window and a margin apart (a failed
// call keeps its slot): between bursts the window is empty. The seller's
// failing streak outlives the window (circuit.SellerCalls.Streak, for a
// window and a margin after its last failure: upload.HoldFailing), so the
// notice holds through such gaps and the countdown does not come back.
func TestOneSellersFailuresInTheBrowser(t *testing.T) {
	ctx, stack := browserStack(t, devstack.Options{Consumers: 1, Partitions: 2,
		Circuit: circuit.Settings{Window: window}})
	base := stack.ProducerURL
	if err := stack.Sandbox.SetChaos(sandbox.Chaos{Sellers: []string{"seller-a"}}); err != nil {
		t.Fatal(err)
	}
	tok, _ := httpapi.MintToken(stack.Secret, "seller-a", 5*time.Minute, time.Now())
	id := apiUpload(t, base, tok, productFileSKUs(t, 30, 0, "ALONE"))
	link, err := stack.SignInLink("seller-a")
	if err != nil {
		t.Fatal(err)
	}
	openSignInLink(t, ctx, link)
	poll(t, ctx, `location.pathname === "/uploads"`)
	within(t, ctx, 20*time.Second, chromedp.Navigate(base+"/uploads/"+id+"?lang=en"), chromedp.WaitVisible(chromedp.CSS("#progress")))
	testwait.For(t, 15*time.Second, "the failing notice shows", func() bool {
		return visible(t, ctx, "#outage-failing") && !visible(t, ctx, "#outage-not_answering")
	})
	note := eval[[]string](t, ctx, `[document.getElementById("outage").innerText, document.getElementById("eta").innerText]`)
	if !strings.Contains(note[0], "The marketplace is failing your registrations") || !strings.Contains(note[0], "set aside for an operator") ||
		!strings.Contains(note[0], "No row is lost") || note[1] != "The finish time is unknown until the marketplace takes your rows again." {
		t.Errorf("while the marketplace fails this seller the page says %q", note)
	}
	fleet, err := circuit.New(stack.Redis, stack.Options.Circuit)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := fleet.Peek(context.Background()); err != nil || st.State != circuit.Closed {
		t.Errorf("the fleet's circuit: %+v, %v; want closed (one seller's failures are its own)", st, err)
	}
	time.Sleep(1200 * time.Millisecond) // no countdown: the text stays
	if e := text(t, ctx, "#eta"); e != note[1] {
		t.Errorf("while failing the finish line changed to %q", e)
	}
	atPhone(t, ctx, "the failing notice", "failing-phone")
	axeClean(t, ctx, "the failing notice")

	if err := stack.Sandbox.SetChaos(sandbox.Chaos{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the failing notice leaves", func() bool { return !visible(t, ctx, "#outage") })
	poll2 := func(expr string, d time.Duration) {
		testwait.For(t, d, expr, func() bool { return eval[bool](t, ctx, expr) })
	}
	poll2(`document.getElementById("progress").dataset.done === "true"`, 60*time.Second)
	if visible(t, ctx, "#outage") {
		t.Error("a finished upload still shows the failing notice")
	}
	twiceInTheBrowser(t, ctx, stack)
}

// twiceInTheBrowser: a row registered while the marketplace already held
// its SKU (registered_twice) appears on an open progress page as it is
// recorded, in a group of its own naming both products, and the page stays
// accessible. The rows are written to the upload's status directly: a
// duplicate needs a ledger lost between a claim and its answer, which the
// consumer's own tests stage.
func twiceInTheBrowser(t *testing.T, ctx context.Context, stack *devstack.Stack) {
	store := uploadstatus.New(stack.Redis, time.Hour)
	bg := context.Background()
	id := "0123456789abcd2e"
	if _, err := store.Create(bg, uploadstatus.Upload{ID: id, SellerID: "seller-a", FileName: "twice.xlsx", Total: 2, Valid: 2,
		Header: []string{"판매자상품코드", "가격"}, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := store.AddToSeller(bg, "seller-a", id, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := store.SetState(bg, id, uploadstatus.Published, ""); err != nil {
		t.Fatal(err)
	}
	within(t, ctx, 20*time.Second, chromedp.Navigate(stack.ProducerURL+"/uploads/"+id+"?lang=ko"), chromedp.WaitVisible(chromedp.CSS("#progress")))
	if visible(t, ctx, "#twice") {
		t.Error("the registered-twice group shows before any row is")
	}
	row := uploadstatus.RowResult{Row: 2, State: uploadstatus.Registered, ProductID: "P-NEW", Code: uploadstatus.RegisteredTwice, Field: "seller_sku", At: time.Now(),
		Details: []uploadstatus.Detail{{Code: uploadstatus.RegisteredTwice, Field: "seller_sku", Params: map[string]string{
			"field": "seller_sku", "value": `"A-1"`, "product": "P-NEW", "other": "P-OLD",
			"kind": "from", "upload": "9f86d081884c7d65", "row": "5", "date": "2026-03-02", "at": "2026-03-02T14:30:00Z"}}}}
	if err := store.RecordRow(bg, id, row); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the registered-twice group shows", func() bool { return visible(t, ctx, "#twice") })
	if got := text(t, ctx, "#twice"); !strings.Contains(got, "P-NEW") || !strings.Contains(got, "P-OLD") || !strings.Contains(got, "두 번 등록됨 (1)") {
		t.Errorf("the registered-twice group says %q; want both products and its count", got)
	}
	screenshot(t, ctx, "registered-twice")
	axeClean(t, ctx, "the registered-twice group")
}

// docsLink reports whether README.md, ARCHITECTURE.md or a page of docs/
// shows the screenshot file.
func docsLink(t *testing.T, file string) bool {
	t.Helper()
	pages, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	for _, p := range append(pages, filepath.Join("..", "..", "README.md"), filepath.Join("..", "..", "ARCHITECTURE.md")) {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), "screenshots/"+file) {
			return true
		}
	}
	return false
}
