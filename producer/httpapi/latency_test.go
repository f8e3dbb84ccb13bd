package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/hostile"
	"github.com/bulkreg/bulkreg/internal/hostile/answers"
	"github.com/bulkreg/bulkreg/producer/upload"
)

// otherSellerP99 is the most another seller waits (99th percentile) while
// one seller has the worst file checked again and again.
const otherSellerP99 = 100 * time.Millisecond

// TestOtherSellerDuringTheWorstCheck: while seller A has the corpus's
// worst check (csv-long-headers-bad-cells.csv's Korean check page: the
// longest headers that still match, a problem in every field of 500 rows)
// answered again and again, as many at once as A may, seller B's normal
// requests (the upload and history pages, a status, a dry run and a check
// of a 20-row file) wait at most 100 ms longer at the 99th percentile than
// B alone on the same machine. The absolute figure (B's p99 itself at most
// 100 ms) is measured by go run ./bench/hostile on a machine nothing else
// loads: a test shares its cores with the other packages' tests.
func TestOtherSellerDuringTheWorstCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("10 s of load")
	}
	e := newEnv(t, nil, upload.WriterOptions{})
	srv := httptest.NewServer((&Server{Uploader: e.up, Auth: Auth{Secret: secret}}).Handler())
	t.Cleanup(srv.Close)
	worst, err := hostile.Load(hostileDir, "csv-long-headers-bad-cells.csv")
	if err != nil {
		t.Fatal(err)
	}
	a, b := token(t, "seller-a"), token(t, "seller-b")
	small := xlsx(t, "other-seller", validRows(20)...)
	// B's upload, for its status.
	up := answers.Post(srv.URL+"/v1/uploads", b, "b.xlsx", small)
	req, _ := up(t.Context())
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("B's upload: %v %v", resp, err)
	}
	resp.Body.Close()
	status := resp.Header.Get("Location")
	normal := []answers.Request{
		answers.Get(srv.URL+"/upload", b, "Accept-Language", "ko"),
		answers.Get(srv.URL+"/uploads", b, "Accept-Language", "ko"),
		answers.Get(srv.URL+status, b),
		answers.Post(srv.URL+"/v1/uploads?dry_run=true", b, "b.xlsx", small),
		answers.Post(srv.URL+"/upload/check", b, "b.xlsx", small, "Accept-Language", "ko", "X-Fragment", "1"),
	}
	hostileCheck := answers.Post(srv.URL+"/upload/check", a, "worst.csv", worst, "Accept-Language", "ko")
	d := 10 * time.Second
	if s := os.Getenv("OTHER_SELLER_SECONDS"); s != "" {
		if v, err := time.ParseDuration(s + "s"); err == nil {
			d = v
		}
	}
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	// B alone first, then B during A's checks: on a machine others share
	// (go test runs packages side by side), B's own p99 can be near the
	// bound before A sends anything, so A's checks may add 100 ms to it.
	// A second pair is measured when the first misses: another package's
	// burst can fall into one 10 s measurement, while a page that is not
	// bounded misses by seconds every time.
	var misses []string
	for round := range 2 {
		alone, err := answers.OtherSeller(t.Context(), c, nil, 0, normal, 20*time.Millisecond, d/3)
		if err != nil {
			t.Fatal(err)
		}
		lat, err := answers.OtherSeller(t.Context(), c, hostileCheck, DefaultMaxUploadsPerSeller, normal, 20*time.Millisecond, d)
		got := fmt.Sprintf("round %d: seller B alone: %d requests, p50 %v, p99 %v; during %d worst checks of seller A: %d requests, p50 %v, p99 %v, max %v",
			round+1, alone.Requests, alone.P50.Round(time.Millisecond/10), alone.P99.Round(time.Millisecond/10), lat.Hostile, lat.Requests,
			lat.P50.Round(time.Millisecond/10), lat.P99.Round(time.Millisecond/10), lat.Max.Round(time.Millisecond/10))
		t.Log(got)
		if err != nil {
			t.Fatal(err)
		}
		if lat.Hostile < 2 || lat.Requests < 20 {
			t.Fatalf("%d hostile checks and %d of B's requests: not a measurement", lat.Hostile, lat.Requests)
		}
		if lat.P99 <= alone.P99+otherSellerP99 {
			return
		}
		misses = append(misses, got)
	}
	t.Errorf("seller B's p99 during seller A's worst checks was more than 100 ms over B's alone, twice:\n%s", strings.Join(misses, "\n"))
}

// TestSellerWorkIsOneAtATime: a seller's second check waits for the first
// to be done; another seller's does not; a request whose client goes away
// stops waiting; nothing is kept for a seller with no work.
func TestSellerWorkIsOneAtATime(t *testing.T) {
	w := newSellerWork()
	ctx := t.Context()
	done, err := w.take(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if other, err := w.take(ctx, "b"); err != nil {
		t.Fatalf("another seller waited: %v", err)
	} else {
		other()
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := w.take(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a's second take while the first runs: %v, want it to wait until its context ends", err)
	}
	second := make(chan func())
	go func() {
		d, _ := w.take(ctx, "a")
		second <- d
	}()
	select {
	case <-second:
		t.Fatal("a's second take did not wait for the first")
	case <-time.After(20 * time.Millisecond):
	}
	done()
	(<-second)()
	if len(w.lock) != 0 {
		t.Errorf("%d sellers' locks kept with no work", len(w.lock))
	}
}
