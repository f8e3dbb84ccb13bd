package httpapi

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/producer/upload"
)

// smallSendBuffers gives every accepted connection a small socket send
// buffer, so an answer larger than the buffers blocks the handler until the
// client reads it, as it does on a real network with a slow client.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}

// bigCells makes every cell of an upload 30,000 random characters (a long
// description is allowed up to 10,000 characters; the report keeps what it
// is given), so a report is hundreds of KB that do not compress.
type bigCells struct{ upload.Statuses }

func (b bigCells) Cells(ctx context.Context, id string) (map[int][]string, error) {
	m, err := b.Statuses.Cells(ctx, id)
	for _, cells := range m {
		for i := range cells {
			buf := make([]byte, 22500)
			rand.Read(buf)
			cells[i] = base64.StdEncoding.EncodeToString(buf) // 30,000 characters
		}
	}
	return m, err
}

// slotServer is limitedServer with small send buffers and reports of
// hundreds of KB, and an upload of two rows for each of sellers a and b.
func slotServer(t *testing.T, s *Server) (h *httpEnv, ids map[string]string, reg *prometheus.Registry) {
	t.Helper()
	e := newEnv(t, nil, upload.WriterOptions{})
	reg = prometheus.NewRegistry()
	s.Uploader, s.Auth, s.Metrics = e.up, Auth{Secret: secret}, NewMetrics(reg)
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	h = &httpEnv{env: e, srv: srv}
	ids = map[string]string{}
	for _, seller := range []string{"seller-a", "seller-b"} {
		ct, body := multipartBody(t, "file", xlsx(t, seller, validRows(2)...), nil)
		resp, b := h.do(t, "POST", "/v1/uploads", token(t, seller), ct, body)
		var up UploadResponse
		if err := json.Unmarshal(b, &up); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("upload of %s: %d %s", seller, resp.StatusCode, b)
		}
		ids[seller] = up.UploadID
	}
	e.up.Statuses = bigCells{e.up.Statuses}
	return h, ids, reg
}

// stalledDownload asks for a report over a connection with a small receive
// buffer, reads the answer's status line and headers, and never reads the
// body. It returns the status and the connection.
func stalledDownload(t *testing.T, srvURL, path, tok string) (int, net.Conn) {
	t.Helper()
	u, _ := url.Parse(srvURL)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+tok+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 4<<10), nil)
	if err != nil {
		t.Fatalf("stalled download of %s: no answer: %v", path, err)
	}
	return resp.StatusCode, c
}

// TestReportSlotsArePerSeller: a seller holds at most MaxReportsPerSeller
// report slots, so its report downloads that are never read cannot hold
// every slot and leave every other seller's report answered 503 for minutes;
// its next is its own 429, and another seller's report is served at once.
func TestReportSlotsArePerSeller(t *testing.T) {
	h, ids, _ := slotServer(t, &Server{MaxReports: 2, MaxReportsPerSeller: 1, DownloadGrace: time.Minute})
	tokA, tokB := token(t, "seller-a"), token(t, "seller-b")
	pathA := "/v1/uploads/" + ids["seller-a"] + "/report.xlsx"
	if code, _ := stalledDownload(t, h.srv.URL, pathA, tokA); code != http.StatusOK {
		t.Fatalf("A's first stalled download: %d, want 200", code)
	}
	if code, _ := stalledDownload(t, h.srv.URL, pathA, tokA); code != http.StatusTooManyRequests {
		t.Errorf("A's second download while the first is unread: %d, want 429 (one report per seller at once)", code)
	}
	start := time.Now()
	resp, b := h.do(t, "GET", "/v1/uploads/"+ids["seller-b"]+"/report.xlsx", tokB, "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("B's report while A's downloads are unread: %d %.300s, want 200", resp.StatusCode, b)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("B's report took %s, want well under 3 s", took)
	}
	// The report must outgrow the socket buffers, or the stalled download
	// above held nothing and the test proves nothing.
	if len(b) < 300<<10 {
		t.Fatalf("report of %d bytes: too small to fill the buffers of a stalled download", len(b))
	}
}

// A client that does not read its report is cut off once it falls below
// MinDownloadRate after DownloadGrace: its slot comes back by itself, the
// log and a metric say so.
func TestSlowReportReaderIsCutOff(t *testing.T) {
	h, ids, reg := slotServer(t, &Server{MaxReports: 1, MaxReportsPerSeller: 1, MinDownloadRate: 64 << 10, DownloadGrace: 300 * time.Millisecond})
	tokA := token(t, "seller-a")
	pathA := "/v1/uploads/" + ids["seller-a"] + "/report.xlsx"
	start := time.Now()
	code, c := stalledDownload(t, h.srv.URL, pathA, tokA)
	if code != http.StatusOK {
		t.Fatalf("stalled download: %d, want 200", code)
	}
	// The buffers hold some 100 KB: the rate allows them, then the next
	// chunk's deadline passes.
	var resp *http.Response
	testwait.For(t, 15*time.Second, "the stalled download's slot to come back", func() bool {
		resp, _ = h.do(t, "GET", pathA, tokA, "", nil)
		return resp.StatusCode == http.StatusOK
	})
	t.Logf("slot back after %s", time.Since(start).Round(time.Millisecond))
	if n := counterSum(t, reg, "bulkreg_producer_http_slow_readers_total"); n != 1 {
		t.Errorf("bulkreg_producer_http_slow_readers_total = %v, want 1", n)
	}
	// The server closed the stalled connection: after what the buffers
	// held, the read ends.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Errorf("the stalled connection was not closed by the server: %v", err)
	}
}

// counterSum adds up every series of the counter name in reg.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
