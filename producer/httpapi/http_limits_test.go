package httpapi

import (
	"github.com/bulkreg/bulkreg/producer/upload"

	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// trickler is an upload whose body arrives a byte at a time, the way a
// slow (or hostile) client sends it.
type trickler struct {
	conn   net.Conn
	status chan int // the answer's status, 0 when the connection ended without one
	stop   chan struct{}
}

func startTrickle(t *testing.T, srvURL, tok string, every time.Duration) *trickler {
	t.Helper()
	return startTrickleAs(t, srvURL, tok, "multipart/form-data; boundary=XX", every)
}

// startTrickleAs is startTrickle with the given Content-Type. The body it
// announces is under 256 KiB: net/http would read that much of an unread
// body before answering (TestARefusalBeforeTheBodyIsAnsweredAtOnce).
func startTrickleAs(t *testing.T, srvURL, tok, contentType string, every time.Duration) *trickler {
	t.Helper()
	u, _ := url.Parse(srvURL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	tr := &trickler{conn: conn, status: make(chan int, 1), stop: make(chan struct{})}
	t.Cleanup(func() { close(tr.stop); conn.Close() })
	head := "POST /v1/uploads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok +
		"\r\nContent-Type: " + contentType + "\r\nContent-Length: 100000\r\n\r\n" +
		"--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"slow.xlsx\"\r\n\r\nPK"
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tr.stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte{'x'}); err != nil {
					return
				}
			}
		}
	}()
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			tr.status <- 0
			return
		}
		resp.Body.Close()
		tr.status <- resp.StatusCode
	}()
	return tr
}

func limitedServer(t *testing.T, s *Server) (*httpEnv, *Server) {
	t.Helper()
	e := newEnv(t, nil, upload.WriterOptions{})
	s.Uploader, s.Auth = e.up, Auth{Secret: secret}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &httpEnv{env: e, srv: srv}, s
}

