package throttle

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/sandbox"
)

// judge is the sandbox registration API, strict, counting each call when it
// handles it: after its injected latency, so a latency is an API that counts
// calls that late. The tests below are judged by its audit, not by the
// throttle's own view.
type judge struct {
	sb      *sandbox.Server
	url     string
	arrived atomic.Int64 // registration requests received, before the latency
}

func startJudge(t *testing.T, o sandbox.Options) *judge {
	t.Helper()
	sb, err := sandbox.New(o)
	if err != nil {
		t.Fatal(err)
	}
	j := &judge{sb: sb}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		j.arrived.Add(1)
		sb.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	j.url = srv.URL
	return j
}

// register makes one registration call for the seller and answers its
// status and when the answer came (the machine's clock, which is Redis's:
// the same machine).
func (j *judge) register(t *testing.T, seller, key string) (int, time.Time) {
	t.Helper()
	body := fmt.Sprintf(`{"seller_sku":%q,"name":"상품","category_code":"50000001","price":12000,"stock":10,"shipping_fee":0}`, key)
	req, err := http.NewRequest(http.MethodPost, j.url+"/v1/sellers/"+seller+"/products", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, time.Now()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, time.Now()
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, time.Now()
}

// audit fails the test when the API refused any call of the seller or
// counted more than its limit at once (by its own policy: in one trailing
// window, or tokens of its bucket), and answers its 201s.
func (j *judge) audit(t *testing.T, seller string) int {
	t.Helper()
	a := j.sb.Audit().Sellers[seller]
	if a.RateLimited != 0 || a.Exceeded {
		t.Errorf("the API refused %d calls (429) and counted up to %d at once; accepted at %v",
			a.RateLimited, a.MaxCounted, j.sb.AcceptedTimes(seller))
	}
	return a.Accepted
}

// registered fails the test unless the API registered want calls of the
// seller, on top of audit's checks (no 429, never over its limit).
func (j *judge) registered(t *testing.T, seller string, want int) {
	t.Helper()
	if n := j.audit(t, seller); n != want {
		t.Errorf("the API registered %d calls, want %d", n, want)
	}
}

// callEach makes the calls of rs at once, each as callAt does, keyed
// <prefix>-<i>, and waits for them all.
func callEach(t *testing.T, th *Throttle, j *judge, prefix string, rs []Reservation) {
	t.Helper()
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() { callAt(t, th, j, r, fmt.Sprintf("%s-%d", prefix, i)) })
	}
	wg.Wait()
}

// callNext takes n slots of the seller at once and makes their calls as
// callAt does (keyed next-<i>), and waits for them all.
func callNext(t *testing.T, th *Throttle, j *judge, seller string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { callAt(t, th, j, reserve(t, th, seller), fmt.Sprintf("next-%d", i)) })
	}
	wg.Wait()
}

// callAt makes the row's call as a consumer does: a reservation not admitted
// asks again when it says (Wait); it asks the throttle to confirm the slot
// shortly before it (taking a new one when the slot is no longer good),
// waits for it, calls unless it is later than half the margin after it (then
// it gives the slot back and takes a new one: the throttle's margin covers
// no more), and settles the slot at the answer.
func callAt(t *testing.T, th *Throttle, j *judge, r Reservation, key string) {
	t.Helper()
	ctx := context.Background()
	if !r.Admitted {
		time.Sleep(r.Wait)
		var err error
		if r, err = th.Wait(ctx, r.Seller); err != nil {
			t.Error(err)
			return
		}
	}
	for {
		time.Sleep(time.Until(r.At.Add(-30 * time.Millisecond)))
		c, err := th.Check(ctx, r)
		if err != nil {
			t.Error(err)
			return
		}
		if c.Good {
			time.Sleep(time.Until(r.At))
			if time.Since(r.At) <= th.Policy().Margin/2 {
				break
			}
			if err := th.Release(ctx, r); err != nil {
				t.Error(err)
				return
			}
		}
		if r, err = th.Wait(ctx, r.Seller); err != nil {
			t.Error(err)
			return
		}
	}
	status, answered := j.register(t, r.Seller, key)
	if status != http.StatusCreated {
		return // the audit tells
	}
	if err := th.Settle(ctx, r, answered); err != nil {
		t.Error(err)
	}
}
