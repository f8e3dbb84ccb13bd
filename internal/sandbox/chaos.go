package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bulkreg/bulkreg/productrules"
)

// maxCalls bounds the answers the call log keeps.
const maxCalls = 200_000

// Chaos is a set of answers injected at runtime, for the seeded fault
// simulation (sim/) and for tests that need one misbehaviour switched on and
// off while consumers run. Each injected answer comes after the injected
// latency and registers nothing; an empty Chaos injects nothing.
type Chaos struct {
	// Status answers every registration with this status: 401 or 403 (a
	// rotated credential), 404 (a wrong route), 503 (an outage). 0: none.
	Status int `json:"status,omitempty"`
	// Sellers' registrations are answered 503: the API keeps failing for
	// these sellers alone (a shard of theirs is down).
	Sellers []string `json:"sellers,omitempty"`
	// SKUs' registrations are answered 503: the API keeps failing on these
	// products alone (poison rows).
	SKUs []string `json:"skus,omitempty"`
	// DropSKUs' registrations get no answer: the connection is closed once
	// the body is read, as a crashed proxy does, so the client sees a
	// transport error rather than a status.
	DropSKUs []string `json:"drop_skus,omitempty"`
	// Storm answers every registration 429 with Retry-After StormRetryAfter
	// seconds (at least 1), whatever the limit counted: a gateway in front of
	// the API throttling on its own. These 429s are counted apart (Injected)
	// from the limit's.
	Storm           bool `json:"storm,omitempty"`
	StormRetryAfter int  `json:"storm_retry_after,omitempty"`
	// RefuseNameContaining answers 422 (field "name") to a product whose name
	// contains this text: an API stricter than bulkreg's validator, so a
	// row the validator passed is refused for its content. It is checked
	// with the request's validity, before idempotency and the limit.
	RefuseNameContaining string `json:"refuse_name_containing,omitempty"`
}

// Call is one registration request as the API answered it: the judge's view
// of what happened to each Idempotency-Key.
type Call struct {
	Received time.Time `json:"received"` // when the request arrived
	// Handled is when the API handled it, after the injected latency: the
	// moment a 201 was counted against the limit.
	Handled  time.Time `json:"handled"`
	Seller   string    `json:"seller"`
	Key      string    `json:"key"`
	SKU      string    `json:"sku,omitempty"` // empty when the body was not read
	Status   int       `json:"status"`        // 0: the connection was dropped, or the client left during the latency
	Code     string    `json:"code,omitempty"`
	Injected bool      `json:"injected,omitempty"` // answered by Chaos, FailRate, DropRate or an Outage, not by the contract
}

// chaos is the Server's Chaos switch and call log, locked on their own.
type chaos struct {
	mu      sync.Mutex
	c       Chaos
	sellers map[string]bool
	skus    map[string]bool
	drops   map[string]bool // DropSKUs
	calls   []Call
	dropped int // calls not logged beyond maxCalls
}

// SetChaos switches injected answers on (a non-zero Chaos) or off (the zero
// Chaos). An unusable status is refused with an error naming it.
func (s *Server) SetChaos(c Chaos) error {
	if c.Status != 0 && (c.Status < 300 || c.Status > 599 || c.Status == http.StatusTooManyRequests) {
		return fmt.Errorf("sandbox: chaos not changed: the status is %d, it must be 0 (none) or a 3xx, 4xx or 5xx other than 429 (Storm injects 429s)", c.Status)
	}
	if c.StormRetryAfter < 0 {
		return fmt.Errorf("sandbox: chaos not changed: the storm's Retry-After is %d s, it must not be negative", c.StormRetryAfter)
	}
	s.chaos.mu.Lock()
	defer s.chaos.mu.Unlock()
	s.chaos.c = Chaos{Status: c.Status, Sellers: slices.Clone(c.Sellers), SKUs: slices.Clone(c.SKUs), DropSKUs: slices.Clone(c.DropSKUs),
		Storm: c.Storm, StormRetryAfter: c.StormRetryAfter, RefuseNameContaining: c.RefuseNameContaining}
	s.chaos.sellers = make(map[string]bool, len(c.Sellers))
	for _, id := range c.Sellers {
		s.chaos.sellers[id] = true
	}
	s.chaos.skus = make(map[string]bool, len(c.SKUs))
	for _, sku := range c.SKUs {
		s.chaos.skus[productrules.NormalizeSKU(sku)] = true
	}
	s.chaos.drops = make(map[string]bool, len(c.DropSKUs))
	for _, sku := range c.DropSKUs {
		s.chaos.drops[sku] = true
	}
	return nil
}

