package main

import (
	"math"
	"slices"
	"time"
)

// The figures below are computed from the sandbox's own acceptance times (its
// clock, the moment it counted each 201), never from the consumers' view.

// lowerBound is the least time from a seller's first registration to its
// last with rows rows at limit per window and the throttle's margin: each
// further batch of limit rows waits a whole window plus the margin.
func lowerBound(rows, limit int, window, margin time.Duration) time.Duration {
	batches := (rows + limit - 1) / limit
	return time.Duration(max(batches-1, 0)) * (window + margin)
}

// stats are the minimum, median and maximum of a sample.
type stats struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	Count  int     `json:"sellers"`
}

// summarize returns nil for an empty sample (a ratio has no meaning for a
// seller whose lower bound is 0).
func summarize(xs []float64) *stats {
	if len(xs) == 0 {
		return nil
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return &stats{Min: round(s[0]), Median: round(med), Max: round(s[n-1]), Count: n}
}

// span is the first and last time over all sellers.
func span(times map[string][]time.Time) (first, last time.Time) {
	for _, ts := range times {
		if len(ts) == 0 {
			continue
		}
		if first.IsZero() || ts[0].Before(first) {
			first = ts[0]
		}
		if ts[len(ts)-1].After(last) {
			last = ts[len(ts)-1]
		}
	}
	return first, last
}

// period is one app-wide window of the run, as the global figures count it.
type period struct {
	StartS float64 `json:"start_s"` // after the first registration of the run
	// Accepted is the registrations (201s) of all sellers in the period.
	Accepted int `json:"accepted"`
	// SellerCapacity is how many registrations the sellers' own limits
	// alone would have allowed in the period, given their registrations
	// before it and their rows left (see ownCapacity).
	SellerCapacity int `json:"seller_limits_capacity"`
	// Counted: rows were waiting that only the app-wide limit held back
	// (SellerCapacity ≥ the app-wide limit), so Accepted should be the limit.
	Counted bool `json:"counted"`
}

// globalUse splits the run, from its first registration to its last, into
// consecutive periods of the app-wide window and judges how much of the
// app-wide limit g was used in the periods where it was what held rows back.
// times are each seller's acceptance times (ascending), rows each seller's
// rows; limit per window+margin is the per-seller pacing of the throttle.
// It returns the periods, and the used fraction over the counted ones
// (accepted ÷ (g × periods counted)) with its smallest single period; both
// NaN when no period counted.
func globalUse(times map[string][]time.Time, rows map[string]int, limit int, window, margin time.Duration,
	g int, gWindow time.Duration) (periods []period, used, minUsed float64) {
	first, last := span(times)
	used, minUsed = math.NaN(), math.NaN()
	if first.IsZero() || g <= 0 || gWindow <= 0 {
		return nil, used, minUsed
	}
	var sumAccepted, counted int
	for a := first; !a.After(last); a = a.Add(gWindow) {
		b := a.Add(gWindow)
		p := period{StartS: round(a.Sub(first).Seconds())}
		for seller, ts := range times {
			before := countBefore(ts, a)
			in := countBefore(ts, b) - before
			p.Accepted += in
			p.SellerCapacity += ownCapacity(ts[:before], rows[seller]-before, limit, window+margin, a, b)
		}
		p.Counted = p.SellerCapacity >= g
		if p.Counted {
			counted++
			sumAccepted += p.Accepted
			f := float64(p.Accepted) / float64(g)
			if math.IsNaN(minUsed) || f < minUsed {
				minUsed = f
			}
		}
		periods = append(periods, p)
	}
	if counted > 0 {
		used = float64(sumAccepted) / float64(g*counted)
	}
	return periods, used, minUsed
}

// countBefore is the number of times in ts (ascending) before t.
func countBefore(ts []time.Time, t time.Time) int {
	n, _ := slices.BinarySearchFunc(ts, t, func(x, t time.Time) int { return x.Compare(t) })
	return n
}

// ownCapacity is how many of left rows a seller could register in [a, b)
// under its own limit alone, given its registrations before a (ascending):
// each placed as early as the throttle's sliding log allows, at a or one
// window′ after the registration limit places before it.
func ownCapacity(before []time.Time, left, limit int, windowPrime time.Duration, a, b time.Time) int {
	if left <= 0 {
		return 0
	}
	log := slices.Clone(before[max(len(before)-limit, 0):])
	n := 0
	for n < left {
		t := a
		if len(log) >= limit {
			if due := log[len(log)-limit].Add(windowPrime); due.After(t) {
				t = due
			}
		}
		if !t.Before(b) {
			break
		}
		log = append(log, t)
		n++
	}
	return n
}

func round(f float64) float64 { return math.Round(f*1000) / 1000 }
