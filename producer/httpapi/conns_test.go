package httpapi

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkreg/bulkreg/internal/testwait"
)

// guardedServer serves s behind a ConnGuard on a real socket, with the
// production server settings (NewHTTPServer).
func guardedServer(t *testing.T, s *Server, g ConnGuard) (addr string, reg *prometheus.Registry, logs syncWriter) {
	t.Helper()
	reg = prometheus.NewRegistry()
	logs = syncWriter{w: &bytes.Buffer{}, mu: &sync.Mutex{}}
	g.Metrics = NewMetrics(reg)
	g.Logger = slog.New(slog.NewTextHandler(logs, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewHTTPServer("", s.Handler(), time.Minute, time.Minute)
	go hs.Serve(g.Listener(ln))
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String(), reg, logs
}

// syncWriter lets the server's goroutines log into one buffer.
type syncWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (w syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

func (w syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.String()
}

// request sends one request on c and reads its answer.
func request(t *testing.T, c net.Conn, br *bufio.Reader, path, tok string) int {
	t.Helper()
	head := "GET " + path + " HTTP/1.1\r\nHost: x\r\n"
	if tok != "" {
		head += "Authorization: Bearer " + tok + "\r\n"
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, head+"\r\n"); err != nil {
		t.Fatalf("send %s: %v", path, err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("answer to %s: %v", path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// closedByServer waits up to within for the server to close c.
func closedByServer(c net.Conn, br *bufio.Reader, within time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(within))
	_, err := br.ReadByte()
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestAnonymousConnectionsAreClosedSoon: a connection that never
// authenticated is closed after AnonymousIdle, not held for the server's
// 120 s idle timeout; one that sent a valid token keeps the idle timeout.
func TestAnonymousConnectionsAreClosedSoon(t *testing.T) {
	h, _ := limitedServer(t, &Server{})
	addr, _, _ := guardedServer(t, &Server{Uploader: h.up, Auth: Auth{Secret: secret}}, ConnGuard{AnonymousIdle: 300 * time.Millisecond})

	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	// Not a byte sent.
	silent, sbr := dial()
	start := time.Now()
	if !closedByServer(silent, sbr, 5*time.Second) {
		t.Errorf("a connection that sent nothing was still open after 5 s, want closed after 300 ms")
	} else if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a connection that sent nothing was closed after %s, want about 300 ms", took)
	}
	// An answered request without a token, then idle.
	anon, abr := dial()
	if code := request(t, anon, abr, "/v1/uploads", ""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", code)
	}
	start = time.Now()
	if !closedByServer(anon, abr, 5*time.Second) {
		t.Errorf("an idle connection after a 401 was still open after 5 s, want closed after 300 ms")
	} else if took := time.Since(start); took > 2*time.Second {
		t.Errorf("an idle connection after a 401 was closed after %s, want about 300 ms", took)
	}
	// A signed-in client keeps its connection between requests.
	signed, sibr := dial()
	tok := token(t, "seller-a")
	if code := request(t, signed, sibr, "/v1/uploads", tok); code != http.StatusOK {
		t.Fatalf("with a token: %d, want 200", code)
	}
	if closedByServer(signed, sibr, time.Second) {
		t.Fatal("the server closed a signed-in client's idle connection within 1 s")
	}
	if code := request(t, signed, sibr, "/v1/openapi.json", ""); code != http.StatusOK {
		t.Errorf("second request on the signed-in connection: %d, want 200", code)
	}
}

// TestConnectionsPerClientAreCapped: each client address has a cap on its
// connections. Past MaxPerIP, a client address's new connections are closed at once, logged once and counted;
// when one of its connections ends, the next is served.
func TestConnectionsPerClientAreCapped(t *testing.T) {
	h, _ := limitedServer(t, &Server{})
	addr, reg, logs := guardedServer(t, &Server{Uploader: h.up, Auth: Auth{Secret: secret}}, ConnGuard{MaxPerIP: 3})
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// Accept runs on the server's goroutine: wait until it has counted the
	// three, which a fourth then finds closed.
	for i := range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if !closedByServer(c, bufio.NewReader(c), 5*time.Second) {
			t.Fatalf("connection %d over the cap of 3 was not closed within 5 s", 4+i)
		}
	}
	if n := counterSum(t, reg, "bulkreg_producer_http_connections_refused_total"); n != 2 {
		t.Errorf("bulkreg_producer_http_connections_refused_total = %v, want 2", n)
	}
	testwait.For(t, 5*time.Second, "the refusal to be logged", func() bool {
		return strings.Contains(logs.String(), "connection refused")
	})
	if n := strings.Count(logs.String(), "connection refused"); n != 1 || !strings.Contains(logs.String(), "remote_ip=127.0.0.1") {
		t.Errorf("refusals logged %d times, want once naming the address:\n%s", n, logs.String())
	}
	// The held connections are served.
	if code := request(t, held[0], bufio.NewReader(held[0]), "/v1/openapi.json", ""); code != http.StatusOK {
		t.Errorf("a connection within the cap: %d, want 200", code)
	}
	held[1].Close()
	var c net.Conn
	testwait.For(t, 5*time.Second, "a new connection to be served after one ended", func() bool {
		var err error
		if c, err = net.Dial("tcp", addr); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		c.SetDeadline(time.Now().Add(2 * time.Second))
		io.WriteString(c, "GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		c.Close()
		return err == nil && resp.StatusCode == http.StatusOK
	})
}
