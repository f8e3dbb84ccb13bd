package consumer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
)

// gatedLedger is the real ledger behind a gate: a claim reaches it only when
// the test lets one through, so the test sees which rows ask, in what order
// and how many at once (a claim waiting at the gate counts as asking). While
// waitFor is set, that seller's claims are told another row holds the SKU.
type gatedLedger struct {
	*ledger.Ledger
	waitFor atomic.Pointer[string]

	mu           sync.Mutex
	pass         chan struct{}   // the gate; nil: none
	waited       map[string]bool // rows told Wait
	asking, most int
	order        []string // sellers, in the order their claims reached the gate
}

func (l *gatedLedger) Claim(ctx context.Context, seller, sku, row, hash, from string) (ledger.Claim, error) {
	l.mu.Lock()
	if w := l.waitFor.Load(); w != nil && *w == seller {
		if l.waited == nil {
			l.waited = map[string]bool{}
		}
		l.waited[row] = true
		l.mu.Unlock()
		return ledger.Claim{Verdict: ledger.Wait, RetryIn: 10 * time.Millisecond}, nil
	}
	l.asking++
	l.most = max(l.most, l.asking)
	l.order = append(l.order, seller)
	pass := l.pass
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.asking--
		l.mu.Unlock()
	}()
	if pass != nil {
		select {
		case <-pass:
		case <-ctx.Done():
			return ledger.Claim{}, ctx.Err()
		}
	}
	return l.Ledger.Claim(ctx, seller, sku, row, hash, from)
}

// ClaimStep decides the batch's claims at once, each through the gate (a
// claim in a step of the throttle's script could not be held there): no
// step is left to run.
func (l *gatedLedger) ClaimStep(seller string, reqs []ledger.ClaimRequest, into []ledger.ClaimResult) (scriptbatch.Step, bool) {
	for i, q := range reqs {
		cl, err := l.Claim(context.Background(), seller, q.SKU, q.Row, q.Hash, q.From)
		into[i] = ledger.ClaimResult{Claim: cl, Err: err}
	}
	return scriptbatch.Step{}, false
}

// gate puts a new gate before the ledger and returns it: send on it to let
// one claim through, close it to let every claim through.
func (l *gatedLedger) gate() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pass = make(chan struct{})
	return l.pass
}

// passEach lets n claims through the gate one at a time. Before each it
// waits until the claim after the last one let through has come and want
// claims are at the ledger (or all n have come), so whatever can ask is
// asking when the next one goes.
func (l *gatedLedger) passEach(t *testing.T, pass chan struct{}, n, want int) {
	t.Helper()
	for i := range n {
		testwait.For(t, 10*time.Second, fmt.Sprintf("%d claims at the ledger before letting claim %d of %d through", want, i+1, n), func() bool {
			asking, _, order := l.seen()
			return len(order) >= n || len(order) >= i+want && asking == want
		})
		select {
		case pass <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatalf("no claim came to the gate to be let through (%d of %d let through)", i, n)
		}
	}
}

func (l *gatedLedger) seen() (asking, most int, order []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.asking, l.most, append([]string(nil), l.order...)
}

// ledgerDeps are the fixture's dependencies with the SKU ledger l.
func (f *fixture) ledgerDeps(l Ledger) Deps {
	d := f.deps()
	d.Ledger = l
	return d
}
