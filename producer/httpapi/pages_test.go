package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// TestEndStates: a finished upload ends in one of four states, in words
// that say how many rows need fixing; 10 of 12 failed is not "done". Rows
// registered already with other content count as failed but need no fix,
// so they alone end it neutrally ("other"), never "partly failed".
func TestEndStates(t *testing.T) {
	for _, tc := range []struct {
		name                                      string
		total, registered, already, failed, other int
		state, history, text                      string
	}{
		{"all registered", 12, 10, 2, 0, 0, "ok", "all registered", "Every row is registered (10 registered now, 2 already)."},
		{"10 of 12 failed", 12, 2, 0, 10, 0, "partial", "partly failed", "Partly failed: 10 of 12 rows need fixing; the rest are registered."},
		{"all failed", 12, 0, 0, 12, 0, "failed", "all failed", "All failed: all 12 rows need fixing; none was registered."},
		{"2 registered with other content, the rest registered", 12, 9, 1, 2, 2, "other", "done, some already registered with different content",
			"Done: 2 rows are registered already with different content, nothing to fix in the file (9 registered now, 1 already)."},
		{"every row registered with other content", 3, 0, 0, 3, 3, "other", "done, some already registered with different content",
			"Done: 3 rows are registered already with different content, nothing to fix in the file."},
		{"2 to fix besides 2 with other content", 12, 8, 0, 4, 2, "partial", "partly failed", "Partly failed: 2 of 12 rows need fixing; 2 rows are registered already with different content, the rest are registered."},
		{"1 to fix, 1 with other content, none registered", 2, 0, 0, 2, 1, "partial", "partly failed", "Partly failed: 1 of 2 rows needs fixing; 1 row is registered already with different content."},
		{"1 of 1 failed", 1, 0, 0, 1, 0, "failed", "all failed", "All failed: 1 row needs fixing; it was not registered."},
		{"1 registered", 1, 1, 0, 0, 0, "ok", "all registered", "Every row is registered (1 registered now)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := uploadstatus.Status{Upload: uploadstatus.Upload{State: uploadstatus.Published, Total: tc.total}, Registered: tc.registered, AlreadyRegistered: tc.already, Failed: tc.failed, OtherContent: tc.other}
			if !st.Done() {
				t.Fatalf("%+v is not done", st)
			}
			if got := endState(st); got != tc.state {
				t.Errorf("endState = %q, want %q", got, tc.state)
			}
			if got := stateText(langEN, st); got != tc.history {
				t.Errorf("stateText = %q, want %q", got, tc.history)
			}
			if got := endText(langEN, st); got != tc.text {
				t.Errorf("endText = %q, want %q", got, tc.text)
			}
			if ko := endText(langKO, st); !strings.ContainsAny(ko, "등실") {
				t.Errorf("Korean end text %q", ko)
			}
			if ko := stateText(langKO, st); ko == tc.history || !strings.ContainsAny(ko, "등실완") {
				t.Errorf("Korean state text %q", ko)
			}
		})
	}
}

// TestRegisterAsksWhenRowsWouldBeSkipped: without the page's script,
// Register with a row that has a problem shows what will happen and asks;
// nothing is uploaded until the seller confirms.
func TestRegisterAsksWhenRowsWouldBeSkipped(t *testing.T) {
	e := newSessionEnv(t)
	c, csrf := e.signIn(t, "seller-a")
	noRedirect := *c
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	rows := validRows(3)
	rows[1].Price = "abc"
	data := xlsx(t, "register-asks", rows...)
	post := func(fields map[string]string) (*http.Response, string) {
		ct, body := multipartBody(t, "file", data, fields)
		resp, b := pageDo(t, &noRedirect, "POST", e.srv.URL+"/upload", "en", ct, body)
		return resp, string(b)
	}
	resp, page := post(map[string]string{"csrf_token": csrf})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Register with a bad row, not confirmed: %d → %q, want the question (200)", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, want := range []string{"Register registers 2 rows and skips 1 row with problems.", `<div id="confirm" class="confirm" role="group" aria-labelledby="confirm-title">`,
		"Register 2 rows", `name="confirmed" id="confirmed" value="1"`, "choose the file again and press Register 2 rows"} {
		if !strings.Contains(page, want) {
			t.Errorf("the question lacks %q:\n%.4000s", want, page)
		}
	}
	if page, err := e.up.List(t.Context(), "seller-a", "", 10); err != nil || len(page.Uploads) != 0 {
		t.Errorf("uploads before the seller confirmed: %d %v, want none", len(page.Uploads), err)
	}
	resp, _ = post(map[string]string{"csrf_token": csrf, "confirmed": "1"})
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/uploads/") {
		t.Errorf("Register confirmed: %d → %q, want 303 to the upload", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestSignInLinkAgainWhileSignedIn: the seller opening a spent link again,
// or /signin, with a valid session lands on the history, not on a 401
// "please sign in"; without a session it is still refused.
func TestSignInLinkAgainWhileSignedIn(t *testing.T) {
	e := newSessionEnv(t)
	link, err := Minter{Secret: secret}.Link(e.srv.URL, "seller-a", 5*time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	signInWith(t, c, link)
	for _, u := range []string{link, e.srv.URL + "/signin", e.srv.URL + "/signin?token=garbage"} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/uploads" {
			t.Errorf("signed in, GET %s: %d at %s, want the history", u, resp.StatusCode, resp.Request.URL.Path)
		}
	}
	resp, err := (&http.Client{}).Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the spent link without a session: %d, want 401", resp.StatusCode)
	}
}