// Two slow bodies of seller A hold A's upload slots only: A's next upload
// is told to wait (429) at once, and seller B's upload goes through without
// delay, although the service handles only three uploads at once.
func TestSlowSellerDoesNotDelayOthers(t *testing.T) {
	h, _ := limitedServer(t, &Server{MaxUploads: 3, MaxUploadsPerSeller: 2, UploadGrace: time.Minute})
	tokA := token(t, "seller-a")
	trickles := []*trickler{startTrickle(t, h.srv.URL, tokA, 100*time.Millisecond), startTrickle(t, h.srv.URL, tokA, 100*time.Millisecond)}

	// A third upload of A's is refused at once, before its body is read.
	deadline := time.Now().Add(5 * time.Second)
	for probe := 0; ; probe++ {
		// A trickle that reached the server while a probe held one of A's
		// two slots was refused (429): it holds none, so start it again.
		// Probes go one at a time, so a probe is refused only once both
		// trickles in the list hold their slots.
		for i, tr := range trickles {
			select {
			case c := <-tr.status:
				t.Logf("trickle %d was answered %d before it held a slot; starting it again", i, c)
				trickles[i] = startTrickle(t, h.srv.URL, tokA, 100*time.Millisecond)
			default:
			}
		}
		// Each probe is a new file: once one went through, the same file
		// again is a duplicate, answered 200 before any slot is asked for.
		ct, body := multipartBody(t, "file", xlsx(t, "a3-"+strconv.Itoa(probe), validRows(1)...), nil)
		resp, b := h.do(t, "POST", "/v1/uploads", tokA, ct, body)
		if resp.StatusCode == http.StatusTooManyRequests {
			if errorCode(t, b) != "too_many_uploads" || resp.Header.Get("Retry-After") == "" {
				t.Errorf("A's third upload: %d %s, want too_many_uploads with Retry-After", resp.StatusCode, b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's third upload: %d %s while two of A's uploads trickle, want 429", resp.StatusCode, b)
		}
		time.Sleep(20 * time.Millisecond)
	}

	start := time.Now()
	ct, body := multipartBody(t, "file", xlsx(t, "b", validRows(3)...), nil)
	resp, b := h.do(t, "POST", "/v1/uploads", token(t, "seller-b"), ct, body)
	took := time.Since(start)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("seller B's upload while A trickles: %d %s, want 201", resp.StatusCode, b)
	}
	if took > 3*time.Second {
		t.Errorf("seller B's upload took %s while A trickles, want well under 3 s", took)
	}
	for _, tr := range trickles {
		select {
		case c := <-tr.status:
			t.Errorf("a trickling upload was answered %d before it finished sending", c)
		default:
		}
	}
}

// A refusal sent before the request's body is read (no token, the wrong
// content type, the seller's uploads all in progress) reaches a client that
// is still sending its body: net/http would otherwise read up to 256 KiB of
// the unread body before it sends the answer, and a slow client would wait
// for its refusal as long as its body took (TestSlowSellerDoesNotDelayOthers
// would hang on it under load).
func TestARefusalBeforeTheBodyIsAnsweredAtOnce(t *testing.T) {
	h, _ := limitedServer(t, &Server{MaxUploads: 3, MaxUploadsPerSeller: 1, UploadGrace: time.Minute})
	tok := token(t, "seller-a")
	const multipart = "multipart/form-data; boundary=XX"
	for _, tc := range []struct {
		name        string
		tokens      []string // one trickle each, at once
		contentType string
		want        int
	}{
		{"no token", []string{""}, multipart, http.StatusUnauthorized},
		{"wrong content type", []string{tok}, "text/plain", http.StatusUnsupportedMediaType},
		// Two uploads of a seller with one slot: one holds it, the other
		// is refused; which one is a race.
		{"too many uploads", []string{tok, tok}, multipart, http.StatusTooManyRequests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var trickles []*trickler
			for _, tk := range tc.tokens {
				trickles = append(trickles, startTrickleAs(t, h.srv.URL, tk, tc.contentType, 100*time.Millisecond))
			}
			answered := make(chan int, len(trickles))
			for _, tr := range trickles {
				go func() {
					select {
					case c := <-tr.status:
						answered <- c
					case <-tr.stop:
					}
				}()
			}
			select {
			case c := <-answered:
				if c != tc.want {
					t.Errorf("answered %d, want %d", c, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no answer within 5 s while the body still trickles, want %d at once", tc.want)
			}
		})
	}
}

// A body that arrives slower than the minimum rate is cut off after the
// grace period (408), and its slot is free again at once.
func TestSlowBodyIsCutOffByRate(t *testing.T) {
	h, s := limitedServer(t, &Server{MaxUploads: 1, MaxUploadsPerSeller: 1, MinUploadRate: 4 << 10, UploadGrace: 300 * time.Millisecond})
	tok := token(t, "seller-a")
	start := time.Now()
	tr := startTrickle(t, h.srv.URL, tok, 20*time.Millisecond)
	select {
	case c := <-tr.status:
		if took := time.Since(start); c != http.StatusRequestTimeout || took > 3*time.Second {
			t.Errorf("trickling upload answered %d after %s, want 408 within about %s", c, took.Round(time.Millisecond), s.UploadGrace)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a body trickling at 50 bytes/s was not cut off within 10 s (minimum rate 4 KiB/s after 300 ms)")
	}
	ct, body := multipartBody(t, "file", xlsx(t, "after", validRows(2)...), nil)
	if resp, b := h.do(t, "POST", "/v1/uploads", tok, ct, body); resp.StatusCode != http.StatusCreated {
		t.Errorf("upload after the slow one was cut off: %d %s, want 201", resp.StatusCode, b)
	}
}

// blockingCells holds every read of an upload's cells until released.
type blockingCells struct {
	upload.Statuses
	entered chan struct{}
	release chan struct{}
}

func (b *blockingCells) Cells(ctx context.Context, id string) (map[int][]string, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.Statuses.Cells(ctx, id)
}

// Report builds are bounded: past MaxReports at once the answer is 503.
func TestReportsAtOnceAreCapped(t *testing.T) {
	h, _ := limitedServer(t, &Server{MaxReports: 1})
	tok := token(t, "seller-a")
	ct, body := multipartBody(t, "file", xlsx(t, "rep", validRows(2)...), nil)
	resp, b := h.do(t, "POST", "/v1/uploads", tok, ct, body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	id := strings.Split(strings.Split(string(b), `"upload_id": "`)[1], `"`)[0]
	bc := &blockingCells{Statuses: h.up.Statuses, entered: make(chan struct{}, 1), release: make(chan struct{})}
	h.up.Statuses = bc
	first := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("GET", h.srv.URL+"/v1/uploads/"+id+"/report.xlsx", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-bc.entered
	resp, b = h.do(t, "GET", "/v1/uploads/"+id+"/report.xlsx", tok, "", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || errorCode(t, b) != "busy" {
		t.Errorf("second report at once: %d %s, want 503 busy", resp.StatusCode, b)
	}
	close(bc.release)
	if c := <-first; c != http.StatusOK {
		t.Errorf("first report: %d, want 200", c)
	}
}

// What sellers read holds no addresses or dial errors: /healthz says ok or
// unavailable, a failed publish says what to do, the upload's state reason
// too. The details go to the log.
func TestSellersSeeNoInternals(t *testing.T) {
	h := newHTTPEnv(t)
	hs := httptest.NewServer(AdminHandler(prometheus.NewRegistry(), func(context.Context) error {
		return fmt.Errorf("dial tcp 10.1.2.3:6379: %w", errors.New("connect: connection refused"))
	}, nil))
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || body.String() != "unavailable\n" {
		t.Errorf("healthz with Redis down: %d %q, want 503 \"unavailable\"", resp.StatusCode, body.String())
	}

	dead, err := upload.NewWriter(upload.WriterOptions{Brokers: []string{"127.0.0.1:1"}, Topic: topic, MaxAttempts: 1, WriteTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	h.up.Writer = dead
	h.up.PublishTimeout = 2 * time.Second
	ct, b := multipartBody(t, "file", xlsx(t, "leak", validRows(2)...), nil)
	r, out := h.do(t, "POST", "/v1/uploads", token(t, "a"), ct, b)
	if r.StatusCode != http.StatusServiceUnavailable || strings.Contains(string(out), "127.0.0.1") || strings.Contains(string(out), "dial") {
		t.Errorf("failed publish answered %d %s, want 503 without the broker's address", r.StatusCode, out)
	}
	id := strings.Split(strings.Split(string(out), `"upload_id": "`)[1], `"`)[0]
	_, st := h.do(t, "GET", "/v1/uploads/"+id, token(t, "a"), "", nil)
	if !strings.Contains(string(st), "publish_failed") || strings.Contains(string(st), "127.0.0.1") || strings.Contains(string(st), "dial") {
		t.Errorf("status of the failed upload: %s, want publish_failed without the broker's address", st)
	}
}
