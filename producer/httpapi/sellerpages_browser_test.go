package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/devstack"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/sellertime"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/producer/httpapi"
	"github.com/bulkreg/bulkreg/producer/upload"
)

// sellerTime finds the times a page or a report says: each in the one
// format of its language, the zone named.
var sellerTime = regexp.MustCompile(`\d{4}-\d{2}-\d{2} (?:오전 |오후 )?\d{1,2}:\d{2}:\d{2}(?: AM| PM)? \([A-Za-z0-9+:-]+\)`)

// clockTime is any time of day, said in any format.
var clockTime = regexp.MustCompile(`\d{1,2}:\d{2}:\d{2}`)

// inZone sets the tab's time zone, as the seller's computer has it; the
// pages' script reads it from Intl.
func inZone(t *testing.T, ctx context.Context, zone string) {
	t.Helper()
	within(t, ctx, 10*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: zone})
		return err
	}))
}

// onEveryDocument runs src in each document of the tab before its scripts.
func onEveryDocument(t *testing.T, ctx context.Context, src string) {
	t.Helper()
	within(t, ctx, 10*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: src})
		return err
	}))
}

// pageTimes checks every time the document's main says: each in lang's
// format with zone's name at that instant (sellertime), and no time of
// day said any other way. It returns them.
func pageTimes(t *testing.T, ctx context.Context, lang string, zone *time.Location, page string) []string {
	t.Helper()
	text := eval[string](t, ctx, `document.querySelector("main").innerText`)
	times := sellerTime.FindAllString(text, -1)
	if n := len(clockTime.FindAllString(text, -1)); n != len(times) {
		t.Errorf("%s says %d times of day, %d of them in the seller's format:\n%s", page, n, len(times), text)
	}
	for _, s := range times {
		if !saysInstant(lang, s, zone) {
			t.Errorf("%s says %q: not %s's format in %s", page, s, lang, zone)
		}
	}
	return times
}

// saysInstant reports whether s is an instant as sellertime says it in
// lang and zone (the instant is read back from s).
func saysInstant(lang, s string, zone *time.Location) bool {
	for _, layout := range []string{"2006-01-02 오전 3:04:05", "2006-01-02 오후 3:04:05", "2006-01-02 3:04:05 PM"} {
		body, _, _ := strings.Cut(s, " (")
		v, err := time.ParseInLocation(strings.NewReplacer("오전", "AM", "오후", "PM").Replace(layout), strings.NewReplacer("오전", "AM", "오후", "PM").Replace(body), zone)
		if err == nil && sellertime.Format(lang, v, zone) == s {
			return true
		}
	}
	return false
}

