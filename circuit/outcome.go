package circuit

import registryclient "github.com/bulkreg/bulkreg/registry-client"

// OutcomeOf maps the registry client's class of an answer to what it tells
// the circuit: Registered and Replayed are a Success; Transient (5xx, 408,
// timeout, connection error, unreadable answer) is a Failure; Misconfigured
// (the API refused bulkreg itself: credentials, URL) is Refused; Permanent and
// RateLimited (the API answered, refusing the row or the seller's pace) are
// Answered. A call the caller cancelled itself (its context ended at
// shutdown or rebalance) is not the API's doing: report it as Abandoned,
// whatever its class.
func OutcomeOf(c registryclient.Class) Outcome {
	switch c {
	case registryclient.Registered, registryclient.Replayed:
		return Success
	case registryclient.Transient:
		return Failure
	case registryclient.Misconfigured:
		return Refused
	default:
		return Answered
	}
}
