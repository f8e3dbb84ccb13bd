package upload

import "github.com/bulkreg/bulkreg/circuit"

// Paused is what the seller reads while the consumers' circuit breaker is
// held open because the registration API refused bulkreg itself (a rotated
// credential, a wrong URL: circuit.Misconfigured): nothing is registered
// until an operator fixes it, no row is failed for it, and the rows go on by
// themselves afterwards.
const Paused = "registration is paused: bulkreg cannot call the marketplace (it refused bulkreg's access); no row has failed, and your rows will continue automatically once this is fixed"

// MarketplaceMisconfigured is the UploadView.Marketplace state that goes with
// Paused, beside MarketplaceAnswering and MarketplaceNotAnswering.
const MarketplaceMisconfigured = "misconfigured"

// pausedView sets v's Marketplace and Notice when the circuit is held open
// for a refusal of bulkreg; it reports whether it did.
func pausedView(v *UploadView, cs circuit.Status) bool {
	if cs.State == circuit.Closed || cs.Reason != circuit.Misconfigured {
		return false
	}
	v.Marketplace = MarketplaceMisconfigured
	if v.Waiting > 0 {
		v.Notice = Paused
	}
	return true
}