// TestTimesInTheSellersZoneInTheBrowser: every time a seller reads is in
// the browser's time zone, named, in one format per language, and one
// instant reads the same on the history, on the progress page (from the
// page and from its events) and in the report: no time is in the server's
// zone (UTC) or unnamed, and no time is in the browser's own format beside
// the page's ("14:17:20에 올림" beside "오후 11:21:21에 …"). A page drawn
// before the browser told its zone says the service's, Asia/Seoul.
func TestTimesInTheSellersZoneInTheBrowser(t *testing.T) {
	// A browser and a stack of its own, and nothing timed closer than
	// seconds: it runs beside another such test (the notices and the
	// outage, which read the circuit's timing, run alone).
	t.Parallel()
	_, stack := browserStack(t, devstack.Options{Consumers: 1, Partitions: 2})
	base := stack.ProducerURL
	for _, c := range []struct{ lang, zone, seller string }{
		{"ko", "Asia/Seoul", "seller-ko"},
		{"en", "America/New_York", "seller-en"},
	} {
		t.Run(c.lang, func(t *testing.T) {
			loc, err := sellertime.Load(c.zone)
			if err != nil {
				t.Fatal(err)
			}
			ctx := browser(t)
			inZone(t, ctx, c.zone)
			link, err := stack.SignInLink(c.seller)
			if err != nil {
				t.Fatal(err)
			}
			openSignInLink(t, ctx, link+"&lang="+c.lang)
			poll(t, ctx, `location.pathname === "/uploads"`)
			if k := eval[string](t, ctx, `document.cookie`); !strings.Contains(k, "bulkreg_tz="+c.zone) {
				t.Errorf("after signing in the browser's cookies are %q, want its zone, %s", k, c.zone)
			}
			within(t, ctx, 20*time.Second,
				chromedp.Navigate(base+"/upload"), chromedp.WaitVisible(chromedp.CSS("#file")),
				chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{productFileSKUs(t, 35, 0, strings.ToUpper(c.lang))}),
				chromedp.Click(chromedp.CSS("#register")), chromedp.WaitVisible(chromedp.CSS("#progress")),
			)
			id := eval[string](t, ctx, `document.getElementById("progress").dataset.upload`)
			var st struct {
				CreatedAt time.Time `json:"created_at"`
			}
			if code, b := download(t, ctx, "/v1/uploads/"+id); code != 200 || json.Unmarshal(b, &st) != nil {
				t.Fatalf("the upload's status: %d %s", code, b)
			}
			created := sellertime.Format(c.lang, st.CreatedAt, loc)

			// While rows wait: the upload time and the finish estimate, the
			// estimate as the events say it, each in the seller's zone.
			poll(t, ctx, `Number(document.getElementById("progress").dataset.received || 0) >= 2 && document.getElementById("eta").dataset.at !== ""`)
			eta := eval[[]string](t, ctx, `[document.getElementById("eta").dataset.eta, document.getElementById("eta").dataset.at, document.getElementById("eta").innerText]`)
			at, err := time.Parse(time.RFC3339Nano, eta[0])
			if err != nil {
				t.Fatalf("the estimate %q: %v", eta[0], err)
			}
			if want := sellertime.Format(c.lang, at, loc); eta[1] != want || !strings.Contains(eta[2], want) {
				t.Errorf("the estimate %s reads %q in %q from the events, want %q", eta[0], eta[1], eta[2], want)
			}
			times := pageTimes(t, ctx, c.lang, loc, "the progress page")
			if !slices.Contains(times, created) {
				t.Errorf("the progress page says the times %q, want the upload's, %q", times, created)
			}
			axeClean(t, ctx, "the progress page with its times")
			atPhone(t, ctx, "the progress page with its times", "progress-times-"+c.lang+"-phone")

			// Done: when the last row was done, the same instant as the
			// report's latest time.
			testwait.For(t, 40*time.Second, "the upload is done", func() bool {
				return eval[string](t, ctx, `document.getElementById("progress").dataset.done`) == "true"
			})
			poll(t, ctx, `!document.getElementById("finished").hidden`)
			times = pageTimes(t, ctx, c.lang, loc, "the finished upload")
			finished := sellerTime.FindString(text(t, ctx, "#finished"))
			if finished == "" || !slices.Contains(times, created) {
				t.Errorf("the finished upload says %q (finished %q), want the upload's time %q and when it finished", times, finished, created)
			}
			axeClean(t, ctx, "the finished upload with its times")
			atPhone(t, ctx, "the finished upload with its times", "")
			code, xlsx := download(t, ctx, "/v1/uploads/"+id+"/report.xlsx")
			rows := openXLSX(t, xlsx)
			if code != 200 || len(rows) != 36 {
				t.Fatalf("the report: %d, %d rows", code, len(rows))
			}
			col := len(rows[0]) - 1
			if want := map[string]string{"ko": "처리 시각", "en": "Done at"}[c.lang]; rows[0][col] != want {
				t.Errorf("the report's last column is %q, want %q", rows[0][col], want)
			}
			var latest string
			for _, r := range rows[1:] {
				if len(r) <= col || !saysInstant(c.lang, r[col], loc) {
					t.Errorf("report row %q: its time is not in the seller's format and zone", r)
					continue
				}
				if latest == "" || r[col] == finished {
					latest = r[col]
				}
			}
			if latest != finished {
				t.Errorf("the page says the last row was done at %q; the report has no row done then (%q)", finished, latest)
			}

			// The history: the same upload time, to the second and zone.
			within(t, ctx, 20*time.Second, chromedp.Navigate(base+"/uploads"), chromedp.WaitVisible(chromedp.CSS("table.uploads")))
			if h := pageTimes(t, ctx, c.lang, loc, "the history"); len(h) != 1 || h[0] != created {
				t.Errorf("the history says %q, want the upload's time %q as the progress page says it", h, created)
			}
			axeClean(t, ctx, "the history with its times")
			atPhone(t, ctx, "the history with its times", "")

			// A page drawn before the browser told its zone: the service's.
			seoul := eval[string](t, ctx, `(document.cookie = "bulkreg_tz=; path=/; max-age=0", fetch("/uploads").then(r => r.text()).then(h => new DOMParser().parseFromString(h, "text/html").body.textContent))`)
			if got := sellerTime.FindAllString(seoul, -1); len(got) != 1 || !strings.HasSuffix(got[0], "(KST)") {
				t.Errorf("the history without the browser's zone says %q, want the upload's time in Asia/Seoul", got)
			}
		})
	}
}