// Chaos returns the injected answers in force.
func (s *Server) Chaos() Chaos {
	s.chaos.mu.Lock()
	defer s.chaos.mu.Unlock()
	c := s.chaos.c
	c.Sellers, c.SKUs, c.DropSKUs = slices.Clone(c.Sellers), slices.Clone(c.SKUs), slices.Clone(c.DropSKUs)
	return c
}

// Calls returns every registration request answered so far (the first
// 200,000), in the order they were answered. The slice is a copy.
func (s *Server) Calls() []Call {
	s.chaos.mu.Lock()
	defer s.chaos.mu.Unlock()
	return slices.Clone(s.chaos.calls)
}

func (s *Server) logCall(c Call) {
	s.chaos.mu.Lock()
	defer s.chaos.mu.Unlock()
	if len(s.chaos.calls) >= maxCalls {
		s.chaos.dropped++
		return
	}
	s.chaos.calls = append(s.chaos.calls, c)
}

// chaosAnswer is the injected answer for a request, if any. sku is "" when
// the body has not been read; needSKU says whether it must be.
func (s *Server) chaosAnswer(sellerID, sku string) (a answer, ok bool) {
	s.chaos.mu.Lock()
	c, bySeller, bySKU := s.chaos.c, s.chaos.sellers[sellerID], sku != "" && s.chaos.skus[sku]
	s.chaos.mu.Unlock()
	switch {
	case c.Status != 0:
		code := map[int]string{401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 503: "unavailable"}[c.Status]
		if code == "" {
			code = "injected"
		}
		return errorAnswer(c.Status, &apiError{Code: code, Message: fmt.Sprintf("injected answer %d (chaos switched on)", c.Status)}), true
	case c.Storm:
		a := errorAnswer(http.StatusTooManyRequests, &apiError{Code: "rate_limited", Message: "too many requests (a 429 storm injected by chaos, not the seller's limit)"})
		a.retryAfter, a.scope = max(1, c.StormRetryAfter), ScopeSeller
		return a, true
	case bySeller:
		return errorAnswer(http.StatusServiceUnavailable, &apiError{Code: "unavailable", Message: "the service is unavailable for this seller (injected by chaos); retry later"}), true
	case bySKU:
		return errorAnswer(http.StatusServiceUnavailable, &apiError{Code: "unavailable", Message: "the service is unavailable for this product (injected by chaos); retry later"}), true
	}
	return answer{}, false
}

// chaosNeedsSKU reports whether some SKUs fail, so the body must be read
// before the injected answers are decided.
func (s *Server) chaosNeedsSKU() bool {
	s.chaos.mu.Lock()
	defer s.chaos.mu.Unlock()
	return len(s.chaos.skus) > 0 || len(s.chaos.drops) > 0
}

// chaosDrops reports whether the registration of sku gets no answer.
func (s *Server) chaosDrops(sku string) bool {
	s.chaos.mu.Lock()
	defer s.chaos.mu.Unlock()
	return sku != "" && s.chaos.drops[sku]
}

// refusesName is the text that makes a product's name refused, "" for none.
func (s *Server) refusesName() string {
	s.chaos.mu.Lock()
	defer s.chaos.mu.Unlock()
	return s.chaos.c.RefuseNameContaining
}

// refusedName reports whether the name is refused by RefuseNameContaining.
func refusedName(marker, name string) bool { return marker != "" && strings.Contains(name, marker) }

// chaosRoutes serves the switch:
//
//	GET    /admin/chaos   the Chaos in force
//	PUT    /admin/chaos   a Chaos as JSON: switch it on
//	DELETE /admin/chaos   switch it off
//	GET    /admin/calls   every registration request answered (Call, JSON array)
//	GET    /admin/requests the requests kept whole (Request, JSON array; Options.KeepRequests)
func (s *Server) chaosRoutes() {
	s.mux.HandleFunc("GET /admin/requests", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Requests())
	})
	s.mux.HandleFunc("GET /admin/chaos", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Chaos())
	})
	s.mux.HandleFunc("PUT /admin/chaos", func(w http.ResponseWriter, r *http.Request) {
		var c Chaos
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("the body must be a chaos switch as JSON: %v", err)})
			return
		}
		if err := s.SetChaos(c); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, s.Chaos())
	})
	s.mux.HandleFunc("DELETE /admin/chaos", func(w http.ResponseWriter, r *http.Request) {
		_ = s.SetChaos(Chaos{})
		writeJSON(w, http.StatusOK, s.Chaos())
	})
	s.mux.HandleFunc("GET /admin/calls", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Calls())
	})
}

// peekSKU reads the request's seller_sku and puts the body back for the
// handler; "" when the body cannot be read or holds none.
func peekSKU(r *http.Request, maxBody int64) string {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	if err != nil {
		return ""
	}
	var p struct {
		SKU string `json:"seller_sku"`
	}
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	return productrules.NormalizeSKU(p.SKU)
}
