package circuit

import (
	"fmt"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

// TestFailurePatternsBesideTheRules: patterns no rule was written for, on a
// real Redis. A seller whose calls alternate 503 and 201 beside a healthy
// one, and one seller refused (a 401 for its app alone) between another's
// answers, are those sellers' own problems: the circuit stays closed.
func TestFailurePatternsBesideTheRules(t *testing.T) {
	srv := testredis.Start(t)
	type c struct {
		seller string
		o      Outcome
	}
	alternating := []c{}
	for i := range 30 {
		alternating = append(alternating, c{"b", Success})
		alternating = append(alternating, c{"a", []Outcome{Failure, Success}[i%2]})
	}
	alternatingPair := append([]c{}, alternating...)
	for i := range 30 {
		alternatingPair = append(alternatingPair, c{"b", Success}, c{"d", []Outcome{Failure, Success}[i%2]})
	}
	refusedOne := []c{}
	for range 20 {
		refusedOne = append(refusedOne, c{"b", Success}, c{"a", Refused})
	}
	for _, tc := range []struct {
		name  string
		calls []c
	}{
		{"a seller alternating 503 and 201 beside a healthy one", alternating},
		{"two sellers alternating 503 and 201 beside a healthy one", alternatingPair},
		{"one seller refused between another's answers", refusedOne},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fast()
			s.Name = tc.name
			b := newBreaker(t, srv.Client(), s)
			for i, cl := range tc.calls {
				if _, st := call(t, b, cl.seller, fmt.Sprintf("%s:%d", cl.seller, i), cl.o); st.State != Closed {
					t.Fatalf("call %d (%s, %s) opened the circuit (%s), want closed: the API answers seller b on every call", i+1, cl.seller, cl.o, st.Reason)
				}
			}
			if p := peek(t, b); p.Opens != 0 {
				t.Errorf("opened %d times, want never", p.Opens)
			}
		})
	}
}

// TestSickSellersStaySickThroughAnOutage: three sellers fail beside a
// healthy one (sick), then a real outage opens the circuit and a probe
// answered ends it. The sellers' failures were their own before the outage
// and still are: alone they do not reopen it, whether the closing probe was
// another seller's row or a row of one of them (which cures that one alone).
// Were opening to forget who was sick, two of them would reopen the circuit
// after the recovery, and their rows would wait behind probes of their own
// failing rows until some other seller called (held, never dead-lettered).
func TestSickSellersStaySickThroughAnOutage(t *testing.T) {
	srv := testredis.Start(t)
	sick := []string{"a", "b", "e"}
	for _, prober := range []string{"d", "a"} {
		t.Run("probe of "+prober, func(t *testing.T) {
			s := fast()
			s.Name = "through an outage, probe of " + prober
			b := newBreaker(t, srv.Client(), s)
			// The sick sellers fail first; c's answers come a bucket later, so
			// they prove the API up while the others fail (answers from
			// before the failures would not: an outage may have begun after them).
			for i := range 3 {
				if _, st := call(t, b, sick[i], fmt.Sprintf("%s:first", sick[i]), Failure); st.State != Closed {
					t.Fatalf("failure %d opened the circuit", i+1)
				}
			}
			time.Sleep(s.Window / time.Duration(s.Buckets))
			for i := range 6 {
				call(t, b, "c", fmt.Sprintf("c:%d", i), Success)
			}
			for i := range 30 {
				seller := sick[i%3]
				if _, st := call(t, b, seller, fmt.Sprintf("%s:%d", seller, i), Failure); st.State != Closed {
					t.Fatalf("failure %d of the sellers beside a healthy one opened the circuit", i+1)
				}
			}
			time.Sleep(s.Window + s.Window/time.Duration(s.Buckets)) // c's calls leave the window
			// the outage: d fails with them
			opened := false
			for i := range 40 {
				seller := []string{"a", "b", "e", "d"}[i%4]
				if _, st := call(t, b, seller, fmt.Sprintf("%s:o%d", seller, i), Failure); st.State != Closed {
					opened = true
					break
				}
			}
			if !opened {
				t.Fatal("d failing with the sick sellers did not open the circuit, want open: an outage")
			}
			time.Sleep(s.ProbeMin)
			if d, st := call(t, b, prober, prober+":probe", Success); !d.Probe || st.State != Closed {
				t.Fatalf("the probe: %+v, then %s; want a probe that closes the circuit", d, st.State)
			}
			// b and e were sick before the outage, and nothing of theirs was answered since
			for i := range 40 {
				seller := []string{"b", "e"}[i%2]
				if _, st := call(t, b, seller, fmt.Sprintf("%s:x%d", seller, i), Failure); st.State != Closed {
					t.Fatalf("failure %d of the sellers sick before the outage (%s) reopened the circuit after the recovery, want closed", i+1, seller)
				}
			}
			// a seller cured by its answer counts again: a failing with them is an outage
			if prober == "a" {
				reopened := false
				for i := range 40 {
					seller := []string{"a", "b", "e"}[i%3]
					if _, st := call(t, b, seller, fmt.Sprintf("%s:y%d", seller, i), Failure); st.State != Closed {
						reopened = true
						break
					}
				}
				if !reopened {
					t.Error("a, answered on its probe, failing with the sick sellers did not reopen the circuit, want open")
				}
			}
		})
	}
}

// TestOneSellersRefusalStaysItsOwn: a seller refused while another is
// answered (its app revoked, say) is sick like a seller failing beside a
// healthy one: once the other seller's calls left the window, its refusals
// alone still do not hold the fleet's circuit open for a refusal of
// bulkreg; a second seller refused does, and an answer cures it.
func TestOneSellersRefusalStaysItsOwn(t *testing.T) {
	srv := testredis.Start(t)
	s := fast()
	b := newBreaker(t, srv.Client(), s)
	for i := range 3 {
		call(t, b, "b", fmt.Sprintf("b:%d", i), Success)
		if _, st := call(t, b, "a", fmt.Sprintf("a:%d", i), Refused); st.State != Closed {
			t.Fatalf("a refused between b's answers: %s, want closed (its own)", st.State)
		}
	}
	time.Sleep(s.Window + s.Window/time.Duration(s.Buckets)) // b's calls leave the window
	for i := range 5 {
		if _, st := call(t, b, "a", fmt.Sprintf("a:x%d", i), Refused); st.State != Closed {
			t.Fatalf("a refused again, alone, after b's answers left the window: %s (%s), want closed (still its own)", st.State, st.Reason)
		}
	}
	if _, st := call(t, b, "c", "c:0", Refused); st.State != Open || st.Reason != Misconfigured {
		t.Fatalf("a second seller refused: %+v, want open, misconfigured (bulkreg's)", st)
	}
	if p := peek(t, b); p.Opens != 1 {
		t.Errorf("opened %d times, want once", p.Opens)
	}

	// an answer cures: a's lone refusal is bulkreg's again
	s.Name = "cured"
	s.TrustClosed = -1 // every answer reported at once: a batch older than the window is dropped
	b = newBreaker(t, srv.Client(), s)
	call(t, b, "b", "b:0", Success)
	call(t, b, "a", "a:0", Refused)
	time.Sleep(s.Window + s.Window/time.Duration(s.Buckets))
	call(t, b, "a", "a:1", Success)
	time.Sleep(s.Window + s.Window/time.Duration(s.Buckets)) // a's answer leaves the window too
	if _, st := call(t, b, "a", "a:2", Refused); st.State != Open || st.Reason != Misconfigured {
		t.Fatalf("a, answered since, refused alone: %+v, want open, misconfigured", st)
	}
}