// market is a marketplace whose circuit is in a set state.
type market struct {
	st circuit.Status
	sc circuit.SellerCalls // the signed-in seller's calls in the window
}

func (m *market) Peek(context.Context) (circuit.Status, error) { return m.st, nil }

func (m *market) Seller(context.Context, string) (circuit.SellerCalls, error) { return m.sc, nil }

// TestProgressPageShowsTheMarketplace: the progress page itself (before any
// event) shows the outage or the pause with what it means, and no finish
// time; with the marketplace answering, neither.
func TestProgressPageShowsTheMarketplace(t *testing.T) {
	e := newSessionEnv(t)
	m := &market{}
	e.up.Marketplace = m
	c, _ := e.signIn(t, "seller-a")
	ct, body := multipartBody(t, "file", xlsx(t, "market", validRows(3)...), nil)
	resp, raw := e.do(t, "POST", "/v1/uploads", token(t, "seller-a"), ct, body)
	var up UploadResponse
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(raw, &up) != nil {
		t.Fatalf("upload: %d %s", resp.StatusCode, raw)
	}
	page := func(lang string) string {
		_, b := pageDo(t, c, "GET", e.srv.URL+"/uploads/"+up.UploadID+"?lang="+lang, "", "", nil)
		return string(b)
	}
	for _, tc := range []struct {
		name     string
		st       circuit.Status
		sc       circuit.SellerCalls
		lang     string
		want     []string
		dontWant []string
	}{
		{"answering", circuit.Status{State: circuit.Closed}, circuit.SellerCalls{Failures: 2, Answered: 9}, "en", []string{`<div id="outage" class="notice" role="status" data-marketplace="" hidden>`},
			[]string{`aria-live="polite">The finish time is unknown until`}},
		{"not answering", circuit.Status{State: circuit.Open}, circuit.SellerCalls{}, "en", []string{`data-marketplace="not_answering">`, "The marketplace is not answering", "No row is lost",
			"The finish time is unknown until the marketplace answers again."}, []string{`data-eta="2`}},
		{"not answering, Korean", circuit.Status{State: circuit.Open}, circuit.SellerCalls{}, "ko", []string{"마켓플레이스가 응답하지 않습니다", "잃어버린 행은 없고", "완료 시각을 알 수 없습니다"}, nil},
		// One seller failing never opens the fleet's circuit:
		// its page still says the marketplace is failing its rows, and
		// what becomes of them (retried, then set aside, not held).
		{"this seller's calls failing", circuit.Status{State: circuit.Closed}, circuit.SellerCalls{Failures: 6, Answered: 1, Streak: 6}, "en",
			[]string{`data-marketplace="failing">`, "The marketplace is failing your registrations", "set aside for an operator", "No row is lost",
				"The finish time is unknown until the marketplace takes your rows again."}, []string{`data-eta="2`}},
		{"this seller's calls failing, Korean", circuit.Status{State: circuit.Closed}, circuit.SellerCalls{Failures: 6, Streak: 6}, "ko",
			[]string{"이 판매자의 등록을 받지 못하고 있습니다", "운영자가 다시 보내도록", "잃어버리는 행은 없습니다", "완료 시각을 알 수 없습니다"}, nil},
		{"paused", circuit.Status{State: circuit.Open, Reason: circuit.Misconfigured}, circuit.SellerCalls{}, "en", []string{`data-marketplace="misconfigured">`, "Registration is paused",
			"The finish time is unknown until registering resumes."}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m.st, m.sc = tc.st, tc.sc
			p := page(tc.lang)
			for _, w := range tc.want {
				if !strings.Contains(p, w) {
					t.Errorf("the page lacks %q", w)
				}
			}
			for _, w := range tc.dontWant {
				if strings.Contains(p, w) {
					t.Errorf("the page has %q", w)
				}
			}
		})
	}
}

// TestAReportLinkOfAnUnknownUploadIsAPage: a report link followed in the
// browser for an upload that is gone (expired, or mistyped) answers the
// not-found page with its way back, in the seller's language; a client
// asking for JSON still gets the problem.
func TestAReportLinkOfAnUnknownUploadIsAPage(t *testing.T) {
	e := newSessionEnv(t)
	c, _ := e.signIn(t, "seller-a")
	get := func(accept string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", e.srv.URL+"/v1/uploads/0000000000000000/report.xlsx", nil)
		req.Header.Set("Accept", accept)
		req.Header.Set("Accept-Language", "ko")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, page := get("text/html,application/xhtml+xml,*/*;q=0.8")
	if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(page, "찾을 수 없습니다") || !strings.Contains(page, `href="/uploads"`) {
		t.Errorf("followed in the browser: %d %s, want the not-found page with a way back:\n%.800s", resp.StatusCode, resp.Header.Get("Content-Type"), page)
	}
	if resp, body := get("application/json"); resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("asked for JSON: %d %s %.200s, want the problem", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}
