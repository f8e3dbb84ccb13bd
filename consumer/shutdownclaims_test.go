package consumer

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
)

// heldClaims counts the SKU claims of sellers whose lease is still running
// on the Redis clock: rows that hold them, or rows that went away without
// releasing them (their SKUs then wait out the lease).
func heldClaims(t *testing.T, s *stack, sellers []string, skus []string) int {
	t.Helper()
	ctx := context.Background()
	now, err := s.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	l := ledger.New(s.rdb, ledger.Options{Retention: ledger.DefaultRetention, Lease: ledger.DefaultLease, AsideRetention: ledger.DefaultAsideRetention})
	n := 0
	for _, seller := range sellers {
		es, err := l.Lookup(ctx, seller, skus)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.State == ledger.Claimed && e.At.After(now) {
				n++
			}
		}
	}
	return n
}

// TestShutdownReleasesClaimsBeforeClosingRedis: with the circuit open, rows
// wait holding their SKU claims. SIGTERM gives them back, and each releases
// its claim before the process closes its Redis client: no claim is left to
// lapse with its lease, and no release fails on a closed connection.
func TestShutdownReleasesClaimsBeforeClosingRedis(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{partitions: 1, limit: 20, window: 2 * time.Second, margin: crashMargin, failRate: 1})
	p := s.startProcess("c1", "CIRCUIT_MIN_CALLS=4", "CIRCUIT_PROBE_MIN=30s", "CIRCUIT_PROBE_MAX=60s", "CIRCUIT_PROBE_LEASE=60s")
	s.waitGroupStable("registrar", 1)
	sellers := []string{"a", "b", "c"}
	for _, seller := range sellers {
		s.publish("up-"+seller, seller, 10)
	}
	var skus []string
	for _, seller := range sellers {
		for i := 1; i <= 10; i++ {
			skus = append(skus, fmt.Sprintf("up-%s-%d", seller, i))
		}
	}
	b := s.breaker()
	testwait.For(t, 20*time.Second, "the circuit to open", func() bool {
		st, err := b.Peek(context.Background())
		return err == nil && st.State == circuit.Open
	})
	testwait.For(t, 10*time.Second, "rows holding claims while the circuit is open", func() bool { return heldClaims(t, s, sellers, skus) > 0 })
	stopReleasesClaims(t, s, p, sellers, skus)
}

// TestShutdownReleasesClaimsOfRowsWaitingForTheirSlots: a seller's second
// window of rows holds its claims and slots a window ahead while its rows
// wait for those slots. SIGTERM revokes them before their calls: each
// gives its slot and its claim back, so the next owner of the partition
// registers them at once instead of waiting out the lease.
func TestShutdownReleasesClaimsOfRowsWaitingForTheirSlots(t *testing.T) {
	t.Parallel()
	const limit = 5
	// The second window's slots come 4 s after the first's, within the
	// session timeout (MaxWait): its rows wait for them, and the test has
	// seconds to see them waiting, also on a busy machine.
	s := newStack(t, stackOptions{partitions: 1, limit: limit, window: 4 * time.Second, margin: crashMargin})
	p := s.startProcess("c1", "SESSION_TIMEOUT=6s")
	s.waitGroupStable("registrar", 1)
	s.publish("up-a", "a", 2*limit)
	var skus []string
	for i := 1; i <= 2*limit; i++ {
		skus = append(skus, fmt.Sprintf("up-a-%d", i))
	}
	// The first window's rows are registered; the second's hold their
	// claims and wait for slots the session timeout (MaxWait) covers.
	testwait.For(t, 20*time.Second, "the first window's calls made and the second window's rows holding their claims", func() bool {
		return s.calls.between(time.Time{}, time.Now()) == limit && heldClaims(t, s, []string{"a"}, skus[limit:]) == limit
	})
	stopReleasesClaims(t, s, p, []string{"a"}, skus)
	if n := s.calls.between(time.Time{}, time.Now()); n != limit {
		t.Errorf("%d calls after SIGTERM, want %d: no call starts once the rows are given back", n, limit)
	}
}

// stopReleasesClaims sends the consumer SIGTERM and checks that it exits
// with status 0 within its shutdown timeout, having released every claim
// its rows held, before it closed Redis.
func stopReleasesClaims(t *testing.T, s *stack, p *proc, sellers, skus []string) {
	t.Helper()
	before := heldClaims(t, s, sellers, skus)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("consumer exited with %v after SIGTERM, want status 0", err)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("consumer still running 8 s after SIGTERM (shutdown timeout 5 s)")
	}
	if n := heldClaims(t, s, sellers, skus); n != 0 {
		t.Errorf("%d of the %d claims held at SIGTERM are still held after the consumer stopped, want 0 (released at shutdown)", n, before)
	}
	log, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "use of closed network connection"); n > 0 {
		t.Errorf("%d log lines say \"use of closed network connection\": Redis was closed while rows still used it", n)
		for _, l := range strings.Split(string(log), "\n") {
			if strings.Contains(l, "use of closed network connection") {
				t.Log(l)
			}
		}
	}
	t.Logf("claims held at SIGTERM: %d", before)
}
