package circuit

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testredis"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
)

// BenchmarkDefaults measures the behaviour the default settings were chosen
// from, on a time scale shrunk 20× (the sellers' 100 per 60 s becomes 100 per
// 3 s, every duration of the breaker and of the rows' retry policy / 20):
// sellers call the sandbox through the registry client at their limit's
// pace, each row retrying transient failures with the default policy, every
// call going through the breaker with the default settings.
//
//  1. normal: the sandbox injects the fault rates named by the case; the
//     worst failure ratio of any window holding MinCalls calls, and whether
//     the circuit opened (it must not);
//  2. outage: every call answered 503 for 60 s (real scale); how long until
//     the circuit opened and how many calls reached the dead API before and
//     after, and how many rows were dead-lettered (the rows' budget counts
//     only failures while the circuit was closed);
//  3. recovery: how long until the circuit closed.
//
// Run: go test -run '^$' -bench BenchmarkDefaults -benchtime 1x ./circuit/
// Times are reported at real scale (× 20).
func BenchmarkDefaults(b *testing.B) {
	for _, sc := range []struct {
		name       string
		fail, drop float64
		sellers    int
	}{
		{"fail10%/sellers3", 0.1, 0, 3},
		{"fail10%/sellers1", 0.1, 0, 1},
		{"fail20%+drop5%/sellers3", 0.2, 0.05, 3},
	} {
		b.Run(sc.name, func(b *testing.B) {
			for range b.N {
				measureDefaults(b, sc.fail, sc.drop, sc.sellers)
			}
		})
	}
}

const speedup = 20

type event struct {
	at      time.Time
	outcome Outcome
	probe   bool
}

