package upload

import (
	"context"
	"sync"
	"time"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Marketplace tells whether the registration API answers, from the fleet's
// circuit breaker (*circuit.Breaker; Peek reads its state without changing it).
type Marketplace interface {
	Peek(ctx context.Context) (circuit.Status, error)
}

// NotAnswering is what the seller reads while the consumers' circuit breaker
// is open: the registration API is down for everyone, no row is being given
// up, and the rows go on by themselves once it answers again.
const NotAnswering = "the marketplace is not answering; your rows will continue automatically"

// Failing is what the seller reads while the marketplace fails this
// seller's calls and the fleet's circuit stays closed (one seller's
// failures never open it): each row is retried and, past its attempts, set
// aside for an operator to send again; none is lost.
const Failing = "the marketplace is failing your rows; each is retried, and a row it still refuses is set aside for an operator to send again"

// Marketplace states in UploadView.
const (
	MarketplaceAnswering    = "answering"
	MarketplaceNotAnswering = "not_answering"
	// MarketplaceFailing: the circuit is closed, but this seller's calls
	// fail (circuit.SellerCalls.Failing).
	MarketplaceFailing = "failing"
)

// SellerCalls reads how the marketplace answers one seller's calls
// (*circuit.Breaker): a Marketplace that has it lets View tell a seller
// whose calls alone fail.
type SellerCalls interface {
	Seller(ctx context.Context, seller string) (circuit.SellerCalls, error)
}

var _ SellerCalls = (*circuit.Breaker)(nil) // what the producer wires as its Marketplace

// peekTimeout bounds the circuit read a status makes: a slow Redis must not
// hold the seller's page.
const peekTimeout = time.Second

// UploadView is an upload's status as the seller sees it.
type UploadView struct {
	uploadstatus.Status
	// Marketplace is MarketplaceAnswering or MarketplaceNotAnswering (the
	// consumers' circuit breaker is open: rows wait in the queue, none is
	// counted as failed for it), or MarketplaceMisconfigured (held open
	// because the API refused bulkreg itself, paused.go); empty when it
	// could not be read.
	Marketplace string `json:"marketplace,omitempty"`
	// Notice is NotAnswering while the marketplace is not answering and rows
	// of the upload are waiting; empty otherwise.
	Notice string `json:"notice,omitempty"`
}

// View adds the marketplace's state to st. m nil, or a circuit that cannot
// be read, leaves Marketplace empty: the status itself is still right.
func View(ctx context.Context, st uploadstatus.Status, m Marketplace) UploadView {
	v := UploadView{Status: st}
	if m == nil {
		return v
	}
	ctx, cancel := context.WithTimeout(ctx, peekTimeout)
	defer cancel()
	cs, err := m.Peek(ctx)
	if err != nil {
		return v
	}
	v.Marketplace = MarketplaceAnswering
	if pausedView(&v, cs) { // paused.go: the API refused bulkreg itself
		return v
	}
	if cs.State != circuit.Closed {
		v.Marketplace = MarketplaceNotAnswering
		if st.Waiting > 0 {
			v.Notice = NotAnswering
		}
		return v
	}
	// The circuit is closed; only a seller with rows waiting asks whether
	// its own calls fail.
	if sc, ok := m.(SellerCalls); ok && st.Waiting > 0 && st.SellerID != "" {
		if calls, err := sc.Seller(ctx, st.SellerID); err == nil && calls.Failing() {
			v.Marketplace, v.Notice = MarketplaceFailing, Failing
		}
	}
	return v
}

// RememberFailing returns m with seller readings that keep a failing
// verdict for hold after the window last showed it, while no answered call
// of the seller says otherwise. At its limit a seller calls in bursts a
// limit window and a margin apart (a failed call keeps its slot), and the
// circuit's window (20 s by default against 61 s) is empty between them:
// read as is, the failing notice left the seller's page for most of each
// minute and the finish time came back. hold is the limit's window plus the
// margin. m without seller readings, or hold ≤ 0, is returned as is.
func RememberFailing(m Marketplace, hold time.Duration) Marketplace {
	sc, ok := m.(SellerCalls)
	if !ok || hold <= 0 {
		return m
	}
	return &rememberFailing{Marketplace: m, calls: sc, hold: hold, now: time.Now, last: map[string]failingAt{}}
}

type rememberFailing struct {
	Marketplace
	calls SellerCalls
	hold  time.Duration
	now   func() time.Time

	mu   sync.Mutex
	last map[string]failingAt // sellers whose calls last read as failing
}

type failingAt struct {
	calls circuit.SellerCalls
	at    time.Time
}

// Seller reads seller's calls; with no answered call in the window it
// answers the last failing reading of the seller instead, if that is
// younger than hold.
func (r *rememberFailing) Seller(ctx context.Context, seller string) (circuit.SellerCalls, error) {
	c, err := r.calls.Seller(ctx, seller)
	if err != nil {
		return c, err
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch last, ok := r.last[seller]; {
	case c.Failing():
		if !ok && len(r.last) >= maxRemembered {
			r.forget(now)
		}
		r.last[seller] = failingAt{calls: c, at: now}
	case !ok:
	case c.Answered > 0 || now.Sub(last.at) >= r.hold:
		delete(r.last, seller) // answered again, or nothing failed for a whole hold
	default:
		return last.calls, nil // between bursts: nothing says it recovered
	}
	return c, nil
}

// maxRemembered bounds the sellers remembered at once; past it the
// readings older than hold are dropped first.
const maxRemembered = 10000

// forget drops the readings older than hold, and all of them when that
// leaves the map still full.
func (r *rememberFailing) forget(now time.Time) {
	for s, l := range r.last {
		if now.Sub(l.at) >= r.hold {
			delete(r.last, s)
		}
	}
	if len(r.last) >= maxRemembered {
		clear(r.last)
	}
}