// failingLog runs in each document before its scripts: it keeps when each
// progress event came and what it said of the marketplace.
const failingLog = eventLog

// loggedEvent is a progress event as eventLog kept it: when the page got
// it, what it said of the marketplace, and whether the outage notice showed
// once the page had handled it (nil until then).
type loggedEvent struct {
	At          float64 `json:"at"`
	Marketplace string  `json:"marketplace"`
	What        string  `json:"what"`
	Shown       *bool   `json:"shown"`
}

func (e loggedEvent) at() time.Time { return time.UnixMilli(int64(e.At)) }

// loggedEvents are the progress events the tab's documents got, in order.
func loggedEvents(t *testing.T, ctx context.Context) []loggedEvent {
	t.Helper()
	return eval[[]loggedEvent](t, ctx, `window.__bulkregEvents || []`)
}

// followsStatus holds the page to the upload's status, which said the
// marketplace was want in an answer that came at said: the stream
// reads the same status once per tick and sends what it read at once, so
// of the events the page got after said only the first may say what an
// earlier read said (it was on its way), and every later one says want.
// The outage notice shows after each event exactly when the event says the
// marketplace is not answering, failing or misconfigured: the page follows
// the event it got, not a later one.
// Counting events instead would count those read between two polls of the
// status, which a busy machine makes many.
func followsStatus(t *testing.T, events []loggedEvent, said time.Time, want string) {
	t.Helper()
	after, read := 0, 0
	for _, ev := range events {
		notice := ev.Marketplace == upload.MarketplaceNotAnswering || ev.Marketplace == upload.MarketplaceFailing || ev.Marketplace == upload.MarketplaceMisconfigured
		if ev.Shown != nil {
			read++
			if *ev.Shown != notice {
				t.Errorf("after an event that said the marketplace is %q the outage notice shown is %v: %s", ev.Marketplace, *ev.Shown, ev.What)
			}
		}
		if !ev.at().After(said) {
			continue
		}
		if ev.Marketplace != want && after > 0 {
			t.Errorf("%v after the status said the marketplace is %q, the page's event %d since said %q: want every event but the one on its way to say what the status said",
				ev.at().Sub(said).Round(time.Millisecond), want, after+1, ev.Marketplace)
		}
		after++
	}
	if read == 0 {
		t.Errorf("of %d events the page got, the event log read the outage notice after none: the notice's check read nothing", len(events))
	}
}

