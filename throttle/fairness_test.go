package throttle

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The tests in this file run sellers' rows the way consumers do: each seller
// has a lane that lets at most conc rows hold a slot at once; a row takes a
// slot (asking again when refused), sleeps until it and "calls" at it. Calls
// are counted at their slots (Reservation.At, on the Redis clock), so a busy
// machine that wakes a row late changes when rows ask, never what is counted.

// lane is one seller's rows.
type lane struct {
	seller string
	rows   int
	conc   int           // rows holding a slot at once; 0 = all
	after  time.Duration // starts this long after the run
}

// laneResult is what one seller's rows did.
type laneResult struct {
	calls    []time.Time // the slots called at, ascending
	firstAsk time.Time   // the Redis clock at its first request
	capped   int         // requests refused for the fair share
	refused  int         // requests refused for any reason
	ids      []string    // seller and app-wide slot ids of the calls
	spread   time.Duration
}

// runLanes runs the lanes over the throttles (one per simulated consumer)
// until every row has called or ctx ends; rows still waiting then give their
// slots back. It fails the test on a throttle error.
func runLanes(ctx context.Context, t *testing.T, ths []*Throttle, lanes []lane, spread bool) map[string]*laneResult {
	t.Helper()
	var (
		mu   sync.Mutex
		out  = map[string]*laneResult{}
		errs []error
		wg   sync.WaitGroup
	)
	for i, l := range lanes {
		res := &laneResult{}
		out[l.seller] = res
		conc := l.conc
		if conc == 0 {
			conc = l.rows
		}
		wg.Go(func() {
			if sleep(ctx, l.after) != nil {
				return
			}
			seats := make(chan struct{}, conc)
			var rows sync.WaitGroup
			defer rows.Wait()
			for row := range l.rows {
				// A seller's rows are on one partition, so one consumer;
				// spread, they race across consumers (as around a rebalance).
				th := ths[i%len(ths)]
				if spread {
					th = ths[(i+row)%len(ths)]
				}
				select {
				case seats <- struct{}{}:
				case <-ctx.Done():
					return
				}
				rows.Go(func() {
					defer func() { <-seats }()
					for {
						r, err := th.Reserve(ctx, l.seller)
						if ctx.Err() != nil {
							if err == nil && r.Admitted {
								th.releaseDetached(ctx, r)
							}
							return
						}
						mu.Lock()
						if err != nil {
							errs = append(errs, err)
							mu.Unlock()
							return
						}
						if res.firstAsk.IsZero() {
							res.firstAsk = r.At.Add(-r.Wait)
						}
						if !r.Admitted {
							res.refused++
							if r.Capped {
								res.capped++
							}
						}
						mu.Unlock()
						if sleep(ctx, r.Wait) != nil {
							if r.Admitted {
								th.releaseDetached(ctx, r)
							}
							return
						}
						if !r.Admitted {
							continue
						}
						mu.Lock()
						res.spread = max(res.spread, r.Spread)
						res.calls = append(res.calls, r.At)
						res.ids = append(res.ids, r.ID, r.Global.ID)
						mu.Unlock()
						return
					}
				})
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d reservations failed, the first: %v", len(errs), errs[0])
	}
	for _, res := range out {
		slices.SortFunc(res.calls, func(a, b time.Time) int { return a.Compare(b) })
	}
	return out
}

// fairnessCase is a run of lanes under one policy and what it must show.
type fairnessCase struct {
	p       Policy
	lanes   []lane
	run     time.Duration // the big lanes are stopped then
	small   int           // a lane with at most this many rows must finish within 2 app-wide windows of its first request
	holding func(t *testing.T, rdb redis.UniversalClient)
	// spread runs a seller's rows on every consumer, racing each other
	// across processes: only the limits and the give-backs are checked.
	spread bool
}

// checkFairness runs c and checks the invariants: no trailing window holds
// more than L calls of a seller or G calls in all; every small seller
// finishes within two app-wide windows; the app-wide window is used at least
// 95 % while rows wait; every slot left in the logs belongs to a call made.
func checkFairness(t *testing.T, clients []redis.UniversalClient, c fairnessCase) {
	t.Helper()
	var ths []*Throttle
	for _, rdb := range clients {
		ths = append(ths, newThrottle(t, rdb, c.p))
	}
	p := ths[0].Policy()
	ctx, cancel := context.WithTimeout(context.Background(), c.run)
	defer cancel()
	if c.holding != nil {
		go func() {
			// the late lanes start after c.holding has seen what it wants
			c.holding(t, clients[0])
		}()
	}
	res := runLanes(ctx, t, ths, c.lanes, c.spread)
	stopped := time.Now()

	var all []time.Time
	rows := map[string]int{}
	for _, l := range c.lanes {
		all = append(all, res[l.seller].calls...)
		rows[l.seller] = l.rows
	}
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	if len(all) == 0 {
		t.Fatal("no calls")
	}
	// The API's windows: a call is made at its reservation's At, which
	// may be after the slot in a log (a round trip, or the spread between
	// the two slots): lateness the margin covers, as for any call.
	tol := p.Global.Tolerance
	sellerSpan, globalSpan := p.Window, p.Global.Window
	if got := maxInWindow(all, globalSpan); got > p.Global.Limit {
		t.Errorf("a trailing %v holds %d calls of all sellers, app-wide limit %d", globalSpan, got, p.Global.Limit)
	}
	t0 := all[0]
	w := p.Global.Window + p.Margin
	for _, l := range c.lanes {
		r := res[l.seller]
		if got := maxInWindow(r.calls, sellerSpan); got > p.Limit {
			t.Errorf("seller %s: a trailing %v holds %d calls, limit %d", l.seller, sellerSpan, got, p.Limit)
		}
		// Slots ahead agree within the tolerance; a slot due now may have
		// begun a round trip (or a pause) before the other was taken,
		// never SendWithin before.
		if r.spread > p.SendWithin {
			t.Errorf("seller %s: a call's two slots were %v apart, SendWithin %v (tolerance %v)", l.seller, r.spread, p.SendWithin, tol)
		}
		if l.rows > c.small {
			t.Logf("seller %s (%d rows): %d calls, %d requests refused (%d capped), slots at most %v apart", l.seller, l.rows, len(r.calls), r.refused, r.capped, r.spread)
			continue
		}
		if len(r.calls) != l.rows {
			t.Errorf("seller %s with %d rows made %d calls in %v", l.seller, l.rows, len(r.calls), c.run)
			continue
		}
		took := r.calls[len(r.calls)-1].Sub(r.firstAsk)
		t.Logf("seller %s (%d rows): last call %v after its first request (%.2f app-wide windows), %d refused (%d capped)",
			l.seller, l.rows, took.Round(time.Millisecond), took.Seconds()/w.Seconds(), r.refused, r.capped)
		if took > 2*w {
			t.Errorf("seller %s with %d rows finished %v after its first request, want within 2 app-wide windows (%v)", l.seller, l.rows, took, 2*w)
		}
	}
	// Use of the app-wide window, window by window from the first call, while
	// rows wait: at least 95 % of what the waiting rows could use (each
	// seller at most L, all of them at most G).
	for k := 0; !c.spread; k++ {
		from, to := t0.Add(time.Duration(k)*w), t0.Add(time.Duration(k+1)*w)
		if to.After(stopped) {
			break
		}
		demand, used := 0, 0
		for _, l := range c.lanes {
			r := res[l.seller]
			if r.firstAsk.IsZero() || r.firstAsk.After(from.Add(w/10)) {
				continue // not asking yet, or only late in the window
			}
			before := 0
			for _, at := range r.calls {
				switch {
				case at.Before(from):
					before++
				case at.Before(to):
					used++
				}
			}
			demand += min(p.Limit, rows[l.seller]-before)
		}
		want := min(p.Global.Limit, demand)
		t.Logf("app-wide window %d: %d calls, %d usable by the rows waiting (%d wanted)", k, used, want, demand)
		if want > 0 && float64(used) < 0.95*float64(want) {
			t.Errorf("app-wide window %d holds %d calls while rows waited for %d of its %d slots: want at least 95 %%", k, used, want, p.Global.Limit)
		}
	}
	checkGivenBack(t, clients[0], ths[0], res, c.lanes)
}

// checkGivenBack: once every row has stopped, the logs hold only the slots
// of calls made: slots taken under one limit and not usable under the
// other, refused, moved or left by a cancelled row were all given back.
// (The logs drop slots older than a window, so this sees the last one.)
func checkGivenBack(t *testing.T, rdb redis.UniversalClient, th *Throttle, res map[string]*laneResult, lanes []lane) {
	t.Helper()
	ctx := context.Background()
	used := map[string]bool{}
	for _, r := range res {
		for _, id := range r.ids {
			used[id] = true
		}
	}
	orphans := func(key string) []string {
		members, err := rdb.ZRange(ctx, key, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range members {
			if !used[m] {
				out = append(out, m)
			}
		}
		return out
	}
	seen := 0
	for _, key := range []string{GlobalLogKey} {
		if o := orphans(key); len(o) > 0 {
			t.Errorf("the app-wide log holds %d slots no call used, e.g. %s", len(o), o[0])
		}
		seen += int(rdb.ZCard(ctx, key).Val())
	}
	for _, l := range lanes {
		for _, key := range []string{th.keys(l.seller).log, globalHeldKey(l.seller)} {
			if o := orphans(key); len(o) > 0 {
				t.Errorf("%s holds %d slots no call used, e.g. %s", key, len(o), o[0])
			}
		}
	}
	if seen == 0 {
		t.Errorf("the app-wide log is empty: the given-back check saw nothing")
	}
}

// TestFairShareOfTheAppWideLimit: 20 sellers, one with 500 rows
// and 19 with 10, under 100 per seller and 200 app-wide per window. Every
// 10-row seller finishes within two windows, the app-wide window is used
// while rows wait, and neither limit is ever exceeded.
func TestFairShareOfTheAppWideLimit(t *testing.T) {
	srv := startRedis(t)
	const window = 2 * time.Second
	p := Policy{Limit: 100, Window: window, Margin: 50 * time.Millisecond, MaxWait: 2 * window,
		Global: Global{Limit: 200, Window: window}}
	lanes := []lane{{seller: seller("big"), rows: 500, conc: 100}}
	for i := range 19 {
		lanes = append(lanes, lane{seller: seller(fmt.Sprintf("small%02d", i)), rows: 10})
	}
	var clients []redis.UniversalClient
	for range 4 {
		clients = append(clients, srv.Client())
	}
	checkFairness(t, clients, fairnessCase{p: p, lanes: lanes, run: 4*(window+p.Margin) + window/2, small: 10})
}

// TestLateSmallSellersGetTheirShare: five sellers with 500 rows each hold
// app-wide slots ahead when 15 sellers with 10 rows arrive. The newcomers
// are not queued behind them: within two windows each is done.
func TestLateSmallSellersGetTheirShare(t *testing.T) {
	srv := startRedis(t)
	const window = 2 * time.Second
	p := Policy{Limit: 100, Window: window, Margin: 50 * time.Millisecond, MaxWait: 2 * window,
		Global: Global{Limit: 200, Window: window}}
	arrive := window / 2
	var lanes []lane
	for i := range 5 {
		lanes = append(lanes, lane{seller: seller(fmt.Sprintf("big%d", i)), rows: 500, conc: 100})
	}
	for i := range 15 {
		lanes = append(lanes, lane{seller: seller(fmt.Sprintf("late%02d", i)), rows: 10, after: arrive})
	}
	var clients []redis.UniversalClient
	for range 4 {
		clients = append(clients, srv.Client())
	}
	var ahead int64
	holding := func(t *testing.T, rdb redis.UniversalClient) {
		time.Sleep(arrive - 100*time.Millisecond)
		now, err := rdb.Time(context.Background()).Result()
		if err == nil {
			ahead, _ = rdb.ZCount(context.Background(), GlobalLogKey, fmt.Sprint(now.UnixMicro()), "+inf").Result()
		}
	}
	checkFairness(t, clients, fairnessCase{p: p, lanes: lanes, run: 5*(window+p.Margin) + window/2, small: 10, holding: holding})
	t.Logf("when the small sellers arrived the big ones held %d app-wide slots ahead", ahead)
	// A quarter of the app-wide window booked ahead is already a queue the
	// newcomers would wait behind; a busy machine books fewer in time.
	if ahead < 50 {
		t.Errorf("the big sellers held %d app-wide slots ahead when the small ones arrived, want at least 50 (this test is about newcomers behind held slots)", ahead)
	}
}

// TestAppWideInvariantOnCluster: on a 3-master Redis Cluster, with the
// sellers' keys on other nodes than the app-wide log's, no seller exceeds
// its limit, the application never exceeds the app-wide one, the app-wide
// window is used, and no slot is left behind; with a seller's rows racing
// each other on every consumer, too.
func TestAppWideInvariantOnCluster(t *testing.T) {
	c := startCluster(t)
	var clients []redis.UniversalClient
	for range 4 {
		clients = append(clients, c.Client())
	}
	ctx := context.Background()
	rdb := clients[0].(*redis.ClusterClient)
	globalNode, err := rdb.MasterForKey(ctx, GlobalLogKey)
	if err != nil {
		t.Fatal(err)
	}
	probe := newThrottle(t, rdb, Policy{Limit: 1, Window: time.Second})
	sellersApart := func(prefix string, n int) []lane {
		var lanes []lane
		for i := 0; len(lanes) < n; i++ {
			s := seller(fmt.Sprintf("%s%d", prefix, i))
			node, err := rdb.MasterForKey(ctx, probe.keys(s).log)
			if err != nil {
				t.Fatal(err)
			}
			if node.Options().Addr == globalNode.Options().Addr {
				continue // the point is keys on different nodes
			}
			lanes = append(lanes, lane{seller: s, rows: 300, conc: 100})
		}
		return lanes
	}
	// The production default margin: a call's two slots are on two nodes,
	// taken a round trip apart, and may be sent only within half the
	// margin of the earlier; a smaller one loses slots to a busy machine.
	const window = 2 * time.Second
	p := Policy{Limit: 100, Window: window, Margin: 250 * time.Millisecond, MaxWait: 2 * window,
		Global: Global{Limit: 150, Window: window}}
	t.Run("one consumer per seller", func(t *testing.T) {
		checkFairness(t, clients, fairnessCase{p: p, lanes: sellersApart("cl", 4), run: 3*(window+p.Margin) + window/2})
	})
	t.Run("rows racing on every consumer", func(t *testing.T) {
		checkFairness(t, clients, fairnessCase{p: p, lanes: sellersApart("race", 4), run: 2*(window+p.Margin) + window/2, spread: true})
	})
}
