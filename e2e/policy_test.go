package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testbin"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// The tests in this file run each way the registration API may count its
// limit end to end, every part a separate process: the sandbox counting one
// way (--policy), one consumer keeping the limit one way, the producer CLI,
// real Redis and the embedded broker. One seller uploads 70 rows against 20
// per 2 s (four windows' worth), margin 200 ms.
//
// Before the upload the test blocks the seller in the throttle (as a 429's
// Retry-After would) until the middle of a window at least 4 s ahead: the
// rows are read and wait meanwhile, and the first slot is then a known
// moment, the same for every policy. From it each policy has its own
// earliest last call, which the run must reach and not overshoot by more
// than a call's allowed lateness and latency.
const (
	policyLimit  = 20
	policyWindow = 2 * time.Second
	policyMargin = 200 * time.Millisecond
	policyRows   = 70
	policySeller = "seller-p"
	// How late the last call may come after its slot: the consumer's
	// allowed lateness (half the margin) and the call itself, with room
	// for a busy machine.
	policySlack = 400 * time.Millisecond
	// The consumer's registry timeout: the API may count a call up to
	// twice this after it is sent, and the throttle's log holds each call
	// there until its answer (package throttle). A bucket's tolerance
	// (700 ms) then covers the reach, 100 ms to send + 500 ms, so rows
	// booked before the answers come keep a burst of their own.
	policyCallTimeout = 250 * time.Millisecond
	policyReach       = policyMargin/2 + 2*policyCallTimeout
)

// policyRun is what one run saw.
type policyRun struct {
	audit  sandbox.SellerAudit
	first  time.Time           // the end of the block, the first slot
	missed float64             // slots the consumer gave back for lateness (each row took a new one)
	upload uploadstatus.Status // the upload as the seller sees it, once the audit is final
}

