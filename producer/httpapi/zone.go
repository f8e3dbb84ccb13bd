package httpapi

import (
	"html/template"
	"net/http"
	"regexp"
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

// clockText is each part of a time as sayTime says it that must stay on
// one line: the date ("2026-12-01", which a browser breaks after a hyphen
// otherwise), and the half of the day, the clock and the zone ("오후
// 3:04:05 (KST)", "3:04:05 PM (KST)"). A phone may break between the two.
var clockText = regexp.MustCompile(`\d{4}-\d{2}-\d{2}|(?:오전|오후) \d{1,2}:\d{2}:\d{2} \([^()<>]*\)|\d{1,2}:\d{2}:\d{2} [AP]M \([^()<>]*\)`)

// keepTimes marks every time's clockText in h as one unbreakable run
// (class "at", white-space: nowrap in app.css; app.js does the same for
// the texts it sets).
func keepTimes(h template.HTML) template.HTML {
	return template.HTML(clockText.ReplaceAllString(string(h), `<span class="at">$0</span>`))
}

// keepTimesIn is keepTimes of plain text.
func keepTimesIn(s string) template.HTML {
	return keepTimes(template.HTML(template.HTMLEscapeString(s)))
}
