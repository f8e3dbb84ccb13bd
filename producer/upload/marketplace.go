package upload

import (
	"context"
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
	// fail while other sellers' do not (circuit.SellerCalls.Failing and
	// Outage).
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
	// counted as failed for it; or it is still closed, but this seller's
	// calls and other sellers' fail together), MarketplaceFailing, or
	// MarketplaceMisconfigured (held open
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
	// its calls fail, and then whose failing it is: its own once the API
	// answered another seller since (or nobody else called for a hold,
	// HoldFailing), an outage the
	// circuit has not opened for yet when other sellers fail with it.
	// Until the others' calls tell, the page says neither: never "failing"
	// first and then "not answering".
	if sc, ok := m.(SellerCalls); ok && st.Waiting > 0 && st.SellerID != "" {
		switch calls, err := sc.Seller(ctx, st.SellerID); {
		case err != nil || !calls.Failing():
		case calls.Own():
			v.Marketplace, v.Notice = MarketplaceFailing, Failing
		case calls.Outage():
			v.Marketplace, v.Notice = MarketplaceNotAnswering, NotAnswering
		}
	}
	return v
}

// HoldFailing returns m with seller readings whose failing streak counts
// for hold after its last failure, and no longer: a seller failing at its
// limit calls in bursts a limit window and a margin apart (a failed call
// keeps its slot), so its streak goes quiet for that long between them,
// while a streak quieter than that belongs to rows that are gone (set
// aside, or the upload ended), not to the seller's next upload. For the
// same reason the others' silence says the failing is the seller's own only
// once its streak lasted hold. hold is the limit's window plus the margin.
// m without seller readings, or hold ≤ 0, is returned as is.
func HoldFailing(m Marketplace, hold time.Duration) Marketplace {
	sc, ok := m.(SellerCalls)
	if !ok || hold <= 0 {
		return m
	}
	return heldFailing{Marketplace: m, calls: sc, hold: hold}
}

type heldFailing struct {
	Marketplace
	calls SellerCalls
	hold  time.Duration
}

// Seller reads seller's calls; a streak whose last failure is hold old or
// older reads as none, and one whose others are silent is the seller's own
// only once it lasted a hold: other sellers at their limit may be between
// their bursts until then (circuit.SellerCalls.Quiet).
func (h heldFailing) Seller(ctx context.Context, seller string) (circuit.SellerCalls, error) {
	c, err := h.calls.Seller(ctx, seller)
	if err == nil && c.Streak > 0 && c.Now.Sub(c.LastFailure) >= h.hold {
		c.Streak, c.FirstFailure, c.LastFailure = 0, time.Time{}, time.Time{}
	}
	c.Quiet = h.hold
	return c, err
}