// runPolicy starts the sandbox counting as api (with burst, for a token
// bucket), one consumer keeping the limit as kind (with burst), blocks the
// seller until the middle of a window, uploads policyRows rows, and waits
// until done says the sandbox's audit is final.
func runPolicy(t *testing.T, api string, kind throttle.Kind, burst int, done func(sandbox.SellerAudit) bool) policyRun {
	t.Helper()
	bin := testbin.Build(t, "producer", "consumer", "registry-sandbox")
	topic := bulkreg.DefaultTopic
	brokers := testkafka.Start(t, 1, topic, bulkreg.DLQTopic(topic))
	rs := testredis.Start(t)
	redisInit(t, bin, rs.Addr)
	addrs := freeAddrs(t, 2)
	registry, metrics := addrs[0], addrs[1]
	env := []string{
		"BULKREG_KAFKA_BROKERS=" + strings.Join(brokers, ","),
		"BULKREG_REDIS_ADDRS=" + rs.Addr,
		"BULKREG_REGISTRY_URL=http://" + registry,
		"BULKREG_LIMIT=" + strconv.Itoa(policyLimit),
		"BULKREG_WINDOW=" + policyWindow.String(),
		"BULKREG_MARGIN=" + policyMargin.String(),
		"BULKREG_SESSION_TIMEOUT=6s",
	}
	sandboxEnv := append(env[:len(env):len(env)], "BULKREG_LISTEN="+registry, "BULKREG_POLICY="+api)
	if api == sandbox.PolicyTokenBucket && burst > 0 {
		sandboxEnv = append(sandboxEnv, "BULKREG_BURST="+strconv.Itoa(burst))
	}
	start(t, filepath.Join(bin, "registry-sandbox"), "registry-sandbox", sandboxEnv)
	testwait.For(t, 10*time.Second, "the sandbox answers /healthz", func() bool {
		resp, err := http.Get("http://" + registry + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	consumerEnv := append(env[:len(env):len(env)], "BULKREG_METRICS_ADDR="+metrics, "BULKREG_HEARTBEAT_INTERVAL=1s", "BULKREG_POLICY="+string(kind),
		"BULKREG_REGISTRY_TIMEOUT="+policyCallTimeout.String())
	if kind == throttle.TokenBucket && burst > 0 {
		consumerEnv = append(consumerEnv, "BULKREG_BURST="+strconv.Itoa(burst))
	}
	start(t, filepath.Join(bin, "consumer"), "consumer", consumerEnv)
	testkafka.WaitGroupStable(t, brokers, "bulkreg-registrar", 1, 30*time.Second)

	// Block the seller until the middle of a window at least 4 s ahead, time
	// enough to publish the rows on a busy machine.
	ctx := context.Background()
	rdb := rs.Client()
	// A block is the same key under every policy: this throttle's policy does not matter.
	th, err := throttle.New(rdb, throttle.Policy{Limit: policyLimit, Window: policyWindow, Margin: policyMargin})
	if err != nil {
		t.Fatal(err)
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	w := policyWindow.Microseconds()
	first := time.UnixMicro((now.UnixMicro()+4*time.Second.Microseconds())/w*w + w + w/2)
	if err := th.Block(ctx, policySeller, first.Sub(now)); err != nil {
		t.Fatal(err)
	}

	rows := make([]sheetRow, policyRows)
	for i := range rows {
		rows[i] = sheetRow{fmt.Sprintf("P-%03d", i+1), strconv.Itoa(1000 + i)}
	}
	r := producerCLI(t, bin, env, "upload", "--seller", policySeller, writeSheet(t, "policy.xlsx", rows))
	if r.code != 0 || !strings.Contains(r.stderr, fmt.Sprintf("%d rows published", policyRows)) {
		t.Fatalf("upload: exit %d, %s", r.code, r.stderr)
	}
	if time.Now().After(first) {
		t.Fatalf("the upload took until %v, after the block ended (%v): this machine is too slow for this test's timing", time.Now(), first)
	}
	var run policyRun
	testwait.For(t, time.Minute, "the sandbox's audit final", func() bool {
		var a sandbox.Audit
		if err := getJSON("http://"+registry+"/audit", &a); err != nil {
			t.Fatal(err)
		}
		run.audit = a.Sellers[policySeller]
		return done(run.audit)
	})
	run.first = first
	run.missed, _ = metric(t, metrics, "bulkreg_consumer_slots_missed_total")
	id := strings.TrimSpace(r.stdout)
	testwait.For(t, 10*time.Second, "the upload's status final", func() bool {
		run.upload = statusOf(t, bin, env, id)
		return run.upload.Done()
	})
	return run
}

// registeredAll: every row has been accepted.
func registeredAll(a sandbox.SellerAudit) bool { return a.Accepted >= policyRows }

// TestPolicySameAsTheAPI: for each way the API may count, the consumer set
// to count the same way registers every row once, gets no 429, never goes
// over the limit as that policy counts, and makes its last call at that
// policy's earliest moment (within a call's lateness and latency). Fixed
// windows finish sooner than the sliding window's bound.
func TestPolicySameAsTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs for about a minute")
	}
	windows := (policyRows + policyLimit - 1) / policyLimit
	slidingLast := time.Duration(windows-1) * (policyWindow + policyMargin)
	for _, tc := range []struct {
		kind  throttle.Kind
		burst int
		// last is the earliest the last row's slot can be after the first
		// slot, first: as the throttle spaces the rows for this policy.
		last func(first time.Time) time.Duration
		// step is what a slot missed for lateness can cost: the row's next slot.
		step time.Duration
		// unanswered is how much later than last the rows may come while
		// calls before them await their answers.
		unanswered time.Duration
	}{
		// L slots, then the next L a whole W′ after them.
		{throttle.Sliding, 0, func(time.Time) time.Duration { return slidingLast }, policyWindow + policyMargin, 0},
		// L slots in the first window, L at the start of each next one.
		{throttle.Fixed, 0, func(first time.Time) time.Duration {
			w := policyWindow.Microseconds()
			return time.UnixMicro(first.UnixMicro()/w*w + int64(windows-1)*w).Sub(first)
		}, policyWindow, 0},
		// A bucket of 10 refilled at 20 per 2 s (T = 100 ms): the throttle
		// keeps the margin out of its tolerance, 9T − margin = 700 ms, so
		// row n's slot is (n−1)T − 700 ms after the first at the earliest.
		// Its tat also covers each call's latest count (its slot + the
		// reach) until the answer settles it: rows booked before the
		// answers come are up to the reach later.
		{throttle.TokenBucket, 10, func(time.Time) time.Duration {
			t := policyWindow / policyLimit
			return time.Duration(policyRows-1)*t - (9*t - policyMargin)
		}, policyWindow / policyLimit, policyReach},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			run := runPolicy(t, string(tc.kind), tc.kind, tc.burst, registeredAll)
			a := run.audit
			if a.Accepted != policyRows || a.Products != policyRows || a.RateLimited != 0 || run.upload.Registered != policyRows {
				t.Errorf("the sandbox counted %d registrations of %d products and %d × 429, the upload %d registered; want %d, %d, 0, %d",
					a.Accepted, a.Products, a.RateLimited, run.upload.Registered, policyRows, policyRows, policyRows)
			}
			capacity := policyLimit
			if tc.burst > 0 {
				capacity = tc.burst
			}
			if a.Exceeded || a.MaxCounted > capacity {
				t.Errorf("the sandbox counted %d at once as %s counts, more than %d", a.MaxCounted, tc.kind, capacity)
			}
			want := tc.last(run.first)
			took := a.Last.Sub(run.first)
			allowed := want + policySlack + tc.unanswered
			if run.missed > 0 {
				t.Logf("%v slots missed for lateness (a busy machine): one more step allowed", run.missed)
				allowed += tc.step
			}
			t.Logf("%s: first call %v after the first slot, last %v after it (the policy's earliest: %v, ratio %.3f; the sliding window's: %v); at most %d counted at once, %d in a trailing window",
				tc.kind, a.First.Sub(run.first).Round(time.Millisecond), took.Round(time.Millisecond), want, took.Seconds()/want.Seconds(), slidingLast, a.MaxCounted, a.MaxInWindow)
			if a.First.Before(run.first) {
				t.Errorf("the first call was accepted at %v, before the block ended at %v", a.First, run.first)
			}
			if took < want-time.Millisecond || took > allowed {
				t.Errorf("the last call came %v after the first slot, want between %v (the %s policy's earliest) and %v", took, want, tc.kind, allowed)
			}
			if tc.kind == throttle.Fixed && took >= slidingLast {
				t.Errorf("fixed windows took %v, not sooner than the sliding window's bound %v", took, slidingLast)
			}
		})
	}
}

