// The circuit's vocabulary: its states, the outcomes a call reports and the reasons it opens.

package circuit

import "fmt"

// State is the circuit's state. Its value is the bulkreg_circuit_state gauge.
type State int

const (
	Closed   State = 0 // calls flow
	Open     State = 1 // no call until the probe is due
	HalfOpen State = 2 // one probe call is out; everybody else waits
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "unknown"
}

func parseState(s string) (State, error) {
	switch s {
	case "closed":
		return Closed, nil
	case "open":
		return Open, nil
	case "half-open":
		return HalfOpen, nil
	}
	return 0, fmt.Errorf("unknown circuit state %q", s)
}

// Outcome is what one call told about the API.
type Outcome int

const (
	// Success: 201 or 200. The API works.
	Success Outcome = iota + 1
	// Failure: a transient failure (5xx, 408, timeout, refused or reset
	// connection, unreadable answer): the outage signal.
	Failure
	// Answered: the API answered but refused the row (400, 409, 422, 429, any
	// other 4xx). Not an outage signal; it counts as a call in the window, and
	// as the probe's answer it closes the circuit.
	Answered
	// Abandoned: the caller gave up before an answer for reasons of its own
	// (its context was cancelled at shutdown or rebalance). Nothing is
	// counted; a probe given up hands the probe to the next caller at once.
	Abandoned
	// Refused: the API refused bulkreg itself, not the row (401, 403, a 404
	// off the route, 405, 3xx: registryclient.Misconfigured). Every call
	// would get the same answer, so one such answer opens the circuit at
	// once, whatever the window's counts, with Reason Misconfigured; it is
	// held like an outage until a probe gets an answer (an operator fixed
	// the credential or the URL). As the probe's answer it counts as a
	// failure. One exception: when another seller's call was answered in
	// the window and no other seller was refused, the refusal is that
	// seller's own (the API refuses it alone, say a 403 for an app it
	// revoked): the circuit stays closed, Report answers Closed, and the
	// caller treats it as the seller's failure.
	Refused
)

// Reason says why the circuit is not closed.
type Reason string

const (
	// Unavailable: transient failures spread over sellers (an outage).
	Unavailable Reason = "unavailable"
	// Misconfigured: the API refused bulkreg itself (Refused): its
	// credentials or its URL need an operator. Nothing is registered until
	// then, whatever the rows hold.
	Misconfigured Reason = "misconfigured"
)

func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Answered:
		return "answered"
	case Abandoned:
		return "abandoned"
	case Refused:
		return "refused"
	}
	return "unknown"
}
