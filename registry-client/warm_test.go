package registryclient

import (
	"context"
	"fmt"
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
// registers nothing, and n calls at once afterwards open none. The server
// answers the warming requests at once, so nothing but Warm itself keeps
// them on n connections.
func TestWarmOpensConnectionsTheCallsReuse(t *testing.T) {
	var opened, posts atomic.Int64
	var mu sync.Mutex
	warmedOn := map[string]int{} // warming requests per client connection
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			mu.Lock()
			warmedOn[r.RemoteAddr]++
			mu.Unlock()
			http.NotFound(w, r)
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
	callAll := func(round int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				res := c.Register(context.Background(), "s", fmt.Sprintf("u%d:%d", round, i), bulkreg.Product{SellerSKU: "a"})
				if !res.OK() {
					t.Errorf("Register: %+v", res)
				}
			})
		}
		wg.Wait()
	}
	for round := range 3 {
		if got := c.Warm(context.Background(), n); got != n {
			t.Fatalf("round %d: Warm(%d) answered %d", round, n, got)
		}
		mu.Lock()
		touched := len(warmedOn)
		clear(warmedOn)
		mu.Unlock()
		if touched != n {
			t.Errorf("round %d: Warm(%d) went over %d connections, want %d (each idle connection touched once)", round, n, touched, n)
		}
		if got := opened.Load(); got != n {
			t.Fatalf("round %d: %d connections open after Warm(%d), want %d", round, got, n, n)
		}
		callAll(round)
		if got := opened.Load(); got != n {
			t.Errorf("round %d: %d calls after Warm(%d) opened %d more connections, want none", round, n, n, got-n)
		}
	}
	if posts.Load() != 3*n {
		t.Errorf("%d registrations, want the %d calls only (warming registers nothing)", posts.Load(), 3*n)
	}
}