// TestPolicyMismatch: why the setting matters. A consumer counting fixed
// windows against an API that counts a sliding window: the block puts the
// first 20 calls in the middle of a window and the fixed throttle the next
// 20 at the next window's start, a second later and inside the API's
// trailing window, so the API refuses them. The API's own count is never
// over the limit, and each 429 blocks the seller until its Retry-After, so
// the rows are called again later and every one is registered once.
func TestPolicyMismatch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs for about 20 s")
	}
	run := runPolicy(t, sandbox.PolicySliding, throttle.Fixed, 0, registeredAll)
	a := run.audit
	t.Logf("a fixed-window consumer against a sliding-window API: %d × 429 for %d rows, at most %d in a trailing window; last call %v after the first slot",
		a.RateLimited, a.Accepted, a.MaxInWindow, a.Last.Sub(run.first).Round(time.Millisecond))
	if a.RateLimited < policyLimit || a.Exceeded || a.MaxInWindow > policyLimit {
		t.Errorf("%d × 429, %d in one trailing window (exceeded %v); want at least the second window's %d refused and never more than %d accepted in a window",
			a.RateLimited, a.MaxInWindow, a.Exceeded, policyLimit, policyLimit)
	}
	if a.Accepted != policyRows || a.Products != policyRows || run.upload.Registered != policyRows {
		t.Errorf("%d registrations of %d products, the upload %d registered (%d failed); want each of the %d rows registered once",
			a.Accepted, a.Products, run.upload.Registered, run.upload.Failed, policyRows)
	}
}
