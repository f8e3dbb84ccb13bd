package httpapi

import (
	"net/http"
	"time"

	"github.com/bulkreg/bulkreg/internal/sellertime"
)

// zoneCookie holds the seller's browser's time zone (an IANA name), which
// the pages' script writes from Intl on every page: times are said in it
// from the next answer on, pages, events and reports alike.
const zoneCookie = "bulkreg_tz"

// zone is the time zone the seller reads r's answer in: the browser's
// (zoneCookie), else SellerZone. A name that is not a zone is passed over.
func (s *Server) zone(r *http.Request) *time.Location {
	if c, err := r.Cookie(zoneCookie); err == nil {
		if loc, err := s.zones.Load(c.Value); err == nil {
			return loc
		}
	}
	return s.sellerZone
}

// streamZone is zone for an event stream: the zone its ?tz= names first,
// which the page that opens the stream sets to its own, so a page keeps
// one clock even when the browser's zone became known after it was drawn.
func (s *Server) streamZone(r *http.Request) *time.Location {
	if name := r.URL.Query().Get("tz"); name != "" {
		if loc, err := s.zones.Load(name); err == nil {
			return loc
		}
	}
	return s.zone(r)
}

// sayTime says t as the seller reads it: in zone, in lang's one format.
func sayTime(lang string, t time.Time, zone *time.Location) string {
	return sellertime.Format(lang, t, zone)
}