// TestNoticesFollowTheCallsInTheBrowser: the marketplace fails one
// seller's calls alone, then takes them again; the page's "failing"
// notice leaves with the first call it takes, well within the window (not
// about one window later), and never comes back. Then the marketplace
// stops answering everyone: the page says so, and no event says "failing"
// first, not even in the first seconds. In Korean and English, at 1280
// and 390 px, axe-core in every state.
func TestNoticesFollowTheCallsInTheBrowser(t *testing.T) {
	ctx, stack := browserStack(t, devstack.Options{Consumers: 1, Partitions: 2,
		Circuit: circuit.Settings{Window: window, MinCalls: 4, MinFailedRows: 2, ProbeMin: 200 * time.Millisecond, ProbeMax: time.Second, ProbeLease: 3 * time.Second}})
	base := stack.ProducerURL
	onEveryDocument(t, ctx, failingLog)
	for _, c := range []struct{ lang, seller, title string }{
		{"ko", "seller-ko", "마켓플레이스가 이 판매자의 등록을 받지 못하고 있습니다"},
		{"en", "seller-en", "The marketplace is failing your registrations"},
	} {
		t.Run("failing/"+c.lang, func(t *testing.T) {
			ctx := ctx
			if c.lang != "ko" { // a browser of its own: one seller signed in each
				ctx = browser(t)
				onEveryDocument(t, ctx, failingLog)
			}
			if err := stack.Sandbox.SetChaos(sandbox.Chaos{Sellers: []string{c.seller}}); err != nil {
				t.Fatal(err)
			}
			tok, _ := httpapi.MintToken(stack.Secret, c.seller, 5*time.Minute, time.Now())
			id := apiUpload(t, base, tok, productFileSKUs(t, 40, 0, "F"+strings.ToUpper(c.lang)))
			link, err := stack.SignInLink(c.seller)
			if err != nil {
				t.Fatal(err)
			}
			openSignInLink(t, ctx, link+"&lang="+c.lang)
			poll(t, ctx, `location.pathname === "/uploads"`)
			within(t, ctx, 20*time.Second, chromedp.Navigate(base+"/uploads/"+id), chromedp.WaitVisible(chromedp.CSS("#progress")))
			testwait.For(t, 20*time.Second, "the failing notice shows", func() bool { return visible(t, ctx, "#outage-failing") })
			if h := text(t, ctx, "#outage-failing"); h != c.title {
				t.Errorf("the failing notice says %q, want %q", h, c.title)
			}
			axeClean(t, ctx, "the failing notice")
			atPhone(t, ctx, "the failing notice", "failing-"+c.lang+"-phone")

			off := time.Now()
			if err := stack.Sandbox.SetChaos(sandbox.Chaos{}); err != nil {
				t.Fatal(err)
			}
			testwait.For(t, 20*time.Second, "the failing notice leaves", func() bool { return !visible(t, ctx, "#outage") })
			// Every call of the seller failed while the chaos named it, so its
			// first 201 is the first the API accepted after the chaos ended.
			// It may have arrived before off: the sandbox decides after the
			// call's latency, not at its arrival.
			var accepted time.Time
			for _, call := range stack.Sandbox.Calls() {
				if call.Seller == c.seller && call.Status == http.StatusCreated {
					accepted = call.Handled
					break
				}
			}
			if accepted.IsZero() {
				t.Fatal("the sandbox logged no accepted call of the seller after the chaos ended")
			}
			// The notice says failing up to the accepted call, and leaves
			// with the first event after it that says otherwise.
			var left time.Time
			for _, ev := range loggedEvents(t, ctx) {
				if !ev.at().After(accepted) && ev.at().After(off) && ev.Marketplace != "failing" {
					t.Errorf("%v before the first accepted call an event said %q: the notice left before the calls said so", accepted.Sub(ev.at()).Round(time.Millisecond), ev.Marketplace)
				}
				if ev.at().After(accepted) && ev.Marketplace != "failing" {
					left = ev.at()
					break
				}
			}
			lag := left.Sub(accepted)
			t.Logf("the failing notice left %v after the first accepted call (window %v)", lag.Round(time.Millisecond), window)
			if left.IsZero() || lag > window/2 {
				t.Errorf("the failing notice left %v after the first accepted call; want within one read of it, well under the %v window", lag, window)
			}
			time.Sleep(window) // the notice does not come back
			for _, ev := range loggedEvents(t, ctx) {
				if ev.at().After(left) && ev.Marketplace == "failing" {
					t.Errorf("%v after it left, an event said failing again: %s", ev.at().Sub(left).Round(time.Millisecond), ev.What)
				}
			}
			axeClean(t, ctx, "the progress after the failing notice left")
			atPhone(t, ctx, "the progress after the failing notice left", "")
		})
	}

	// Everyone's calls fail: the first notice is the outage's.
	t.Run("outage/ko", func(t *testing.T) {
		within(t, ctx, 20*time.Second, chromedp.Navigate(base+"/uploads"), chromedp.WaitVisible(chromedp.CSS("main h1")))
		if !visible(t, ctx, ".who") { // run alone: not signed in yet
			link, err := stack.SignInLink("seller-ko")
			if err != nil {
				t.Fatal(err)
			}
			openSignInLink(t, ctx, link)
			poll(t, ctx, `location.pathname === "/uploads"`)
		}
		tokA, _ := httpapi.MintToken(stack.Secret, "seller-ko", 5*time.Minute, time.Now())
		tokC, _ := httpapi.MintToken(stack.Secret, "seller-c", 5*time.Minute, time.Now())
		// Seller c's calls are answered; then the marketplace stops
		// answering, and seller-ko's new upload starts calling: its first
		// calls fail while c's answers from before are still in the window.
		other := apiUpload(t, base, tokC, productFileSKUs(t, 60, 0, "OC"))
		testwait.For(t, 20*time.Second, "seller c's first rows register", func() bool {
			_, b := apiGet(t, base+"/v1/uploads/"+other, tokC)
			var st struct{ Registered int }
			return json.Unmarshal(b, &st) == nil && st.Registered >= 10
		})
		outageAt := time.Now()
		stack.Sandbox.SetOutage(sandbox.Outage{All: true})
		id := apiUpload(t, base, tokA, productFileSKUs(t, 30, 0, "OA"))
		within(t, ctx, 20*time.Second, chromedp.Navigate(base+"/uploads/"+id+"?lang=ko"), chromedp.WaitVisible(chromedp.CSS("#progress")))
		testwait.For(t, 20*time.Second, "the outage notice shows", func() bool { return visible(t, ctx, "#outage-not_answering") })
		var first time.Time
		for _, ev := range loggedEvents(t, ctx) {
			if !ev.at().After(outageAt) || ev.Marketplace == "" || ev.Marketplace == "answering" {
				continue
			}
			if first.IsZero() {
				first = ev.at()
				t.Logf("the first notice came %v after the outage began: %s", first.Sub(outageAt).Round(time.Millisecond), ev.Marketplace)
			}
			if ev.Marketplace != "not_answering" {
				t.Errorf("%v into the outage an event said %q: want the outage's notice, never another first", ev.at().Sub(outageAt).Round(time.Millisecond), ev.Marketplace)
			}
		}
		if h := text(t, ctx, "#outage-not_answering"); h != "마켓플레이스가 응답하지 않습니다" {
			t.Errorf("the outage notice says %q", h)
		}
		axeClean(t, ctx, "the outage notice")
		atPhone(t, ctx, "the outage notice", "outage-ko-phone")
		stack.Sandbox.SetOutage(sandbox.Outage{})
		testwait.For(t, 30*time.Second, "the outage notice leaves", func() bool { return !visible(t, ctx, "#outage") })
	})
}

