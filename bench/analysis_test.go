package main

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestLowerBound(t *testing.T) {
	for _, tc := range []struct {
		rows int
		want time.Duration
	}{{10, 0}, {100, 0}, {101, 3100 * time.Millisecond}, {500, 12400 * time.Millisecond}} {
		if got := lowerBound(tc.rows, 100, 3*time.Second, 100*time.Millisecond); got != tc.want {
			t.Errorf("lowerBound(%d rows, 100 per 3s + 100ms) = %v, want %v", tc.rows, got, tc.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	if s := summarize([]float64{3, 1, 2}); *s != (stats{Min: 1, Median: 2, Max: 3, Count: 3}) {
		t.Errorf("odd sample: %+v", *s)
	}
	if s := summarize([]float64{4, 1, 2, 3}); s.Median != 2.5 {
		t.Errorf("even sample: median %v, want 2.5", s.Median)
	}
	if s := summarize(nil); s != nil {
		t.Errorf("empty sample: %+v, want nil", *s)
	}
}

// burst returns n times from at, 1 ms apart.
func burst(at time.Time, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = at.Add(time.Duration(i) * time.Millisecond)
	}
	return out
}

// The global scenario under a 200 per 3 s app-wide limit, 100 per seller per
// 3 s, margin 100 ms: one seller with 500 rows, 19 with 10.
func TestGlobalUse(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const w, m = 3 * time.Second, 100 * time.Millisecond
	wp := w + m
	rows := map[string]int{"big": 500}
	for i := range 19 {
		rows[fmt.Sprintf("small-%d", i)] = 10
	}
	// small gives each small seller k rows at t0 and the rest one window′ later.
	small := func(times map[string][]time.Time, k int) {
		for i := range 19 {
			id := fmt.Sprintf("small-%d", i)
			times[id] = append(burst(t0.Add(time.Duration(i)*10*time.Millisecond), k), burst(t0.Add(wp), 10-k)...)
			if k == 10 {
				times[id] = times[id][:10]
			}
		}
	}

	t.Run("fair share fills the first window, then the big seller's own limit binds", func(t *testing.T) {
		times := map[string][]time.Time{}
		small(times, 10)
		big := burst(t0, 10)
		for k := 1; k <= 5; k++ {
			n := 100
			if k == 5 {
				n = 90
			}
			big = append(big, burst(t0.Add(time.Duration(k)*wp), n)...)
		}
		times["big"] = big
		periods, used, worst := globalUse(times, rows, 100, w, m, 200, w)
		if len(periods) != 6 {
			t.Fatalf("%d periods, want 6 (the last registration is at 15.5 s): %+v", len(periods), periods)
		}
		if p := periods[0]; !p.Counted || p.Accepted != 200 || p.SellerCapacity != 290 {
			t.Errorf("first period %+v, want counted, 200 accepted, capacity 290 (190 small rows + 100 big)", p)
		}
		for _, p := range periods[1:] {
			if p.Counted {
				t.Errorf("period %+v counted: only the big seller is left and its own limit allows 100 < 200", p)
			}
		}
		if used != 1 || worst != 1 {
			t.Errorf("used %v, worst %v, want 1 and 1", used, worst)
		}
	})

	t.Run("a window left half empty while small sellers wait", func(t *testing.T) {
		times := map[string][]time.Time{}
		small(times, 5) // 95 small + 10 big = 105 of 200 in the first window
		times["big"] = append(burst(t0, 10), burst(t0.Add(wp), 100)...)
		rows := map[string]int{"big": 110}
		for id := range times {
			if id != "big" {
				rows[id] = 10
			}
		}
		periods, used, worst := globalUse(times, rows, 100, w, m, 200, w)
		if p := periods[0]; !p.Counted || p.Accepted != 105 {
			t.Fatalf("first period %+v, want counted with 105 accepted", p)
		}
		// Second period: 95 small rows + 100 big: 195 < 200, not counted.
		if periods[1].Counted || periods[1].SellerCapacity != 195 {
			t.Errorf("second period %+v, want not counted, capacity 195", periods[1])
		}
		if used != 0.525 || worst != 0.525 {
			t.Errorf("used %v, worst %v, want 105/200 = 0.525", used, worst)
		}
	})

	t.Run("no app-wide limit", func(t *testing.T) {
		if p, used, _ := globalUse(map[string][]time.Time{"big": burst(t0, 3)}, rows, 100, w, m, 0, 0); p != nil || !math.IsNaN(used) {
			t.Errorf("periods %v, used %v, want none and NaN", p, used)
		}
	})
}

func TestOwnCapacity(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	wp := 3100 * time.Millisecond
	full := burst(t0, 100)
	// 100 at t0: nothing more before t0+3.1 s, then 100 at once.
	if n := ownCapacity(full, 400, 100, wp, t0.Add(time.Second), t0.Add(3*time.Second)); n != 0 {
		t.Errorf("within the window of a full log: %d, want 0", n)
	}
	if n := ownCapacity(full, 400, 100, wp, t0.Add(3*time.Second), t0.Add(6*time.Second)); n != 100 {
		t.Errorf("the next window: %d, want 100", n)
	}
	if n := ownCapacity(full, 30, 100, wp, t0.Add(3*time.Second), t0.Add(6*time.Second)); n != 30 {
		t.Errorf("30 rows left: %d, want 30", n)
	}
	// 10 early: 90 at once, 10 more when the early ones leave the window′.
	if n := ownCapacity(burst(t0, 10), 400, 100, wp, t0.Add(3*time.Second), t0.Add(6*time.Second)); n != 100 {
		t.Errorf("10 registered before: %d, want 90 + 10", n)
	}
}
