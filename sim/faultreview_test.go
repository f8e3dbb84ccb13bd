package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testbin"
)

// The fault review's scenarios: named and built by hand, not drawn. The
// first three place their fault against a call in flight (Fault.OnCall);
// each runs the sim's world (the built binaries, a consumer's own Redis
// proxy and registration listener) and is judged by the sandbox's own call
// log: no 429 from the limit. The fourth reshards a Redis Cluster under a
// busy seller. They run with `go test ./sim` (a few minutes, mostly
// waiting) and alone with `make fault-review`. The first three
// hold because the log holds each call's latest possible count before it
// is sent, and the drain keeps its bound when Redis does not answer.

// reviewUpload is one seller's 10 rows: two windows of 5 and then some, so
// the next owner of the partition calls a whole window while the first
// window's late counts may still be in the API's trailing window.
func reviewUpload() []Upload {
	u := Upload{At: time.Second, Seller: "seller-a", Name: "seller-a-1.csv", Note: "first upload"}
	for j := range 10 {
		u.Rows = append(u.Rows, Row{SKU: fmt.Sprintf("a-%03d", j+1), Price: 1000 + 100*j})
	}
	return []Upload{u}
}

// logCalls logs every call the API got, as sent→handled status key: what
// a failing scenario's report starts from.
func logCalls(t *testing.T, w *world) {
	var b strings.Builder
	for _, c := range w.sb.Calls() {
		fmt.Fprintf(&b, "\n  %s→%s %d %s", w.rel(c.Received), w.rel(c.Handled), c.Status, c.Key)
	}
	t.Logf("the API's calls (sent→handled status key):%s", b.String())
}

// limit429s counts the API's 429s that its limit answered (not injected).
func limit429s(w *world) int {
	n := 0
	for _, c := range w.sb.Calls() {
		if c.Status == 429 && !c.Injected {
			n++
		}
	}
	return n
}

// TestFaultReviewKilledDuringASlowdown: the API counts every call 1 s late
// (more than the margin); the consumer that made the seller's first window
// of calls is SIGKILLed 0.3 s after the first of them, before any answer.
// The partition's next owner comes one session timeout (6 s) later, well
// inside the 20 s window, and must not call the next window while the late
// counts are still in the API's trailing window.
func TestFaultReviewKilledDuringASlowdown(t *testing.T) {
	bin := testbin.Build(t, "producer", "consumer")
	sc := Scenario{Seed: -1, Family: "fault review: killed during a slowdown", Policy: "sliding",
		Limit: 5, Window: 20 * time.Second, Margin: 100 * time.Millisecond,
		Consumers: 2, Partitions: 1, LedgerLease: 3 * time.Second, RetryAttempts: 5,
		Session: 6 * time.Second, Heartbeat: time.Second,
		Uploads: reviewUpload(),
		Faults: []Fault{
			{Kind: Latency, At: 0, For: 15 * time.Second, Value: time.Second},
			{Kind: ConsumerKill, OnCall: true, Lag: 300 * time.Millisecond, For: time.Second},
		}}
	_, w := runScenario(t, bin, sc)
	logCalls(t, w)
	if n := limit429s(w); n != 0 {
		t.Errorf("%d × 429 from the limit, want 0: the dead consumer's late counts were not in the log its partition's next owner read", n)
	}
}

// TestFaultReviewPausedPastTheWindow: the consumer that made the first
// window's calls (counted 1 s late) is stopped (SIGSTOP) 0.3 s after the
// first, for 25 s, longer than the 20 s window, then resumed. The other
// consumer takes the partition after the session timeout; the paused one's
// answers and settles come only after it resumes.
func TestFaultReviewPausedPastTheWindow(t *testing.T) {
	bin := testbin.Build(t, "producer", "consumer")
	sc := Scenario{Seed: -2, Family: "fault review: paused past the window", Policy: "sliding",
		Limit: 5, Window: 20 * time.Second, Margin: 100 * time.Millisecond,
		Consumers: 2, Partitions: 1, LedgerLease: 3 * time.Second, RetryAttempts: 5,
		Session: 6 * time.Second, Heartbeat: time.Second,
		Uploads: reviewUpload(),
		Faults: []Fault{
			{Kind: Latency, At: 0, For: 15 * time.Second, Value: time.Second},
			{Kind: ConsumerPause, OnCall: true, Lag: 300 * time.Millisecond, For: 25 * time.Second},
		}}
	_, w := runScenario(t, bin, sc)
	logCalls(t, w)
	if n := limit429s(w); n != 0 {
		t.Errorf("%d × 429 from the limit, want 0: the paused consumer's late counts were not in the log the next owner read", n)
	}
}