// TestHistoryUpdatesLiveInTheBrowser: the history shows an upload's
// progress as it goes, without a reload, and keeps the seller's focus;
// once every upload on it is done it stops reading. Its figure keeps up
// with the progress page's: not 20 % while that page says 200/500.
func TestHistoryUpdatesLiveInTheBrowser(t *testing.T) {
	// A browser and a stack of its own, and nothing timed closer than
	// seconds: it runs beside another such test (the notices and the
	// outage, which read the circuit's timing, run alone).
	t.Parallel()
	ctx, stack := browserStack(t, devstack.Options{Consumers: 1, Partitions: 2})
	base := stack.ProducerURL
	link, err := stack.SignInLink("seller-h")
	if err != nil {
		t.Fatal(err)
	}
	openSignInLink(t, ctx, link)
	poll(t, ctx, `location.pathname === "/uploads"`)
	tok, _ := httpapi.MintToken(stack.Secret, "seller-h", 5*time.Minute, time.Now())
	for _, c := range []struct{ lang, done string }{{"ko", "모두 등록됨"}, {"en", "all registered"}} {
		t.Run(c.lang, func(t *testing.T) {
			id := apiUpload(t, base, tok, productFileSKUs(t, 40, 0, "H"+strings.ToUpper(c.lang)))
			within(t, ctx, 20*time.Second, chromedp.Navigate(base+"/uploads?lang="+c.lang), chromedp.WaitVisible(chromedp.CSS("table.uploads")))
			row := `document.querySelector('table.uploads tr[data-id="` + id + `"]')`
			eval[bool](t, ctx, `(window.sameDocument = true, `+row+`.querySelector("a").focus(), true)`)
			progress := func() (int, string) {
				v := eval[[]string](t, ctx, `[String(`+row+`.querySelector("progress").value), `+row+`.cells[2].innerText]`)
				return atoi(t, v[0]), v[1]
			}
			var seen []int
			shot := false
			testwait.For(t, 40*time.Second, "the history shows the upload done", func() bool {
				n, state := progress()
				if len(seen) == 0 || seen[len(seen)-1] != n {
					seen = append(seen, n)
				}
				if !shot && n > 0 && n < 40 {
					axeClean(t, ctx, "the history while an upload goes on")
					atPhone(t, ctx, "the history while an upload goes on", "uploads-live-"+c.lang+"-phone")
					shot = true
				}
				return state == c.done
			})
			if len(seen) < 3 || !slices.IsSorted(seen) || seen[len(seen)-1] != 40 {
				t.Errorf("the history showed the registered rows %v: want them growing to 40, in steps", seen)
			}
			if v := eval[[]string](t, ctx, `[String(window.sameDocument), document.activeElement.getAttribute("href")]`); v[0] != "true" || v[1] != "/uploads/"+id {
				t.Errorf("the history updated by reloading or lost the seller's focus: %q", v)
			}
			// Nothing left to follow: it stops reading.
			n := eval[string](t, ctx, `document.querySelector("table.uploads").dataset.received`)
			time.Sleep(time.Second)
			if m := eval[string](t, ctx, `document.querySelector("table.uploads").dataset.received`); m != n {
				t.Errorf("the history read itself again %s → %s times after every upload was done", n, m)
			}
			axeClean(t, ctx, "the history once the upload is done")
			atPhone(t, ctx, "the history once the upload is done", "")
		})
	}
}

