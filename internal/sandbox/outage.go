package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// maxOutageTimes bounds the request times an Outage keeps.
const maxOutageTimes = 100_000

// Outage is an outage switched on at runtime: every registration answered
// 503 (All), or only those of some products (SKUs: a poison row the API keeps
// failing on). It is checked after the injected latency and before anything
// else, so an outage registers nothing.
type Outage struct {
	All  bool     `json:"all"`
	SKUs []string `json:"skus,omitempty"`
}

// OutageReport is an outage in force and the requests it refused since it
// was last set.
type OutageReport struct {
	Outage
	Refused   int         `json:"refused"`    // requests answered 503 by the outage
	RefusedAt []time.Time `json:"refused_at"` // when each was received (the first 100,000)
}

// outage is the Server's outage switch, with its own lock so the admin
// endpoint never waits on registrations.
type outage struct {
	mu      sync.Mutex
	o       Outage
	skus    map[string]bool
	refused []time.Time
	count   int
}

// SetOutage switches an outage on (All, or some SKUs) or off (the zero
// Outage), and starts its count of refused requests afresh.
func (s *Server) SetOutage(o Outage) {
	s.outage.mu.Lock()
	defer s.outage.mu.Unlock()
	s.outage.o = Outage{All: o.All, SKUs: slices.Clone(o.SKUs)}
	s.outage.skus = make(map[string]bool, len(o.SKUs))
	for _, sku := range o.SKUs {
		s.outage.skus[sku] = true
	}
	s.outage.refused, s.outage.count = nil, 0
}

// Outage returns the outage in force and what it refused.
func (s *Server) Outage() OutageReport {
	s.outage.mu.Lock()
	defer s.outage.mu.Unlock()
	return OutageReport{Outage: Outage{All: s.outage.o.All, SKUs: slices.Clone(s.outage.o.SKUs)},
		Refused: s.outage.count, RefusedAt: slices.Clone(s.outage.refused)}
}

// failsFor reports whether the outage refuses a request for this product
// (sku "" when the body could not be read), and counts it.
func (o *outage) failsFor(sku string, at time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.o.All && (sku == "" || !o.skus[sku]) {
		return false
	}
	o.count++
	if len(o.refused) < maxOutageTimes {
		o.refused = append(o.refused, at)
	}
	return true
}

// bySKU reports whether some SKUs fail (so the body must be read to decide).
func (o *outage) bySKU() (all, some bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.o.All, len(o.skus) > 0
}

// refuseForOutage answers 503 when an outage covers the request and reports
// whether it did. It reads the body only when some SKUs fail, and puts it
// back for the handler.
func (s *Server) refuseForOutage(ctx context.Context, w http.ResponseWriter, r *http.Request, start time.Time, sellerID, key string) bool {
	all, some := s.outage.bySKU()
	if !all && !some {
		return false
	}
	sku := ""
	if some && !all {
		sku = peekSKU(r, s.maxBody)
	}
	if !s.outage.failsFor(sku, start) {
		return false
	}
	s.count(sellerID, func(sl *seller) { sl.failed++ })
	a := errorAnswer(http.StatusServiceUnavailable, &apiError{Code: "unavailable", Message: "the service is unavailable (outage switched on); retry later"})
	s.write(w, a)
	s.observe(ctx, start, sellerID, key, strconv.Itoa(a.status))
	return true
}

// outageRoutes serves the switch:
//
//	GET    /admin/outage   the outage in force and the requests it refused (OutageReport)
//	PUT    /admin/outage   {"all": true} or {"skus": ["SKU-1", …]}: switch it on, counts start afresh
//	DELETE /admin/outage   switch it off
func (s *Server) outageRoutes() {
	s.mux.HandleFunc("GET /admin/outage", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Outage())
	})
	s.mux.HandleFunc("PUT /admin/outage", func(w http.ResponseWriter, r *http.Request) {
		var o Outage
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf(`the body must be {"all": true|false, "skus": ["…"]}: %v`, err)})
			return
		}
		s.SetOutage(o)
		writeJSON(w, http.StatusOK, s.Outage())
	})
	s.mux.HandleFunc("DELETE /admin/outage", func(w http.ResponseWriter, r *http.Request) {
		s.SetOutage(Outage{})
		writeJSON(w, http.StatusOK, s.Outage())
	})
}
