package registryclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testwait"
)

// countedServer starts h and counts the connections it accepts.
func countedServer(t testing.TB, h http.Handler, https bool, config func(*http.Server)) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	opened := new(atomic.Int64)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	if config != nil {
		config(srv.Config)
	}
	if https {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, opened
}

// created is the API's answer to a registration.
func created(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"product_id":"p1","seller_sku":"SKU-1"}`) // the contract's answer (design.md)
}

func syncTransportOf(t testing.TB, c *Client) *syncTransport {
	t.Helper()
	st, ok := c.http.Transport.(*syncTransport)
	if !ok {
		t.Fatalf("the client uses a %T, want the synchronous transport", c.http.Transport)
	}
	return st
}

// pool answers how many connections the transport has open and idle.
func (t *syncTransport) pool() (open, idle int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.open, len(t.idle)
}

func mustNew(t testing.TB, o Options) *Client {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestSyncTransportReusesOneConnection(t *testing.T) {
	srv, opened := countedServer(t, http.HandlerFunc(created), false, nil)
	c := mustNew(t, Options{BaseURL: srv.URL})
	st := syncTransportOf(t, c)
	for i := range 5 {
		if res := c.Register(context.Background(), "s", fmt.Sprint("k", i), product); res.Class != Registered {
			t.Fatalf("call %d: %v %v", i, res.Class, res.Err)
		}
	}
	if n := opened.Load(); n != 1 {
		t.Errorf("5 calls one after the other opened %d connections, want 1", n)
	}
	if open, idle := st.pool(); open != 1 || idle != 1 {
		t.Errorf("pool: %d open, %d idle, want 1 and 1", open, idle)
	}
}

// A server or proxy that closes an idle connection must not cost a call:
// the peek before reuse sees the close and the call dials instead.
func TestSyncTransportServerClosesIdleConnections(t *testing.T) {
	// keepAliveThenClose answers like a keep-alive server, then closes the
	// connection without saying so, as a proxy with a short idle timeout.
	keepAliveThenClose := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		nc, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 19\r\n\r\n{\"product_id\":\"p1\"}")
		_ = buf.Flush()
		nc.Close()
	})
	var n atomic.Int64
	closeEveryOther := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 1 {
			w.Header().Set("Connection", "close")
		}
		created(w, r)
	})
	tests := []struct {
		name    string
		handler http.Handler
		config  func(*http.Server)
		pause   time.Duration
		calls   int
		opened  int64
	}{
		{name: "Connection: close on every other answer", handler: closeEveryOther, calls: 6, opened: 4},
		{name: "server idle timeout 50ms, calls 200ms apart", handler: http.HandlerFunc(created),
			config: func(s *http.Server) { s.IdleTimeout = 50 * time.Millisecond }, pause: 200 * time.Millisecond, calls: 4, opened: 4},
		{name: "closed after a keep-alive answer", handler: keepAliveThenClose, pause: 50 * time.Millisecond, calls: 3, opened: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, opened := countedServer(t, tt.handler, false, tt.config)
			c := mustNew(t, Options{BaseURL: srv.URL, Timeout: 2 * time.Second})
			syncTransportOf(t, c)
			for i := range tt.calls {
				if i > 0 {
					time.Sleep(tt.pause)
				}
				if res := c.Register(context.Background(), "s", fmt.Sprint("k", i), product); res.Class != Registered {
					t.Fatalf("call %d: %v %v", i, res.Class, res.Err)
				}
			}
			if got := opened.Load(); got != tt.opened {
				t.Errorf("%d connections opened, want %d", got, tt.opened)
			}
		})
	}
}

func TestSyncTransportClosesConnectionsIdleTooLong(t *testing.T) {
	srv, opened := countedServer(t, http.HandlerFunc(created), false, nil)
	c := mustNew(t, Options{BaseURL: srv.URL})
	st := syncTransportOf(t, c)
	st.idleTimeout = 50 * time.Millisecond
	for i := range 2 {
		if res := c.Register(context.Background(), "s", "k", product); res.Class != Registered {
			t.Fatalf("call %d: %v %v", i, res.Class, res.Err)
		}
		idleSince := time.Now()
		testwait.For(t, 2*time.Second, "the idle connection closed at the idle timeout", func() bool {
			open, idle := st.pool()
			return open == 0 && idle == 0
		})
		if waited := time.Since(idleSince); waited < st.idleTimeout {
			t.Errorf("the idle connection closed after %v, before the idle timeout %v", waited, st.idleTimeout)
		}
	}
	if n := opened.Load(); n != 2 {
		t.Errorf("%d connections opened, want 2: one idle past the timeout is not reused", n)
	}
}

func TestSyncTransportMaxConnsPerHost(t *testing.T) {
	t.Run("20 calls at once over 3 connections", func(t *testing.T) {
		srv, opened := countedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(20 * time.Millisecond)
			created(w, r)
		}), false, nil)
		c := mustNew(t, Options{BaseURL: srv.URL, MaxConnsPerHost: 3})
		st := syncTransportOf(t, c)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				if res := c.Register(context.Background(), "s", fmt.Sprint("k", i), product); res.Class != Registered {
					t.Errorf("call %d: %v %v", i, res.Class, res.Err)
				}
			})
		}
		wg.Wait()
		if n := opened.Load(); n > 3 || n < 1 {
			t.Errorf("%d connections opened, want at most 3", n)
		}
		if open, idle := st.pool(); open != idle || open > 3 {
			t.Errorf("pool after the calls: %d open, %d idle", open, idle)
		}
	})
	t.Run("a waiting call whose context ends", func(t *testing.T) {
		started, release := make(chan struct{}, 1), make(chan struct{})
		srv, opened := countedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/sellers/slow/") {
				started <- struct{}{}
				<-release
			}
			created(w, r)
		}), false, nil)
		c := mustNew(t, Options{BaseURL: srv.URL, MaxConnsPerHost: 1})
		st := syncTransportOf(t, c)
		var first Result
		done := make(chan struct{})
		go func() {
			defer close(done)
			first = c.Register(context.Background(), "slow", "k0", product)
		}()
		<-started

		timed, cancelTimed := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancelTimed()
		cancelled, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		for _, w := range []struct {
			ctx    context.Context
			errHas string
		}{
			{timed, "the caller's deadline passed"},
			{cancelled, "cancelled"},
		} {
			start := time.Now()
			res := c.Register(w.ctx, "s", "k1", product)
			if res.Class != Transient || res.Err == nil || !strings.Contains(res.Err.Error(), w.errHas) {
				t.Errorf("waiting call: %v %v, want transient, %q", res.Class, res.Err, w.errHas)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("a waiting call whose context ended after 100ms returned after %v", d)
			}
		}
		close(release)
		<-done
		if first.Class != Registered {
			t.Fatalf("the call holding the connection: %v %v", first.Class, first.Err)
		}
		// The callers that gave up left no slot taken nor waiter behind.
		if res := c.Register(context.Background(), "s", "k2", product); res.Class != Registered {
			t.Fatalf("the next call: %v %v", res.Class, res.Err)
		}
		if n := opened.Load(); n != 1 {
			t.Errorf("%d connections opened, want 1", n)
		}
		st.mu.Lock()
		waiters := len(st.waiters)
		st.mu.Unlock()
		if open, idle := st.pool(); open != 1 || idle != 1 || waiters != 0 {
			t.Errorf("pool: %d open, %d idle, %d waiters, want 1, 1, 0", open, idle, waiters)
		}
	})
}

// A call whose context ends while the API holds the answer returns at once
// with today's class and words, and its connection is not reused.
func TestSyncTransportContextEndsMidCall(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		ctx     func() (context.Context, context.CancelFunc)
		errHas  string
	}{
		{name: "call timeout", timeout: 100 * time.Millisecond, ctx: func() (context.Context, context.CancelFunc) { return context.Background(), func() {} },
			errHas: "no answer from the registration API within 100ms"},
		{name: "caller's deadline", timeout: 10 * time.Second, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, errHas: "the caller's deadline passed before the registration API answered"},
		{name: "cancelled", timeout: 10 * time.Second, ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			return ctx, cancel
		}, errHas: "the call was cancelled before the registration API answered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, opened := countedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.Contains(r.URL.Path, "/sellers/slow/") {
					// Read to the end, so that the server watches the
					// connection and ends r's context when it closes.
					_, _ = io.Copy(io.Discard, r.Body)
					select {
					case <-r.Context().Done():
					case <-time.After(5 * time.Second):
					}
					return
				}
				created(w, r)
			}), false, nil)
			errs := map[string]string{}
			for _, which := range []string{"nethttp", "sync"} {
				o := Options{BaseURL: srv.URL, Timeout: tt.timeout}
				if which == "nethttp" {
					o.HTTPClient = &http.Client{Transport: netHTTPTransport(64, nil)}
				}
				c := mustNew(t, o)
				before := opened.Load()
				if res := c.Register(context.Background(), "s", "k0", product); res.Class != Registered {
					t.Fatalf("%s: warm-up call: %v %v", which, res.Class, res.Err)
				}
				ctx, cancel := tt.ctx()
				start := time.Now()
				res := c.Register(ctx, "slow", "k1", product)
				cancel()
				if d := time.Since(start); d > time.Second {
					t.Errorf("%s: returned after %v, want about 100ms", which, d)
				}
				if res.Class != Transient || res.Status != 0 || res.Err == nil || !strings.Contains(res.Err.Error(), tt.errHas) {
					t.Fatalf("%s: %v %d %v, want transient, %q", which, res.Class, res.Status, res.Err, tt.errHas)
				}
				errs[which] = res.Err.Error()
				if which != "sync" {
					continue
				}
				if open, idle := syncTransportOf(t, c).pool(); open != 0 || idle != 0 {
					t.Errorf("after the call: %d open, %d idle, want the connection closed", open, idle)
				}
				if res := c.Register(context.Background(), "s", "k2", product); res.Class != Registered {
					t.Fatalf("the next call: %v %v", res.Class, res.Err)
				}
				if n := opened.Load() - before; n != 2 {
					t.Errorf("%d connections opened, want 2: the one of the call that ended is not reused", n)
				}
			}
			if errs["sync"] != errs["nethttp"] {
				t.Errorf("error\n%s\nwant, as with net/http,\n%s", errs["sync"], errs["nethttp"])
			}
		})
	}
}

func TestSyncTransportAnswerShapes(t *testing.T) {
	long := `{"product_id":"p1","pad":"` + strings.Repeat("x", 70<<10) + `"}`
	tests := []struct {
		name   string
		answer http.HandlerFunc
		class  Class
		reused bool
	}{
		{name: "longer than 64 KB", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, long)
		}, class: Transient, reused: false},
		{name: "chunked", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"product_id":`)
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, `"p1"}`)
		}, class: Registered, reused: true},
		{name: "Connection: close", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"product_id":"p1","seller_sku":"SKU-1"}`) // the contract's answer (design.md)
		}, class: Registered, reused: false},
		{name: "no body", answer: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }, class: Transient, reused: true},
		{name: "103 Early Hints first", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Link", "</x>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"product_id":"p1","seller_sku":"SKU-1"}`) // the contract's answer (design.md)
		}, class: Registered, reused: true},
		{name: "503 with a body", answer: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"later"}}`)
		}, class: Transient, reused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, opened := countedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if strings.Contains(r.URL.Path, "/sellers/shape/") {
					tt.answer(w, r)
					return
				}
				created(w, r)
			}), false, nil)
			c := mustNew(t, Options{BaseURL: srv.URL})
			st := syncTransportOf(t, c)
			if res := c.Register(context.Background(), "shape", "k", product); res.Class != tt.class {
				t.Fatalf("%v %v, want %v", res.Class, res.Err, tt.class)
			}
			// Decided when the call ends, not left to the peek of the next.
			if open, idle := st.pool(); tt.reused != (open == 1 && idle == 1) || open != idle {
				t.Errorf("after the call: %d open, %d idle (reused: %v)", open, idle, tt.reused)
			}
			if res := c.Register(context.Background(), "s", "k", product); res.Class != Registered {
				t.Fatalf("the next call: %v %v", res.Class, res.Err)
			}
			want := int64(2)
			if tt.reused {
				want = 1
			}
			if n := opened.Load(); n != want {
				t.Errorf("%d connections for two calls, want %d (reused: %v)", n, want, tt.reused)
			}
		})
	}
}

// The Body gives no byte past the answer, and the connection goes back to
// the pool only when the answer was read to its end.
func TestSyncTransportBody(t *testing.T) {
	srv, _ := countedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/trailing":
			// Bytes after the answer: not part of it, nor an answer to the
			// next request.
			nc, buf, _ := w.(http.Hijacker).Hijack()
			defer nc.Close()
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra")
			_ = buf.Flush()
		default:
			_, _ = io.WriteString(w, "hello")
		}
	}), false, nil)
	c := mustNew(t, Options{BaseURL: srv.URL})
	st := syncTransportOf(t, c)
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := c.http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	pool := func(step string, open, idle int) {
		t.Helper()
		if o, i := st.pool(); o != open || i != idle {
			t.Errorf("%s: %d open, %d idle, want %d, %d", step, o, i, open, idle)
		}
	}

	resp := get("/")
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "hello" {
		t.Fatalf("body %q, %v", b, err)
	}
	pool("read to the end, not closed yet", 1, 1)
	if n, err := resp.Body.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Errorf("read after the end: %d, %v, want io.EOF", n, err)
	}
	resp.Body.Close()
	pool("closed after the end", 1, 1)

	resp = get("/")
	if _, err := resp.Body.Read(make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	pool("closed before the end", 0, 0)
	if _, err := resp.Body.Read(make([]byte, 2)); !errors.Is(err, http.ErrBodyReadAfterClose) {
		t.Errorf("read after Close: %v", err)
	}

	resp = get("/trailing")
	b, err = io.ReadAll(resp.Body)
	if err != nil || string(b) != "hello" {
		t.Fatalf("body %q, %v, want hello and no more", b, err)
	}
	resp.Body.Close()
	pool("bytes past the answer", 0, 0)

	if _, err := c.http.Get("http://registry.example.com/"); err == nil || !strings.Contains(err.Error(), "only talks to") {
		t.Errorf("a request to another host: %v", err)
	}
	pool("another host", 0, 0)
}

func TestSyncTransportHTTPS(t *testing.T) {
	srv, opened := countedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || r.TLS.NegotiatedProtocol != "http/1.1" || r.TLS.Version < tls.VersionTLS12 {
			t.Errorf("TLS %+v, want ALPN http/1.1, TLS 1.2 or later", r.TLS)
		}
		created(w, r)
	}), true, nil)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c := mustNew(t, Options{BaseURL: srv.URL, TLSConfig: &tls.Config{RootCAs: roots}, AuthHeader: "X-Api-Key: k"})
	syncTransportOf(t, c)
	for i := range 3 {
		if res := c.Register(context.Background(), "s", fmt.Sprint("k", i), product); res.Class != Registered {
			t.Fatalf("call %d: %v %v", i, res.Class, res.Err)
		}
	}
	if n := opened.Load(); n != 1 {
		t.Errorf("3 https calls opened %d connections, want 1", n)
	}

	// Without the test CA the system's roots do not know the certificate.
	untrusted := mustNew(t, Options{BaseURL: srv.URL})
	res := untrusted.Register(context.Background(), "s", "k", product)
	if res.Class != Transient || res.Err == nil || !strings.Contains(res.Err.Error(), "certificate") {
		t.Errorf("without the CA: %v %v, want a certificate error", res.Class, res.Err)
	}
}

// http.ProxyFromEnvironment reads the environment once per process, so
// each case runs New in a fresh test process with its environment.
func TestNewUsesNetHTTPBehindAProxy(t *testing.T) {
	if base := os.Getenv("REGISTRYCLIENT_TEST_PROXY_BASE"); base != "" {
		c, err := New(Options{BaseURL: base})
		if err != nil {
			t.Fatal(err)
		}
		switch tr := c.http.Transport.(type) {
		case *syncTransport:
			fmt.Println("transport=sync")
		case *http.Transport:
			fmt.Println("transport=nethttp")
		default:
			t.Fatalf("transport %T", tr)
		}
		return
	}
	const proxy = "http://proxy.example.com:3128"
	tests := []struct {
		name, base string
		env        map[string]string
		want       string
	}{
		{name: "HTTPS_PROXY, https API", base: "https://registry.example.com", env: map[string]string{"HTTPS_PROXY": proxy}, want: "nethttp"},
		{name: "https_proxy, https API", base: "https://registry.example.com/api", env: map[string]string{"https_proxy": proxy}, want: "nethttp"},
		{name: "HTTP_PROXY, http API", base: "http://registry.example.com:8081", env: map[string]string{"HTTP_PROXY": proxy}, want: "nethttp"},
		{name: "HTTP_PROXY, https API", base: "https://registry.example.com", env: map[string]string{"HTTP_PROXY": proxy}, want: "sync"},
		{name: "NO_PROXY names the API", base: "https://registry.example.com", env: map[string]string{"HTTPS_PROXY": proxy, "NO_PROXY": ".example.com"}, want: "sync"},
		{name: "HTTP_PROXY, loopback API", base: "http://127.0.0.1:8081", env: map[string]string{"HTTP_PROXY": proxy}, want: "sync"},
		{name: "no proxy", base: "https://registry.example.com", want: "sync"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "REQUEST_METHOD"} {
				t.Setenv(k, "")
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			t.Setenv("REGISTRYCLIENT_TEST_PROXY_BASE", tt.base)
			out, err := exec.Command(os.Args[0], "-test.run=^TestNewUsesNetHTTPBehindAProxy$", "-test.count=1").CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(string(out), "transport="+tt.want+"\n") {
				t.Errorf("want transport=%s, got\n%s", tt.want, out)
			}
		})
	}
}

func TestWarmLeavesIdleConnectionsInThePool(t *testing.T) {
	srv, opened := countedServer(t, http.NotFoundHandler(), false, nil)
	c := mustNew(t, Options{BaseURL: srv.URL, MaxConnsPerHost: 8})
	st := syncTransportOf(t, c)
	if got := c.Warm(context.Background(), 5); got != 5 {
		t.Fatalf("Warm(5) answered %d", got)
	}
	if open, idle := st.pool(); open != 5 || idle != 5 || opened.Load() != 5 {
		t.Errorf("after Warm(5): %d open, %d idle, %d opened, want 5 each", open, idle, opened.Load())
	}
}

// BenchmarkRegisterTransport compares net/http's Transport with the
// synchronous one: 16 callers registering at once against a server that
// answers 201 at once. cpu-ns/op is the CPU time of the whole process per
// call; with REGISTRYCLIENT_BENCH_SERVER=process the server runs in a
// process of its own, and cpu-ns/op is the client's alone.
func BenchmarkRegisterTransport(b *testing.B) {
	base := benchServer(b)
	for _, which := range []string{"nethttp", "sync"} {
		b.Run(which, func(b *testing.B) {
			o := Options{BaseURL: base, MaxConnsPerHost: 16}
			if which == "nethttp" {
				o.HTTPClient = &http.Client{Transport: netHTTPTransport(16, nil)}
			}
			c := mustNew(b, o)
			if which == "sync" {
				syncTransportOf(b, c)
			}
			c.Warm(context.Background(), 16)
			// RunParallel starts parallelism × GOMAXPROCS callers.
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((16 + procs - 1) / procs)
			b.ReportAllocs()
			cpu := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if res := c.Register(context.Background(), "s1", "u:1", product); res.Class != Registered {
						b.Errorf("%v %v", res.Class, res.Err)
						return
					}
				}
			})
			b.StopTimer()
			if used := processCPU() - cpu; used > 0 {
				b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// benchServer answers the base URL of a server answering every call 201.
func benchServer(b *testing.B) string {
	b.Helper()
	if os.Getenv("REGISTRYCLIENT_BENCH_SERVER") != "process" {
		srv := httptest.NewServer(http.HandlerFunc(created))
		b.Cleanup(srv.Close)
		return srv.URL
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchServerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "REGISTRYCLIENT_BENCH_SERVE=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if url, ok := strings.CutPrefix(lines.Text(), "serving "); ok {
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return url
		}
	}
	b.Fatalf("the server process did not start: %v", lines.Err())
	return ""
}

// TestBenchServerProcess is the server of BenchmarkRegisterTransport when
// it runs in a process of its own; it serves until its stdin closes.
func TestBenchServerProcess(t *testing.T) {
	if os.Getenv("REGISTRYCLIENT_BENCH_SERVE") != "1" {
		t.Skip("the server process of BenchmarkRegisterTransport")
	}
	srv := httptest.NewServer(http.HandlerFunc(created))
	defer srv.Close()
	fmt.Println("serving " + srv.URL)
	_, _ = io.Copy(io.Discard, os.Stdin)
}
