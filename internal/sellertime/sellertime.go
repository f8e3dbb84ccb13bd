// Package sellertime says an instant as a seller reads it: in one time zone,
// in one format per language, the zone always named. Pages, progress events
// and reports all say times through Format, so one instant reads the same
// wherever the seller meets it.
//
//	ko  2026-12-01 오후 3:04:05 (KST)
//	en  2026-12-01 3:04:05 PM (KST)
//
// The zone is named by its abbreviation where the time zone database has a
// name for it (KST, EST, EDT, CET, UTC), else by its offset from UTC
// (UTC+7, UTC+5:30, UTC-3). The database is embedded (time/tzdata), so a
// binary without /usr/share/zoneinfo (a distroless image) knows every zone.
package sellertime

import (
	"fmt"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // every zone, whatever the image holds
)

// DefaultZone is the sellers' zone when nothing else is known: the sellers
// are Korean.
const DefaultZone = "Asia/Seoul"

// Format says t in loc in lang's format ("ko", else English).
func Format(lang string, t time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	t = t.In(loc)
	h := t.Hour() % 12
	if h == 0 {
		h = 12
	}
	clock := fmt.Sprintf("%d:%02d:%02d", h, t.Minute(), t.Second())
	if lang == "ko" {
		half := "오전"
		if t.Hour() >= 12 {
			half = "오후"
		}
		return t.Format("2006-01-02") + " " + half + " " + clock + " (" + ZoneName(t) + ")"
	}
	half := "AM"
	if t.Hour() >= 12 {
		half = "PM"
	}
	return t.Format("2006-01-02") + " " + clock + " " + half + " (" + ZoneName(t) + ")"
}

// ZoneName names t's zone at t: its abbreviation (KST, EDT), or its offset
// from UTC when the database gives the zone none ("+07" becomes UTC+7).
func ZoneName(t time.Time) string {
	abbr, off := t.Zone()
	if abbr != "" && !strings.ContainsAny(abbr[:1], "+-0123456789") {
		return abbr
	}
	if off == 0 {
		return "UTC"
	}
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	h, m := off/3600, off%3600/60
	if m == 0 {
		return fmt.Sprintf("UTC%s%d", sign, h)
	}
	return fmt.Sprintf("UTC%s%d:%02d", sign, h, m)
}

// maxNameLen bounds a zone name taken from a request: the database's
// longest is 32 bytes (America/Argentina/ComodRivadavia).
const maxNameLen = 64

// Load returns the zone named name (an IANA name such as Asia/Seoul, as a
// browser's Intl reports it). A name that is empty, too long, holds other
// characters than an IANA name's, or is not in the database is an error
// naming it: names come from requests, and only the database's are zones.
func Load(name string) (*time.Location, error) {
	if name == "" || len(name) > maxNameLen {
		return nil, fmt.Errorf("time zone %q: want an IANA name such as %s", cut(name), DefaultZone)
	}
	for _, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '/', c == '_', c == '-', c == '+':
		default:
			return nil, fmt.Errorf("time zone %q: want an IANA name such as %s", cut(name), DefaultZone)
		}
	}
	if name == "Local" || name[0] == '/' { // the server's own zone, a file
		return nil, fmt.Errorf("time zone %q: want an IANA name such as %s", name, DefaultZone)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q is not in the time zone database: want an IANA name such as %s", name, DefaultZone)
	}
	return loc, nil
}

// Zones loads zones by name once each (Load reads and parses the zone's
// data every time). Only names Load accepts are kept, so it holds at most
// the database's few hundred zones. Safe for concurrent use.
type Zones struct {
	mu sync.Mutex
	m  map[string]*time.Location
}

// Load is the package's Load, remembered.
func (z *Zones) Load(name string) (*time.Location, error) {
	z.mu.Lock()
	loc, ok := z.m[name]
	z.mu.Unlock()
	if ok {
		return loc, nil
	}
	loc, err := Load(name)
	if err != nil {
		return nil, err
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.m == nil {
		z.m = map[string]*time.Location{}
	}
	z.m[name] = loc
	return loc, nil
}

func cut(s string) string {
	if len(s) > maxNameLen {
		return s[:maxNameLen] + "…"
	}
	return s
}
