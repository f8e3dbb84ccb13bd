package circuit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

// TestSellerCalls: a seller's page asks how the marketplace answers that
// seller. One seller whose every call fails does not open the circuit (its
// failures are its own), so the circuit's state cannot tell its page; the
// seller's failing streak can: it grows with each failure, outlives the
// window (a seller at its limit calls in bursts a limit window apart), and
// ends with the seller's first answered call, which is reported at once,
// not batched. Whose failing it is: the seller's own once another seller
// is answered after its streak began, an outage when others fail with it;
// the circuit's opening ends every streak.
func TestSellerCalls(t *testing.T) {
	s := fast()
	ctx := context.Background()
	// Which bucket a call lands in is the point of the first part, and a
	// busy machine can push a call into the next bucket: that part runs
	// again on a fresh Redis when a call did not land where it had to.
	var b *Breaker
	for try := 1; ; try++ {
		srv := testredis.Start(t)
		b = newBreaker(t, srv.Client(), s)
		if whoseFailing(t, b, srv.Client()) {
			break
		}
		if try == 3 {
			t.Fatalf("in 3 tries the calls never landed in the buckets they were sent in (%v wide): the machine is too slow for this test", s.Window/time.Duration(s.Buckets))
		}
		t.Logf("try %d: a call landed a bucket late; again on a fresh Redis", try)
	}
	read := func(seller string) SellerCalls {
		t.Helper()
		c, err := b.Seller(ctx, seller)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The first answered call ends the streak as it comes: the window's
	// 3 failures still outnumber it, yet a is not failing.
	call(t, b, "a", "a:3", Success)
	if c := read("a"); c.Streak != 0 || c.Failing() || c.Answered != 1 || c.Failures != 3 {
		t.Errorf("seller a after its first answered call: %+v (failing %v); want the streak ended at once", c, c.Failing())
	}
	// A seller answered as often as it failed is not failing: random errors.
	for i := range 6 {
		call(t, b, "c", fmt.Sprintf("c:%d", i), []Outcome{Failure, Answered}[i%2])
	}
	if c := read("c"); c.Failures != 3 || c.Streak != 0 || c.Failing() {
		t.Errorf("seller c, 3 failed and 3 answered: %+v (failing %v), want 3 failures, not failing", c, c.Failing())
	}
	// The counts age out with the window's buckets, within a window and a
	// bucket of the last call; a streak outlives them.
	for i := range 3 {
		call(t, b, "a", fmt.Sprintf("a:%d", 10+i), Failure)
	}
	last := time.Now()
	testwait.For(t, 2*s.Window, "seller a's calls age out", func() bool { c := read("a"); return c.Failures == 0 && c.Answered == 0 })
	if took := time.Since(last); took > s.Window+2*s.Window/time.Duration(s.Buckets) {
		t.Errorf("seller a's calls aged out %v after its last, more than a window and a bucket (%v)", took, s.Window)
	}
	if c := read("a"); c.Streak != 3 || !c.Failing() || !c.Own() {
		t.Errorf("seller a between bursts, every call out of the window: %+v (failing %v, own %v), want its streak of 3 kept, failing, its own", c, c.Failing(), c.Own())
	}

	// Sellers d and e fail together while nobody is answered (the others'
	// answers left the window), the circuit not open yet (20 calls
	// needed): an outage is starting, for each of them.
	for i := range 6 {
		seller := []string{"d", "e"}[i%2]
		if _, st := call(t, b, seller, fmt.Sprintf("%s:%d", seller, i), Failure); st.State != Closed {
			t.Fatalf("6 failures opened the circuit of MinCalls 20: %+v", st)
		}
	}
	for _, seller := range []string{"d", "e"} {
		if c := read(seller); c.Streak != 3 || !c.Failing() || !c.Outage() || c.Own() {
			t.Errorf("seller %s failing with the other, nobody answered: %+v (failing %v, outage %v, own %v); want an outage, not its own failing", seller, c, c.Failing(), c.Outage(), c.Own())
		}
	}
	// The circuit's opening ends every streak: the outage's failures are
	// the outage's.
	for i := 0; peek(t, b).State == Closed; i++ {
		if i == 60 {
			t.Fatal("60 failures of sellers d, e and f did not open the circuit")
		}
		seller := []string{"d", "e", "f"}[i%3]
		call(t, b, seller, fmt.Sprintf("%s:%d", seller, 10+i), Failure)
	}
	for _, seller := range []string{"a", "d", "e"} {
		if c := read(seller); c.Streak != 0 || c.Failing() {
			t.Errorf("seller %s once the circuit opened: %+v, want no streak", seller, c)
		}
	}
}

// TestSellerCallsWithoutTheConsumersSettings: the producer reads a seller's
// calls with its own Settings (the defaults: it has no --circuit-window),
// while the consumers count them in a window of another width. The ring
// tells its reader its own shape: read with another width every bucket
// would look stale, and a seller's page would never say the marketplace
// failed its rows.
func TestSellerCallsWithoutTheConsumersSettings(t *testing.T) {
	srv := testredis.Start(t)
	ctx := context.Background()
	for _, window := range []time.Duration{2 * time.Second, 50 * time.Second} {
		t.Run(window.String(), func(t *testing.T) {
			s := fast()
			s.Name, s.Window = "w"+window.String(), window
			consumer := newBreaker(t, srv.Client(), s)
			producer := newBreaker(t, srv.Client(), Settings{Name: s.Name})
			for i := range 4 {
				call(t, consumer, "a", fmt.Sprintf("a:%d", i), Failure)
			}
			c, err := producer.Seller(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if c.Failures != 4 || c.Streak != 4 || !c.Failing() {
				t.Errorf("the consumers count in a %v window; read with the default settings seller a has %+v (failing %v), want 4 failures, failing", window, c, c.Failing())
			}
		})
	}
}

// whoseFailing is TestSellerCalls' first part: seller a fails alone beside
// b's answers, and b's answers prove a's failing its own only from two
// buckets after a's streak began. It reports false, having checked what it
// could, when a call did not land in the bucket it was sent in.
func whoseFailing(t *testing.T, b *Breaker, rdb redis.UniversalClient) bool {
	t.Helper()
	ctx := context.Background()
	width := (b.s.Window / time.Duration(b.s.Buckets)).Microseconds()
	read := func(seller string) SellerCalls {
		t.Helper()
		c, err := b.Seller(ctx, seller)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := read("a"); c.Failures != 0 || c.Answered != 0 || c.Streak != 0 || c.Failing() || c.Now.IsZero() {
		t.Fatalf("no calls yet: %+v (failing %v), want none, with the Redis clock", c, c.Failing())
	}
	for i := range 6 {
		call(t, b, "b", fmt.Sprintf("b:%d", i), Success)
	}
	first := bucketStart(t, rdb, width, 0)
	for i := range 3 {
		if _, st := call(t, b, "a", fmt.Sprintf("a:%d", i), Failure); st.State != Closed {
			t.Fatalf("one seller's failures opened the circuit: %+v", st)
		}
	}
	c := read("a")
	if c.Failures != 3 || c.Answered != 0 || c.Streak != 3 || !c.Failing() || c.OthersCalling != 1 || c.OthersFailing != 0 {
		t.Errorf("seller a after 3 failed calls beside b's answers: %+v (failing %v), want a streak of 3, failing, b calling", c, c.Failing())
	}
	if c.Now.UnixMicro()/width != first {
		return false // a's streak may have begun a bucket later
	}
	// b's answers came before a's streak began: they prove nothing yet
	// (an outage's first failures look the same). b answered after it
	// does.
	if c.Own() || c.Outage() {
		t.Errorf("seller a, b answered only before a's failures: own %v, outage %v; want neither yet", c.Own(), c.Outage())
	}
	if bucketStart(t, rdb, width, first+1) != first+1 {
		return false
	}
	call(t, b, "b", "b:6", Success)
	call(t, b, "b", "b:7", Failure) // flushes b's batch: this one is b's last, failed
	if c := read("a"); c.OthersAnswered != 0 || c.Own() {
		t.Errorf("seller a, b's last call failed: %+v (own %v); b's answers prove nothing", c, c.Own())
	}
	call(t, b, "b", "b:8", Success) // b's first answer after its failure: reported at once
	c = read("a")
	if c.Now.UnixMicro()/width != first+1 {
		return false
	}
	// In the bucket right after a's first failure: b's call may have been
	// sent before it (an outage's calls in flight are answered so), so it
	// proves nothing yet either.
	if c.OthersAnswered != 0 || c.Own() {
		t.Errorf("seller a, b answered in the bucket after a's first failure: %+v (own %v); want no proof yet", c, c.Own())
	}
	bucketStart(t, rdb, width, first+2) // two buckets after a's first failure, or later
	call(t, b, "b", "b:9", Failure)
	call(t, b, "b", "b:10", Success) // reported at once, as the first answer after a failure
	if c := read("a"); c.OthersAnswered != 1 || !c.Own() || c.Outage() {
		t.Errorf("seller a, b answered after a's failures began: %+v (own %v, outage %v), want a's own failing", c, c.Own(), c.Outage())
	}
	if age := c.Now.Sub(c.LastFailure); age < 0 || age > time.Second {
		t.Errorf("seller a's last failure %v before the reading, want just now", age)
	}
	if c := read("b"); c.Failures != 2 || c.Streak != 0 || c.Failing() {
		t.Errorf("seller b, answered 9 times and failed twice: %+v (failing %v)", c, c.Failing())
	}
	return true
}

// bucketStart waits for the Redis clock to be early (its first quarter) in
// bucket n or a later one, of buckets width µs wide, and returns which.
func bucketStart(t *testing.T, rdb redis.UniversalClient, width, n int64) int64 {
	t.Helper()
	for {
		now, err := rdb.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		us := now.UnixMicro()
		if us/width >= n && us%width < width/4 {
			return us / width
		}
		time.Sleep(time.Duration(width-us%width)*time.Microsecond + time.Millisecond)
	}
}

// TestABatchIsCountedWhenItsAnswersCame: a process sends its batch of
// answered calls with its next report, which can come long after them (a
// failure of another seller, say). Counted when it reached Redis, a batch
// of answers from before an outage looked like another seller answered
// after a's failures began, and ended a's failing streak with an answer
// older than the failures: a's page said the marketplace failed a's rows
// alone, or not at all. The batch is counted in the bucket of its newest
// answer and ends no streak that began after it: a stale batch proves
// nothing, a fresh one still does.
func TestABatchIsCountedWhenItsAnswersCame(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s := fast()
	s.Window = 5 * time.Second // buckets of 500 ms: a report's own transit stays well within one
	width := (s.Window / time.Duration(s.Buckets)).Microseconds()
	sa := s
	sa.TrustClosed = -1 // seller a's failures come from a process that asks Redis every time
	pa := newBreaker(t, rdb, sa)
	sb := s
	sb.TrustClosed = time.Minute // the other process batches for as long as this test runs
	pb := newBreaker(t, rdb, sb)
	answeredBy := func(seller string) (calls int, newest int64) {
		t.Helper()
		_, window := pb.Keys()
		m, err := rdb.HGetAll(ctx, window).Result()
		if err != nil {
			t.Fatal(err)
		}
		newest = -1
		for i := range s.Buckets {
			id, _ := strconv.ParseInt(m[fmt.Sprintf("%d:id", i)], 10, 64)
			for line := range strings.SplitSeq(m[fmt.Sprintf("%d:ok", i)], "\n") {
				if x, n, _ := strings.Cut(line, "\t"); x == seller {
					c, _ := strconv.Atoi(n)
					calls += c
					newest = max(newest, id)
				}
			}
		}
		return calls, newest
	}
	readA := func() SellerCalls {
		t.Helper()
		c, err := pa.Seller(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// The first Allow learns that the circuit is closed: every answer
	// after it waits in the batch, a's too.
	for i := range 3 {
		call(t, pb, "b", fmt.Sprintf("b:%d", i), Success)
	}
	call(t, pb, "a", "a:0", Success)
	if n, _ := answeredBy("b"); n != 0 {
		t.Fatalf("b's answered calls in the window before the batch is sent: %d, want 0 (batched)", n)
	}
	first := bucketStart(t, rdb, width, 0)
	for i := 1; i <= 3; i++ {
		call(t, pa, "a", fmt.Sprintf("a:%d", i), Failure)
	}
	// Three buckets later the batching process reports another seller's
	// failure, and its batch with it.
	sent := bucketStart(t, rdb, width, first+3)
	call(t, pb, "c", "c:0", Failure)
	if n, newest := answeredBy("b"); n != 1 || newest > first {
		t.Errorf("the batch sent in bucket %d: b has %d answered calls, the newest in bucket %d; want 1 (a batch of two sellers names each once), none after bucket %d where a's failures began", sent, n, newest, first)
	}
	if c := readA(); c.Streak != 3 || !c.Failing() || c.OthersAnswered != 0 || c.Own() {
		t.Errorf("seller a, answers from before its failures sent later: %+v (failing %v, own %v); want its streak of 3 kept, failing, and no proof that the API answers others", c, c.Failing(), c.Own())
	}

	// A batch sent as it fills is counted now: b answered after a's
	// failures began, so a's failing is its own.
	call(t, pb, "b", "b:3", Success)
	call(t, pb, "d", "d:0", Failure)
	if n, newest := answeredBy("b"); n != 2 || newest < first+3 {
		t.Errorf("a fresh batch: b has %d answered calls, the newest in bucket %d; want 2, the newest in bucket %d or later", n, newest, first+3)
	}
	if c := readA(); c.Streak != 3 || c.OthersAnswered != 1 || !c.Own() {
		t.Errorf("seller a, b answered three buckets after a's failures began: %+v (own %v); want a's own failing", c, c.Own())
	}
	// And a fresh answer of a's own, batched, ends its streak.
	call(t, pb, "a", "a:4", Success)
	call(t, pb, "e", "e:0", Failure)
	if c := readA(); c.Streak != 0 || c.Failing() {
		t.Errorf("seller a answered after its failures, in a batch: %+v (failing %v); want the streak ended", c, c.Failing())
	}
}