func measureDefaults(b *testing.B, fail, drop float64, sellers int) {
	srv := testredis.Start(b)
	d := DefaultSettings()
	s := d
	for _, p := range []*time.Duration{&s.Window, &s.ProbeMin, &s.ProbeMax, &s.ProbeLease} {
		*p /= speedup
	}
	s.Name = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	br, err := New(srv.Client(), s)
	if err != nil {
		b.Fatal(err)
	}
	const latency, jitter = 3 * time.Millisecond, 5 * time.Millisecond // the consumer integration test's
	sb, err := sandbox.New(sandbox.Options{Limit: 1 << 20, FailRate: fail, DropRate: drop, Latency: latency, Jitter: jitter})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(sb)
	defer ts.Close()
	rc, err := registryclient.New(registryclient.Options{BaseURL: ts.URL, Timeout: 10 * time.Second / speedup})
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	policy := registryclient.DefaultRetryPolicy()

	var (
		mu       sync.Mutex
		events   []event
		dlq      int // rows that spent their budget
		openedAt time.Time
		closedAt time.Time
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	pace := 3 * time.Second / 100 // one seller's limit, shrunk
	for si := range sellers {
		seller := fmt.Sprintf("seller-%d", si)
		wg.Go(func() {
			type row struct {
				n, attempts int
				due         time.Time
			}
			var retries []row
			next := 1
			tick := time.NewTicker(pace)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				r := row{n: next}
				if len(retries) > 0 && !time.Now().Before(retries[0].due) {
					r, retries = retries[0], retries[1:]
				} else {
					next++
				}
				dec, err := br.Allow(ctx)
				if err != nil || !dec.Allowed {
					retries = append([]row{r}, retries...) // waits; no attempt spent
					continue
				}
				key := fmt.Sprintf("%s-u:%d", seller, r.n)
				res := rc.Register(ctx, seller, key, bulkreg.Product{SellerSKU: key, Name: "상품", CategoryCode: "50000001", Price: 12000, Stock: 1})
				if ctx.Err() != nil {
					return
				}
				o := OutcomeOf(res.Class)
				st, err := br.Report(ctx, dec, Call{Seller: seller, Row: key, Outcome: o})
				if err != nil {
					return
				}
				mu.Lock()
				events = append(events, event{at: time.Now(), outcome: o, probe: dec.Probe})
				if st.Changed && st.State == Open && openedAt.IsZero() {
					openedAt = time.Now()
				}
				if st.Changed && st.State == Closed && closedAt.IsZero() {
					closedAt = time.Now()
				}
				if o == Failure {
					if st.State == Closed && !dec.Probe {
						r.attempts++
					}
					if r.attempts >= policy.MaxAttempts {
						dlq++
					} else {
						backoff := policy.InitialInterval << max(r.attempts-1, 0) / speedup
						r.due = time.Now().Add(min(backoff, policy.MaxInterval/speedup))
						retries = append(retries, r)
					}
				}
				mu.Unlock()
			}
		})
	}

	normal := 8 * time.Second // 160 s real
	start := time.Now()
	time.Sleep(normal)
	mu.Lock()
	normalEvents := len(events)
	normalDLQ := dlq
	mu.Unlock()
	opensNormal, err := br.Peek(ctx)
	if err != nil {
		b.Fatal(err)
	}

	outageStart := time.Now()
	if err := sb.SetFaults(1, 0, 0, latency, jitter); err != nil {
		b.Fatal(err)
	}
	time.Sleep(3 * time.Second) // 60 s real
	mu.Lock()
	outageEvents := events[normalEvents:]
	outageDLQ := dlq - normalDLQ
	opened := openedAt
	mu.Unlock()

	recoverStart := time.Now()
	if err := sb.SetFaults(fail, 0, drop, latency, jitter); err != nil {
		b.Fatal(err)
	}
	for time.Since(recoverStart) < 3*time.Second {
		mu.Lock()
		done := !closedAt.IsZero()
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()

	// 1. normal: the worst window
	evs := events[:normalEvents]
	worst, windows, calls, fails := 0.0, 0, 0, 0
	for i, j := 0, 0; j < len(evs); j++ {
		for evs[j].at.Sub(evs[i].at) >= s.Window {
			i++
		}
		n, f := 0, 0
		for _, e := range evs[i : j+1] {
			if e.outcome != Abandoned {
				n++
			}
			if e.outcome == Failure {
				f++
			}
		}
		if n >= s.MinCalls {
			windows++
			worst = max(worst, float64(f)/float64(n))
		}
		calls++
		if evs[j].outcome == Failure {
			fails++
		}
	}
	// 2. outage
	before, probes := 0, 0
	for _, e := range outageEvents {
		switch {
		case e.probe:
			probes++
		case opened.IsZero() || e.at.Before(opened):
			before++
		}
	}
	real := func(d time.Duration) float64 { return (d * speedup).Seconds() }
	toOpen, toClose := -1.0, -1.0
	if !opened.IsZero() {
		toOpen = real(opened.Sub(outageStart))
	}
	if !closedAt.IsZero() {
		toClose = real(closedAt.Sub(recoverStart))
	}
	b.Logf("normal %s real: %d calls, %.1f%% transient, %d windows of >= %d calls, worst failure ratio %.2f, circuit opened %d times, %d rows dead-lettered",
		(normal * speedup).Round(time.Second), calls, 100*float64(fails)/float64(max(calls, 1)), windows, s.MinCalls, worst, opensNormal.Opens, normalDLQ)
	b.Logf("outage 60 s real: opened after %.1f s and %d calls into the dead API; then %d probes; %d rows dead-lettered",
		toOpen, before, probes, outageDLQ)
	b.Logf("recovery: closed %.1f s after the API answered again (%s since start)", toClose, time.Since(start).Round(time.Second))
	b.ReportMetric(worst, "worst_ratio")
	b.ReportMetric(float64(opensNormal.Opens), "opens_normal")
	b.ReportMetric(toOpen, "s_to_open")
	b.ReportMetric(float64(before), "calls_to_open")
	b.ReportMetric(float64(probes), "probes_60s")
	b.ReportMetric(float64(outageDLQ), "dlq_outage")
	b.ReportMetric(toClose, "s_to_close")
}
