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

// Marketplace states in UploadView.
const (
	MarketplaceAnswering    = "answering"
	MarketplaceNotAnswering = "not_answering"
)

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
	}
	return v
}
