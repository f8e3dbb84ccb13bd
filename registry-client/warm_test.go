package registryclient

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg"
)

// TestWarmOpensConnectionsTheCallsReuse: Warm(n) leaves n connections open,
// registers nothing, and n calls at once afterwards open none.
func TestWarmOpensConnectionsTheCallsReuse(t *testing.T) {
	var opened, posts, heads atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodHead:
			heads.Add(1)
			<-release // hold every warming request until all n are in, so each needs its own connection
			w.WriteHeader(http.StatusNotFound)
		case http.MethodPost:
			posts.Add(1)
			time.Sleep(20 * time.Millisecond)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"product_id":"p1","seller_sku":"a"}`))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := New(Options{BaseURL: srv.URL, MaxConnsPerHost: 8, AuthHeader: "Authorization: Bearer x", AllowInsecureAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	done := make(chan int)
	go func() { done <- c.Warm(context.Background(), n) }()
	deadline := time.Now().Add(5 * time.Second)
	for heads.Load() < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if got := <-done; got != n {
		t.Fatalf("Warm(%d) answered %d", n, got)
	}
	if got := opened.Load(); got != n {
		t.Fatalf("Warm(%d) opened %d connections", n, got)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res := c.Register(context.Background(), "s", "u:"+string(rune('1'+i)), bulkreg.Product{SellerSKU: "a"})
			if !res.OK() {
				t.Errorf("Register: %+v", res)
			}
		})
	}
	wg.Wait()
	if got := opened.Load(); got != n {
		t.Errorf("%d calls after Warm(%d) opened %d more connections, want none", n, n, got-n)
	}
	if posts.Load() != n {
		t.Errorf("%d registrations, want the %d calls only (warming registers nothing)", posts.Load(), n)
	}
}
