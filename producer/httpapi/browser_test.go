package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/devstack"
	"github.com/bulkreg/bulkreg/producer/httpapi"
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
	dirs := []string{t.ArtifactDir()}
	if os.Getenv("BULKREG_UPDATE_SCREENSHOTS") != "" {
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

// productFile writes a seller's file of n rows; badRow (a spreadsheet row
// number) has a price that is not a number.
func productFile(t *testing.T, n, badRow int) string {
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
		vals := []any{fmt.Sprintf("SHOP-%04d", i+1), names[i%len(names)] + " " + strconv.Itoa(i+1), "50000" + strconv.Itoa(100+i%7), price, 20 + i, "오늘상점", fmt.Sprintf("https://img.example.com/p/%d.jpg", i+1)}
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
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed; `make deps` installs it")
	}
	ctx := browser(t)
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logf, err := os.Create(filepath.Join(t.ArtifactDir(), "stack.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	stack, err := devstack.Start(sctx, devstack.Options{Redis: "real", Limit: limit, Window: window, Margin: margin, Logger: slog.New(slog.NewJSONHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Consumers: 2, Partitions: 2, SessionTimeout: 6 * time.Second, EventsInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	base := stack.ProducerURL
	const rows, badRow = 25, 7 // the bad row shows in the preview's first screen
	file := productFile(t, rows, badRow)

	// Sign in through a link: the page moves on to the seller's uploads.
	link, err := stack.SignInLink("seller-a")
	if err != nil {
		t.Fatal(err)
	}
	within(t, ctx, 20*time.Second, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`table.uploads, main p`)))
	poll(t, ctx, `location.pathname === "/uploads" && document.querySelector("h1").textContent === "Your uploads"`)

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
	if !strings.HasPrefix(problems, cell+" (판매가 (price)): ") || strings.Count(problems, "\n") != 0 {
		t.Errorf("the check lists %q, want one problem naming %s", problems, cell)
	}
	marked := eval[string](t, ctx, `(c => c ? c.getAttribute("aria-invalid") + "|" + c.textContent : "")(document.getElementById("cell-`+cell+`"))`)
	if !strings.HasPrefix(marked, "true|12,000원") {
		t.Errorf("preview cell %s: %q, want it marked invalid with the seller's text", cell, marked)
	}
	if s := eval[string](t, ctx, `document.querySelector("#check-summary").innerText`); s != "25 rows: 24 ready, 1 with problems, 0 already registered" {
		t.Errorf("check summary %q", s)
	}
	if f := eval[string](t, ctx, `document.getElementById("file").files[0].name`); f != "spring-products.xlsx" {
		t.Errorf("after the check the file input holds %q, want the file still chosen", f)
	}
	screenshot(t, ctx, "check")

	// Register: the progress page, updated by events, not by reloading.
	within(t, ctx, 20*time.Second,
		chromedp.Click(chromedp.CSS("#register")),
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
	screenshot(t, ctx, "done")
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
	within(t, bctx, 20*time.Second, chromedp.Navigate(linkB+"&lang=ko"))
	poll(t, bctx, `location.pathname === "/uploads"`)
	page := eval[string](t, bctx, `document.querySelector("main").innerText`)
	if !strings.Contains(page, "아직 올린 파일이 없습니다.") || strings.Contains(page, "spring-products") || strings.Contains(page, id) {
		t.Errorf("seller B's uploads page:\n%s\nwant it empty, in Korean", page)
	}
	within(t, bctx, 20*time.Second, chromedp.Navigate(base+"/upload"), chromedp.WaitVisible(chromedp.CSS("#file")))
	screenshot(t, bctx, "upload-ko")
	within(t, bctx, 20*time.Second, chromedp.Navigate(base+"/uploads/"+id), chromedp.WaitVisible(chromedp.CSS("h1")))
	if h := eval[string](t, bctx, `document.querySelector("h1").innerText`); h != "찾을 수 없습니다" {
		t.Errorf("seller B opening seller A's upload sees %q, want not found", h)
	}
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
