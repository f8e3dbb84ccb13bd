package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/internal/testredis"
)

const (
	hashA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	hashB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	rowA  = "upload-a:3"
	rowB  = "upload-b:7"
)

// The transitions run against a single redis-server and a 3-master Redis
// Cluster: every script touches only the seller's hash-tagged key.
func TestTransitions(t *testing.T) {
	t.Run("single", func(t *testing.T) { transitions(t, testredis.Start(t).Client()) })
	t.Run("cluster", func(t *testing.T) { transitions(t, testredis.StartCluster(t, 3).Client()) })
}

func transitions(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	const lease = 300 * time.Millisecond
	l := New(rdb, Options{Lease: time.Minute})
	short := New(rdb, Options{Lease: lease})

	// claimFrom claims for a row read from the Kafka record from, claim for
	// one whose record is not known.
	claimWith := func(t *testing.T, l *Ledger, seller, row, hash, from string) Claim {
		t.Helper()
		asked := time.Now()
		c, err := l.Claim(ctx, seller, "SKU-1", row, hash, from)
		if err != nil {
			t.Fatal(err)
		}
		// The decision's time is Redis's clock, the machine's here.
		if d := c.At.Sub(asked); d < -time.Second || d > time.Second {
			t.Errorf("claim decided at %v, %v from when it was asked", c.At, d)
		}
		return c
	}
	claim := func(t *testing.T, l *Ledger, seller, row, hash string) Claim {
		t.Helper()
		return claimWith(t, l, seller, row, hash, "")
	}
	claimFrom := func(t *testing.T, seller, row, hash, from string) Claim {
		t.Helper()
		return claimWith(t, l, seller, row, hash, from)
	}
	setAside := func(t *testing.T, seller, row, from string) bool {
		t.Helper()
		ok, err := l.SetAside(ctx, seller, "SKU-1", row, from, AsideNote{Class: "transient", Attempts: 3, Reason: "status 503"})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	mark := func(t *testing.T, seller, row, hash, pid string) Entry {
		t.Helper()
		e, err := l.Mark(ctx, seller, "SKU-1", row, hash, pid)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	release := func(t *testing.T, seller, row string, forget bool) bool {
		t.Helper()
		ok, err := l.Release(ctx, seller, "SKU-1", row, forget)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	lookup := func(t *testing.T, seller string) (Entry, bool) {
		t.Helper()
		m, err := l.Lookup(ctx, seller, []string{"SKU-1"})
		if err != nil {
			t.Fatal(err)
		}
		e, ok := m["SKU-1"]
		return e, ok
	}
	want := func(t *testing.T, c Claim, v Verdict, callKey string) {
		t.Helper()
		if c.Verdict != v || c.CallKey != callKey {
			t.Fatalf("claim = %v with key %q, want %v with key %q (%+v)", c.Verdict, c.CallKey, v, callKey, c)
		}
	}

	cases := []struct {
		name string
		run  func(t *testing.T, seller string)
	}{
		{"free SKU: the row claims it and calls with its own key", func(t *testing.T, s string) {
			c := claim(t, l, s, rowA, hashA)
			want(t, c, Call, rowA)
			if c.Entry.State != Claimed || c.Entry.Row != rowA || c.Entry.Hash != hashA || time.Until(c.Entry.At) < 50*time.Second {
				t.Errorf("entry = %+v, want claimed by %s for about a minute", c.Entry, rowA)
			}
		}},
		{"own claim again (a redelivery or the next attempt) renews it", func(t *testing.T, s string) {
			first := claim(t, short, s, rowA, hashA)
			time.Sleep(lease / 2)
			again := claim(t, short, s, rowA, hashA)
			want(t, again, Call, rowA)
			if !again.Entry.At.After(first.Entry.At) {
				t.Errorf("lease end %v not moved past %v", again.Entry.At, first.Entry.At)
			}
		}},
		{"another row's live claim: wait, no call", func(t *testing.T, s string) {
			claim(t, l, s, rowA, hashA)
			c := claim(t, l, s, rowB, hashA)
			want(t, c, Wait, "")
			if c.Entry.Row != rowA || c.RetryIn < 50*time.Second || c.RetryIn > time.Minute {
				t.Errorf("wait = %+v, want rowA's claim with about a minute to run", c)
			}
		}},
		{"lapsed lease, same content: taken over, calling with the first claimer's key", func(t *testing.T, s string) {
			claim(t, short, s, rowA, hashA)
			time.Sleep(lease + 100*time.Millisecond)
			c := claim(t, short, s, rowB, hashA)
			want(t, c, Call, rowA)
			if c.Entry.Row != rowB {
				t.Errorf("entry = %+v, want claimed by %s", c.Entry, rowB)
			}
			// The first row, back, now waits for the second.
			want(t, claim(t, short, s, rowA, hashA), Wait, "")
		}},
		{"lapsed lease, other content: taken over, still the first key", func(t *testing.T, s string) {
			claim(t, short, s, rowA, hashA)
			time.Sleep(lease + 100*time.Millisecond)
			c := claim(t, short, s, rowB, hashB)
			want(t, c, Call, rowA)
			if c.Entry.Hash != hashB {
				t.Errorf("entry hash = %s, want the new claimer's %s", c.Entry.Hash, hashB)
			}
		}},
		{"registered, same content: done, naming the product and the row", func(t *testing.T, s string) {
			claim(t, l, s, rowA, hashA)
			if e := mark(t, s, rowA, hashA, "P-1"); e.State != Registered || e.ProductID != "P-1" || e.Row != rowA {
				t.Fatalf("mark = %+v", e)
			}
			c := claim(t, l, s, rowB, hashA)
			want(t, c, Done, "")
			if c.Entry.ProductID != "P-1" || c.Entry.Row != rowA || c.Entry.Hash != hashA {
				t.Errorf("entry = %+v, want P-1 registered by %s", c.Entry, rowA)
			}
			// The registering row's own redelivery sees its own registration.
			if c := claim(t, l, s, rowA, hashA); c.Verdict != Done || c.Entry.Row != rowA {
				t.Errorf("own redelivery: %+v", c)
			}
		}},
		{"registered, other content: conflict", func(t *testing.T, s string) {
			mark(t, s, rowA, hashA, "P-2")
			c := claim(t, l, s, rowB, hashB)
			want(t, c, Conflict, "")
			if c.Entry.ProductID != "P-2" {
				t.Errorf("entry = %+v, want P-2", c.Entry)
			}
			if e, _ := lookup(t, s); e.State != Registered || e.Hash != hashA {
				t.Errorf("the conflict changed the entry: %+v", e)
			}
		}},
		{"mark twice: the first registration stays", func(t *testing.T, s string) {
			mark(t, s, rowA, hashA, "P-3")
			if e := mark(t, s, rowB, hashA, "P-4"); e.ProductID != "P-3" || e.Row != rowA {
				t.Errorf("second mark returned %+v, want the first (P-3 by %s)", e, rowA)
			}
		}},
		{"mark replaces any claim: a registration is a fact", func(t *testing.T, s string) {
			claim(t, l, s, rowB, hashA)
			if e := mark(t, s, rowA, hashA, "P-5"); e.State != Registered || e.Row != rowA {
				t.Errorf("mark over another row's claim = %+v", e)
			}
		}},
		{"release forget: the entry is gone, the next row uses its own key", func(t *testing.T, s string) {
			claim(t, l, s, rowA, hashA)
			if release(t, s, rowB, true) {
				t.Fatal("another row released rowA's claim")
			}
			if !release(t, s, rowA, true) {
				t.Fatal("rowA could not release its claim")
			}
			if _, ok := lookup(t, s); ok {
				t.Fatal("entry still there after forget")
			}
			want(t, claim(t, l, s, rowB, hashB), Call, rowB)
		}},
		{"release keep: the lease ends at once, the key stays", func(t *testing.T, s string) {
			claim(t, l, s, rowA, hashA)
			if !release(t, s, rowA, false) {
				t.Fatal("rowA could not release its claim")
			}
			if e, ok := lookup(t, s); !ok || e.State != Claimed || !e.At.IsZero() {
				t.Fatalf("after keep: %+v, %v; want a claim with no lease", e, ok)
			}
			want(t, claim(t, l, s, rowB, hashA), Call, rowA)
		}},
		{"a claim only its own row held is not shared, renewed or not", func(t *testing.T, s string) {
			if c := claim(t, short, s, rowA, hashA); c.Entry.Shared {
				t.Fatalf("a new claim is shared: %+v", c.Entry)
			}
			if c := claim(t, short, s, rowA, hashA); c.Entry.Shared {
				t.Fatalf("a renewed claim is shared: %+v", c.Entry)
			}
		}},
		{"release forget after a takeover keeps the key: the other row may have registered under it", func(t *testing.T, s string) {
			claim(t, short, s, rowA, hashA)
			time.Sleep(lease + 100*time.Millisecond)
			if c := claim(t, short, s, rowB, hashB); c.Verdict != Call || c.CallKey != rowA || !c.Entry.Shared {
				t.Fatalf("takeover: %+v, want a call with %s, shared", c, rowA)
			}
			// rowB registers under rowA's key and crashes before marking; its
			// lease lapses, rowA takes its key back and the API refuses rowA's
			// own content under it.
			time.Sleep(lease + 100*time.Millisecond)
			c := claim(t, short, s, rowA, hashA)
			want(t, c, Call, rowA)
			if !c.Entry.Shared {
				t.Fatalf("taken back: %+v, want still shared", c.Entry)
			}
			if !release(t, s, rowA, true) {
				t.Fatal("rowA could not release its claim")
			}
			if e, ok := lookup(t, s); !ok || e.State != Claimed || e.CallKey != rowA || !e.At.IsZero() {
				t.Fatalf("after forget of a shared key: %+v, %v; want the claim kept with key %s and no lease", e, ok, rowA)
			}
			// rowB's redelivery calls with rowA's key again: a replay.
			want(t, claim(t, l, s, rowB, hashB), Call, rowA)
		}},
		{"release forget by a row that inherited the key keeps it", func(t *testing.T, s string) {
			claim(t, short, s, rowA, hashA)
			time.Sleep(lease + 100*time.Millisecond)
			want(t, claim(t, short, s, rowB, hashB), Call, rowA)
			if !release(t, s, rowB, true) {
				t.Fatal("rowB could not release its claim")
			}
			if e, ok := lookup(t, s); !ok || e.CallKey != rowA {
				t.Fatalf("after forget by the heir: %+v, %v; want the claim kept with key %s", e, ok, rowA)
			}
		}},
		{"a claim of an older version (six fields) is read as shared and not forgotten", func(t *testing.T, s string) {
			rdb.HSet(ctx, Key(s), "SKU-1", strings.Join([]string{"c", hashA, rowA, rowA, "", "0"}, "\t"))
			if e, _ := lookup(t, s); !e.Shared {
				t.Fatalf("old entry: %+v, want shared", e)
			}
			want(t, claim(t, l, s, rowA, hashA), Call, rowA)
			release(t, s, rowA, true)
			if e, ok := lookup(t, s); !ok || e.CallKey != rowA {
				t.Fatalf("after forget: %+v, %v; want the claim kept", e, ok)
			}
		}},
		{"set aside: a re-read of the dead-lettered record finishes, a copy from another record calls", func(t *testing.T, s string) {
			const read, copied = "rows/2/40", "rows/0/7"
			want(t, claimFrom(t, s, rowA, hashA, read), Call, rowA)
			if !setAside(t, s, rowA, read) {
				t.Fatal("rowA's claim was not released by its set-aside")
			}
			if e, _ := lookup(t, s); e.State != Claimed || !e.At.IsZero() || e.CallKey != rowA {
				t.Fatalf("entry after the set-aside: %+v, want rowA's claim released with its key", e)
			}
			for range 2 { // answering aside writes nothing: twice is the same
				c := claimFrom(t, s, rowA, hashA, read)
				want(t, c, Aside, "")
				if c.Aside != (AsideNote{Class: "transient", Attempts: 3, Reason: "status 503"}) {
					t.Fatalf("aside note = %+v, want the dead letter's", c.Aside)
				}
			}
			// redrive publishes the row again: another record, the kept key.
			want(t, claimFrom(t, s, rowA, hashA, copied), Call, rowA)
			// The old record stays aside, whatever the copy does.
			want(t, claimFrom(t, s, rowA, hashA, read), Aside, "")
		}},
		{"set aside holds whatever becomes of the SKU: another row's claim, its release, its registration", func(t *testing.T, s string) {
			const read = "rows/0/1"
			claimFrom(t, s, rowA, hashA, read)
			setAside(t, s, rowA, read)
			c := claimFrom(t, s, rowB, hashA, "rows/1/9")
			want(t, c, Call, rowA)
			if !c.Entry.Shared {
				t.Fatalf("takeover of a set-aside claim: %+v, want shared", c.Entry)
			}
			want(t, claimFrom(t, s, rowA, hashA, read), Aside, "")
			release(t, s, rowB, false)
			want(t, claimFrom(t, s, rowA, hashA, read), Aside, "")
			mark(t, s, rowB, hashA, "P-9")
			want(t, claimFrom(t, s, rowA, hashA, read), Aside, "")
		}},
		{"set aside by a row that no longer holds the claim: recorded, nothing released", func(t *testing.T, s string) {
			claimFrom(t, s, rowB, hashA, "rows/1/2") // rowA's lease lapsed and rowB took the SKU
			if setAside(t, s, rowA, "rows/0/1") {
				t.Fatal("rowA's set-aside released rowB's claim")
			}
			if e, _ := lookup(t, s); e.Row != rowB || e.At.IsZero() {
				t.Fatalf("entry after another row's set-aside: %+v, want rowB's live claim", e)
			}
			want(t, claimFrom(t, s, rowA, hashA, "rows/0/1"), Aside, "")
		}},
		{"a claim without its record never reads as set aside", func(t *testing.T, s string) {
			claimFrom(t, s, rowA, hashA, "rows/0/1")
			setAside(t, s, rowA, "rows/0/1")
			want(t, claimFrom(t, s, rowA, hashA, ""), Call, rowA)
		}},
		{"set-aside records expire with their retention", func(t *testing.T, s string) {
			setAside(t, s, rowA, "rows/0/4")
			if ttl := rdb.PTTL(ctx, AsideKey(s)).Val(); ttl < DefaultAsideRetention-time.Minute || ttl > DefaultAsideRetention {
				t.Errorf("TTL of the set-aside records = %v, want about %v", ttl, DefaultAsideRetention)
			}
		}},
		{"release of a registered SKU changes nothing", func(t *testing.T, s string) {
			mark(t, s, rowA, hashA, "P-6")
			if release(t, s, rowA, true) {
				t.Fatal("released a registration")
			}
			if e, ok := lookup(t, s); !ok || e.State != Registered {
				t.Fatalf("after release: %+v", e)
			}
		}},
		{"every write keeps the ledger for the retention", func(t *testing.T, s string) {
			claim(t, l, s, rowA, hashA)
			ttl := rdb.PTTL(ctx, Key(s)).Val()
			if ttl < DefaultRetention-time.Minute || ttl > DefaultRetention {
				t.Errorf("TTL after a claim = %v, want about %v", ttl, DefaultRetention)
			}
			rdb.PExpire(ctx, Key(s), time.Hour)
			mark(t, s, rowA, hashA, "P-7")
			if ttl := rdb.PTTL(ctx, Key(s)).Val(); ttl < DefaultRetention-time.Minute {
				t.Errorf("TTL after a mark = %v, want about %v", ttl, DefaultRetention)
			}
		}},
		{"a malformed entry is an error, not a guess", func(t *testing.T, s string) {
			rdb.HSet(ctx, Key(s), "SKU-1", "garbage")
			if _, err := l.Claim(ctx, s, "SKU-1", rowA, hashA, ""); err == nil || !strings.Contains(err.Error(), "SKU-1") {
				t.Errorf("claim of a malformed entry: err = %v, want one naming SKU-1", err)
			}
			if _, err := l.Lookup(ctx, s, []string{"SKU-1"}); !errors.Is(err, ErrUnreadable) {
				t.Errorf("lookup of a malformed entry: err = %v, want ErrUnreadable", err)
			}
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, fmt.Sprintf("seller-%d", i)) })
	}

	t.Run("lookup reads many SKUs in one call", func(t *testing.T) {
		s := "seller-lookup"
		for i := range 5 {
			if _, err := l.Mark(ctx, s, fmt.Sprintf("SKU-%d", i), rowA, hashA, fmt.Sprintf("P-%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		m, err := l.Lookup(ctx, s, []string{"SKU-0", "SKU-4", "SKU-9"})
		if err != nil {
			t.Fatal(err)
		}
		if len(m) != 2 || m["SKU-0"].ProductID != "P-0" || m["SKU-4"].ProductID != "P-4" {
			t.Errorf("lookup = %+v, want SKU-0 and SKU-4 only", m)
		}
		if m, err := l.Lookup(ctx, s, nil); err != nil || len(m) != 0 {
			t.Errorf("lookup of nothing = %v, %v", m, err)
		}
	})

	t.Run("many rows claim one SKU at once: one calls", func(t *testing.T) {
		s := "seller-race"
		var calls, waits sync.Map
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				row := fmt.Sprintf("upload-%d:1", i)
				c, err := l.Claim(ctx, s, "SKU-1", row, hashA, "")
				if err != nil {
					t.Error(err)
					return
				}
				switch c.Verdict {
				case Call:
					calls.Store(row, c.CallKey)
				case Wait:
					waits.Store(row, true)
				}
			})
		}
		wg.Wait()
		n, w := 0, 0
		calls.Range(func(k, v any) bool { n++; return true })
		waits.Range(func(k, v any) bool { w++; return true })
		if n != 1 || w != 39 {
			t.Errorf("%d rows may call and %d wait, want 1 and 39", n, w)
		}
	})
}

func TestInvalidArguments(t *testing.T) {
	l := New(testredis.Start(t).Client(), Options{})
	ctx := context.Background()
	for _, c := range []struct{ seller, sku, row, hash string }{
		{"", "S", rowA, hashA}, {"s", "", rowA, hashA}, {"s", "S", "", hashA}, {"s", "S", "a\tb", hashA}, {"s", "S", rowA, ""},
	} {
		if _, err := l.Claim(ctx, c.seller, c.sku, c.row, c.hash, ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("Claim(%q, %q, %q, %q): err = %v, want ErrInvalid", c.seller, c.sku, c.row, c.hash, err)
		}
	}
	if _, err := l.Mark(ctx, "s", "S", rowA, hashA, "P\t1"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Mark of a product id with a tab: err = %v, want ErrInvalid", err)
	}
	if _, err := l.Claim(ctx, "s", "S", rowA, hashA, "rows\t0"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Claim from a record with a tab: err = %v, want ErrInvalid", err)
	}
	for _, c := range []struct{ from, class string }{{"", "transient"}, {"rows/0/1", "a\tb"}, {"rows\n0", "x"}} {
		if _, err := l.SetAside(ctx, "s", "S", rowA, c.from, AsideNote{Class: c.class}); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetAside(record %q, class %q): err = %v, want ErrInvalid", c.from, c.class, err)
		}
	}
}

// TestMemoryPerSKU measures what a registered SKU costs in Redis (the
// figure ARCHITECTURE.md quotes): 10,000 SKUs of one seller, with realistic
// field sizes, then MEMORY USAGE of the seller's hash.
func TestMemoryPerSKU(t *testing.T) {
	rdb := testredis.Start(t).Client()
	ctx := context.Background()
	l := New(rdb, Options{})
	const n = 10000
	if err := l.mark.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	pipe := rdb.Pipeline()
	for i := range n {
		// A 12-character SKU, a product id like the API's, a row's key.
		l.mark.EvalSha(ctx, pipe, []string{Key("seller-mem")}, fmt.Sprintf("ABC-%08d", i), fmt.Sprintf("9f86d081884c7d65:%d", i%500+2),
			hashA, fmt.Sprintf("P%010d", 1000000+i), DefaultRetention.Milliseconds())
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	used, err := rdb.MemoryUsage(ctx, Key("seller-mem"), 0).Result()
	if err != nil {
		t.Fatal(err)
	}
	per := float64(used) / n
	t.Logf("%d SKUs: MEMORY USAGE %d bytes, %.0f bytes per SKU", n, used, per)
	if per > 250 {
		t.Errorf("%.0f bytes per SKU; ARCHITECTURE.md quotes about 150", per)
	}
}

func TestAlreadyRegisteredNamesTheProduct(t *testing.T) {
	at := time.Date(2026, 3, 2, 23, 30, 0, 0, time.FixedZone("KST", 9*3600))
	cases := []struct {
		e     Entry
		want  string
		facts map[string]string
	}{
		{Entry{ProductID: "P-17", Row: "9f86d081884c7d65:5", At: at}, "already registered as P-17 by upload 9f86d081884c7d65 row 5 on 2026-03-02; nothing was sent again",
			map[string]string{"product": "P-17", "kind": "from", "upload": "9f86d081884c7d65", "row": "5", "date": "2026-03-02", "at": "2026-03-02T14:30:00Z"}},
		{Entry{ProductID: "P-1"}, "already registered as P-1; nothing was sent again", map[string]string{"product": "P-1"}},
		{Entry{ProductID: "P-2", Row: "9f86d081884c7d65:5"}, "already registered as P-2 by upload 9f86d081884c7d65 row 5; nothing was sent again", map[string]string{"product": "P-2"}},
	}
	for _, c := range cases {
		if got := c.e.AlreadyRegistered(); got != c.want {
			t.Errorf("AlreadyRegistered() = %q, want %q", got, c.want)
		}
		if got := c.e.Facts(); !maps.Equal(got, c.facts) {
			t.Errorf("%+v: Facts() = %v, want %v", c.e, got, c.facts)
		}
	}
}

// Claims that share a call are decided in order, as one call each would be:
// the second row of a SKU waits for the first, and a malformed entry fails
// its own claim only.
func TestClaimsSharingACall(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	l := New(rdb, Options{Lease: time.Minute, Retention: time.Hour})
	if err := rdb.HSet(ctx, Key("s1"), "SKU-BAD", "garbage").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := l.writeClaims(ctx, "s1", []claimArgs{
		{sku: "SKU-A", row: rowA, hash: hashA}, {sku: "SKU-A", row: rowB, hash: hashA}, {sku: "SKU-BAD", row: rowA, hash: hashA}, {sku: "SKU-B", row: rowB, hash: hashB},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The claims read the ledger once and write it once, not a command each.
	calls := testredis.CommandCalls(t, rdb)
	if h, g, m := calls["hset"], calls["hget"], calls["hmget"]; h != 1 || g != 0 || m != 1 {
		t.Errorf("4 claims in one call ran %d HSET, %d HGET, %d HMGET; want 1, 0, 1", h, g, m)
	}
	for sku, row := range map[string]string{"SKU-A": rowA, "SKU-B": rowB} {
		if e, err := parse(rdb.HGet(ctx, Key("s1"), sku).Val()); err != nil || e.Row != row || e.State != Claimed {
			t.Errorf("%s in the ledger after the call: %+v (%v), want claimed by %s", sku, e, err, row)
		}
	}
	want := []string{"call", "wait", "error", "call"}
	for i, r := range got {
		if r.verdict != want[i] {
			t.Errorf("claim %d: verdict %q, want %q (entry %q)", i, r.verdict, want[i], r.entry)
		}
	}
	if got[2].entry != "garbage" {
		t.Errorf("the malformed claim carries %q, want the entry as stored", got[2].entry)
	}
	if e, err := parse(got[1].entry); err != nil || e.Row != rowA {
		t.Errorf("the waiting claim names %+v (%v), want the claim of %s", e, err, rowA)
	}
	if ttl := rdb.PTTL(ctx, Key("s1")).Val(); ttl <= 59*time.Minute {
		t.Errorf("ledger TTL %v after claims, want the retention (1 h)", ttl)
	}
	// Through Claim, the malformed entry is ErrUnreadable naming the SKU.
	if _, err := l.Claim(ctx, "s1", "SKU-BAD", rowA, hashA, ""); !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "SKU-BAD") {
		t.Errorf("Claim of a malformed entry: %v, want ErrUnreadable naming SKU-BAD", err)
	}
}

// TestMarksInOneBatch: the marks of a batch of calls (MarkStep) leave the ledger and give each row the answer that marking
// one by one would, in their order: a SKU registered before keeps its first
// registration, and a SKU marked twice in the batch keeps the first mark.
// The batch runs one HMGET, one HSET and one PEXPIRE, not four commands a
// mark.
func TestMarksInOneBatch(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	l := New(rdb, Options{Lease: time.Minute, Retention: time.Hour})
	if _, err := l.Mark(ctx, "s1", "SKU-OLD", rowB, hashB, "p-old"); err != nil {
		t.Fatal(err)
	}
	marks := []struct{ sku, row, product string }{
		{"SKU-1", "u:1", "p-1"}, {"SKU-OLD", "u:2", "p-2"}, {"SKU-3", "u:3", "p-3"}, {"SKU-1", "u:4", "p-4"},
	}
	for i := 5; i < 45; i++ {
		marks = append(marks, struct{ sku, row, product string }{fmt.Sprint("SKU-", i), fmt.Sprint("u:", i), fmt.Sprint("p-", i)})
	}
	reqs := make([]MarkRequest, len(marks))
	for i, m := range marks {
		reqs[i] = MarkRequest{SKU: m.sku, Row: m.row, Hash: hashA, ProductID: m.product}
	}
	reqs = append(reqs, MarkRequest{SKU: "SKU-TAB", Row: "u:99", Hash: hashA, ProductID: "p\t99"}) // refused before Redis
	results := make([]MarkResult, len(reqs))
	st, ok := l.MarkStep("s1", reqs, results)
	if !ok {
		t.Fatal("MarkStep sent nothing")
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := scriptbatch.New().Run(ctx, rdb, st); err != nil {
		t.Fatal(err)
	}
	if err := results[len(marks)].Err; !errors.Is(err, ErrInvalid) {
		t.Errorf("a mark whose product id holds a tab: %v, want ErrInvalid", err)
	}
	got := make([]Entry, len(marks))
	for i, r := range results[:len(marks)] {
		if r.Err != nil {
			t.Fatalf("mark %d: %v", i, r.Err)
		}
		got[i] = r.Entry
	}
	calls := testredis.CommandCalls(t, rdb)
	if h, g, m, p, tm := calls["hset"], calls["hget"], calls["hmget"], calls["pexpire"], calls["time"]; h != 1 || g != 0 || m != 1 || p != 1 || tm != 1 {
		t.Errorf("%d marks in one batch ran %d HSET, %d HGET, %d HMGET, %d PEXPIRE, %d TIME; want 1, 0, 1, 1, 1", len(marks), h, g, m, p, tm)
	}
	want := map[int]struct{ row, product string }{0: {"u:1", "p-1"}, 1: {rowB, "p-old"}, 2: {"u:3", "p-3"}, 3: {"u:1", "p-1"}, 44 - 5 + 4: {"u:44", "p-44"}}
	for i, w := range want {
		if got[i].Row != w.row || got[i].ProductID != w.product || got[i].State != Registered {
			t.Errorf("mark %d (%s by %s): %+v, want registered by %s as %s", i, marks[i].sku, marks[i].row, got[i], w.row, w.product)
		}
	}
	skus := make([]string, len(marks))
	for i, m := range marks {
		skus[i] = m.sku
	}
	held, err := l.Lookup(ctx, "s1", skus)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range marks {
		if e := held[m.sku]; e != got[i] {
			t.Errorf("mark %d (%s): the ledger holds %+v, the mark answered %+v", i, m.sku, e, got[i])
		}
	}
	if ttl := rdb.PTTL(ctx, Key("s1")).Val(); ttl <= 59*time.Minute {
		t.Errorf("ledger TTL %v after the marks, want the retention (1 h)", ttl)
	}
}

// TestAFullBatchOfClaimsDecidesAsOneCallEach: a call of 128 claims, more
// than a seller's window of the default limit (SKUs repeated, a registered
// one, a malformed one, a live claim of another row), decides each as one
// call per claim would, and leaves the same entries: the script's one HMGET
// and one HSET keep the order of decisions.
func TestAFullBatchOfClaimsDecidesAsOneCallEach(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	l := New(rdb, Options{Lease: time.Minute, Retention: time.Hour})
	claims := make([]claimArgs, 128)
	for i := range claims {
		claims[i] = claimArgs{sku: fmt.Sprint("SKU-", i%40), row: fmt.Sprintf("u:%d", i%3), hash: hashA}
	}
	for _, seller := range []string{"batch", "single"} {
		if _, err := l.Mark(ctx, seller, "SKU-1", rowB, hashA, "p-1"); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, Key(seller), "SKU-2", "garbage").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Claim(ctx, seller, "SKU-3", rowB, hashB, ""); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.writeClaims(ctx, "batch", claims)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(claims) {
		t.Fatalf("%d replies to %d claims", len(got), len(claims))
	}
	verdicts := map[string]int{}
	for i, c := range claims {
		one, err := l.writeClaims(ctx, "single", []claimArgs{c})
		if err != nil {
			t.Fatal(err)
		}
		verdicts[got[i].verdict]++
		if got[i].verdict != one[0].verdict {
			t.Errorf("claim %d (%s by %s): %q in the batch, %q one call each", i, c.sku, c.row, got[i].verdict, one[0].verdict)
		}
	}
	for _, v := range []string{"call", "wait", "registered", "error"} {
		if verdicts[v] == 0 {
			t.Errorf("no %q among the batch's verdicts %v: the mix does not exercise it", v, verdicts)
		}
	}
	for i := range 40 {
		sku := fmt.Sprint("SKU-", i)
		b, errB := parse(rdb.HGet(ctx, Key("batch"), sku).Val())
		s, errS := parse(rdb.HGet(ctx, Key("single"), sku).Val())
		if (errB == nil) != (errS == nil) || b.State != s.State || b.Row != s.Row || b.CallKey != s.CallKey || b.Shared != s.Shared {
			t.Errorf("%s: %+v (%v) after the batch, %+v (%v) one call each", sku, b, errB, s, errS)
		}
	}
}

// TestAsideNote: a dead letter's note comes back as it was written, its
// reason on one line and at most maxAsideReason bytes of valid UTF-8.
func TestAsideNote(t *testing.T) {
	long := strings.Repeat("가", 400) // 1,200 bytes
	for _, c := range []struct {
		name string
		in   AsideNote
		want AsideNote
	}{
		{"plain", AsideNote{"transient", 3, "status 503"}, AsideNote{"transient", 3, "status 503"}},
		{"tabs and newlines", AsideNote{"misconfigured", 5, "line 1\nline\t2\r"}, AsideNote{"misconfigured", 5, "line 1 line 2 "}},
		{"empty reason", AsideNote{"rate_limited", 0, ""}, AsideNote{"rate_limited", 0, ""}},
		{"long reason cut on a rune", AsideNote{"transient", 1, long}, AsideNote{"transient", 1, strings.Repeat("가", maxAsideReason/3)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := decodeNote(c.in.encode())
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("note = %+v, want %+v", got, c.want)
			}
		})
	}
	for _, bad := range []string{"", "transient", "transient\tx\ty"} {
		if _, err := decodeNote(bad); !errors.Is(err, ErrUnreadable) {
			t.Errorf("decodeNote(%q): err = %v, want ErrUnreadable", bad, err)
		}
	}
}