// TestFaultReviewDeployWhileRedisIsCut: a rolling deploy while the
// consumer's Redis link is down. The API counts calls 0.5 s late; the
// consumer's link to Redis is blackholed 50 ms after its first call of the
// window, and 250 ms after that call it is SIGTERMed, a new consumer
// starting at once (W = 10 s, session 6 s, heartbeat 1 s). Its drain cannot
// write the settles. Besides no 429: the drain ends within its bound (the
// process is gone within the session timeout, drain + 2 × heartbeat ≤
// session), and its final commit is not refused.
func TestFaultReviewDeployWhileRedisIsCut(t *testing.T) {
	bin := testbin.Build(t, "producer", "consumer")
	sc := Scenario{Seed: -3, Family: "fault review: deploy while Redis is cut", Policy: "sliding",
		Limit: 5, Window: 10 * time.Second, Margin: 100 * time.Millisecond,
		Consumers: 1, Partitions: 1, LedgerLease: 3 * time.Second, RetryAttempts: 5,
		Session: 6 * time.Second, Heartbeat: time.Second,
		Uploads: reviewUpload(),
		Faults: []Fault{
			// The slowdown ends before the next window, so the new
			// consumer's calls are counted as soon as they are sent.
			{Kind: Latency, At: 0, For: 8 * time.Second, Value: 500 * time.Millisecond},
			{Kind: RedisLinkCut, OnCall: true, Lag: 50 * time.Millisecond, For: 10 * time.Second},
			{Kind: RollingRestart, OnCall: true, Lag: 250 * time.Millisecond},
		}}
	_, w := runScenario(t, bin, sc)
	logCalls(t, w)
	if n := limit429s(w); n != 0 {
		t.Errorf("%d × 429 from the limit, want 0: the drained consumer's calls were not in the log the new consumer read", n)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.consumers[0]
	if old.termAt.IsZero() || old.exitAt.IsZero() {
		t.Fatalf("consumer 0 was not SIGTERMed by the deploy, or did not exit")
	}
	if took := old.exitAt.Sub(old.termAt); took > sc.SessionTimeout() {
		t.Errorf("consumer 0 exited %.1fs after SIGTERM, past the session timeout (%s): its drain overran drain + 2 × heartbeat ≤ session; its last lines:\n%s", took.Seconds(), sc.SessionTimeout(), old.out.Tail(25))
	} else {
		t.Logf("consumer 0 exited %.1fs after SIGTERM (session %s)", took.Seconds(), sc.SessionTimeout())
	}
	out := old.out.String()
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "offset commit refused") && (strings.Contains(line, "final=true") || strings.Contains(line, `"final":true`)) {
			t.Errorf("consumer 0's final commit was refused: %s", line)
		}
	}
	if old.err != nil {
		t.Errorf("consumer 0 exited with %v after SIGTERM, want a clean exit", old.err)
	}
}

// TestFaultReviewReshardIsNotALoss: a Redis Cluster world whose busiest
// seller's hash slot is moved to another master four times, 4 s apart,
// while the seller calls (60 rows at 10 per 4 s). A reshard moves the
// throttle's state whole: no consumer warns of a loss (the judge counts the
// warnings), and the seller is not held: no gap between its calls longer
// than a window and the call timeout.
func TestFaultReviewReshardIsNotALoss(t *testing.T) {
	bin := testbin.Build(t, "producer", "consumer")
	u := Upload{At: time.Second, Seller: "seller-a", Name: "seller-a-1.csv", Note: "first upload"}
	for j := range 60 {
		u.Rows = append(u.Rows, Row{SKU: fmt.Sprintf("a-%03d", j+1), Price: 1000 + 10*j})
	}
	sc := Scenario{Seed: -4, Family: "fault review: reshard", Policy: "sliding", Cluster: true,
		Limit: 10, Window: 4 * time.Second, Margin: 100 * time.Millisecond,
		Consumers: 2, Partitions: 2, LedgerLease: 3 * time.Second, RetryAttempts: 5,
		Uploads: []Upload{u}}
	for i := range 4 {
		sc.Faults = append(sc.Faults, Fault{Kind: SlotMigrate, At: time.Duration(4+4*i) * time.Second, Target: "seller-a"})
	}
	v, w := runScenario(t, bin, sc)
	var gap time.Duration
	var last time.Time
	for _, c := range w.sb.Calls() {
		if c.Seller != "seller-a" {
			continue
		}
		if !last.IsZero() && c.Received.Sub(last) > gap {
			gap = c.Received.Sub(last)
		}
		last = c.Received
	}
	t.Logf("%d slot migrations: %d warnings that Redis lost the throttle's state; the seller's longest gap between calls %.1fs", v.migrations, v.lossWarnings, gap.Seconds())
	if v.migrations != 4 || v.lossWarnings != 0 {
		t.Errorf("%d warnings of a loss over %d migrations, want 0 over 4", v.lossWarnings, v.migrations)
	}
	if limit := sc.Window + sc.CallTimeout(); gap > limit {
		t.Errorf("the seller waited %.1fs between two calls, more than a window and the call timeout (%s): held as after a loss", gap.Seconds(), limit)
	}
}