// TestSignOutEndsEveryTabsStreamInTheBrowser: signing out in one tab ends
// the progress streams of the others, and the history's reading: the
// service ends a session's streams once the session is gone (a tab without
// BroadcastChannel, and a stream read by a plain HTTP client with the
// session's cookie, end too), and each tab says the seller is signed out.
// No tab's stream goes on after the sign-out.
func TestSignOutEndsEveryTabsStreamInTheBrowser(t *testing.T) {
	// A browser and a stack of its own, and nothing timed closer than
	// seconds: it runs beside another such test (the notices and the
	// outage, which read the circuit's timing, run alone).
	t.Parallel()
	ctx, stack := browserStack(t, devstack.Options{Consumers: 1, Partitions: 2})
	base := stack.ProducerURL
	link, err := stack.SignInLink("seller-s")
	if err != nil {
		t.Fatal(err)
	}
	openSignInLink(t, ctx, link)
	poll(t, ctx, `location.pathname === "/uploads"`)
	tok, _ := httpapi.MintToken(stack.Secret, "seller-s", 5*time.Minute, time.Now())
	id := apiUpload(t, base, tok, productFileSKUs(t, 100, 0, "SO"))

	tab := func(url string, setup func(context.Context)) context.Context {
		t.Helper()
		c, cancel := chromedp.NewContext(ctx)
		t.Cleanup(cancel)
		// The first run opens the tab; it must not carry a timeout.
		if err := chromedp.Do(c, chromedp.Navigate("about:blank")); err != nil {
			t.Fatalf("open a tab: %v", err)
		}
		if setup != nil {
			setup(c)
		}
		within(t, c, 20*time.Second, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("main h1")))
		return c
	}
	progressKO := tab(base+"/uploads/"+id+"?lang=ko", nil)
	progressEN := tab(base+"/uploads/"+id+"?lang=en", nil)
	// A tab that cannot hear the others: only the service can end its stream.
	deaf := tab(base+"/uploads/"+id+"?lang=en", func(c context.Context) {
		onEveryDocument(t, c, `delete window.BroadcastChannel;`)
	})
	history := tab(base+"/uploads?lang=ko", nil)
	for _, c := range []context.Context{progressKO, progressEN, deaf} {
		poll(t, c, `Number(document.getElementById("progress").dataset.received || 0) >= 1`)
	}
	if eval[bool](t, deaf, `"BroadcastChannel" in window`) {
		t.Fatal("the deaf tab has BroadcastChannel")
	}

	// The stream as a plain HTTP client reads it, with the session's cookie.
	var cookies []*network.Cookie
	within(t, ctx, 10*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		r, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{base}})
		cookies = r.Cookies
		return err
	}))
	req, _ := http.NewRequest("GET", base+"/v1/uploads/"+id+"/events", nil)
	for _, k := range cookies {
		req.AddCookie(&http.Cookie{Name: k.Name, Value: k.Value})
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the stream with the session's cookie: %v %v", resp, err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	// Sign out in the first tab.
	within(t, ctx, 20*time.Second, chromedp.Navigate(base+"/upload?lang=ko"), chromedp.WaitVisible(chromedp.CSS(".signout summary")),
		chromedp.Click(chromedp.CSS(".signout summary")), chromedp.WaitVisible(chromedp.CSS("#signout-yes")))
	signedOut := time.Now()
	within(t, ctx, 20*time.Second, chromedp.Click(chromedp.CSS("#signout-yes")))
	poll(t, ctx, `location.pathname === "/signin"`)

	// The service ends the plain client's stream, saying why.
	var said []string
	deadline := time.After(5 * time.Second)
read:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break read
			}
			said = append(said, l)
		case <-deadline:
			t.Fatalf("5 s after the sign-out the stream is still open; it said %q", said)
		}
	}
	ended := time.Since(signedOut)
	if !slices.Contains(said, "event: signedout") {
		t.Errorf("the stream ended without saying the session ended: %q", said)
	}
	t.Logf("the plain client's stream ended %v after the sign-out", ended.Round(time.Millisecond))

	for _, c := range []struct {
		name string
		ctx  context.Context
		lang string
	}{{"the Korean progress tab", progressKO, "ko"}, {"the English progress tab", progressEN, "en"}, {"the tab without BroadcastChannel", deaf, "en"}} {
		poll(t, c.ctx, `document.getElementById("progress").dataset.stream === "ended" && !!document.getElementById("signed-out")`)
		want := map[string]string{"ko": "로그아웃되어", "en": "You are signed out"}[c.lang]
		if s := text(t, c.ctx, "#signed-out"); !strings.Contains(s, want) {
			t.Errorf("%s says %q once signed out elsewhere", c.name, s)
		}
		n := eval[string](t, c.ctx, `document.getElementById("progress").dataset.received`)
		time.Sleep(600 * time.Millisecond)
		if m := eval[string](t, c.ctx, `document.getElementById("progress").dataset.received`); m != n {
			t.Errorf("%s received events %s → %s after the sign-out", c.name, n, m)
		}
		axeClean(t, c.ctx, c.name+" once signed out")
		atPhone(t, c.ctx, c.name+" once signed out", map[bool]string{true: "signedout-progress-ko-phone"}[c.lang == "ko" && c.ctx == progressKO])
	}
	poll(t, history, `!!document.getElementById("signed-out")`)
	axeClean(t, history, "the history once signed out")
	atPhone(t, history, "the history once signed out", "")
	if _, err := strconv.Atoi(eval[string](t, history, `String(document.querySelectorAll("table.uploads tbody tr").length)`)); err != nil {
		t.Error(err)
	}
}
