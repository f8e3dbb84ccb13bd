package throttle

import (
	"errors"
	"testing"
	"time"
)

// TestReadingAReserveReply: a reserve script's reply, a line per slot, is
// read whole or refused as Redis's fault (ErrUnavailable), never with a
// panic, whatever came back.
func TestReadingAReserveReply(t *testing.T) {
	ids := []string{"A", "B"}
	for _, tc := range []struct {
		name  string
		reply any
		ok    bool
	}{
		{"two slots", "1 2000000 1000000 3 e-1 0 0\n0 5000000 1000000 0  0 0", true},
		{"one line for two slots", "1 2000000 1000000 3 e-1 0 0", false},
		{"three lines for two slots", "1 2 1 3 e 0 0\n1 2 1 3 e 0 0\n1 2 1 3 e 0 0", false},
		{"no reply", nil, false},
		{"an array", []any{int64(1)}, false},
		{"six fields", "1 2000000 1000000 3 e-1 0\n0 5000000 1000000 0  0 0", false},
		{"eight fields", "1 2000000 1000000 3 e-1 0 0 0\n0 5000000 1000000 0  0 0", false},
		{"a time not a number", "1 2e6 1000000 3 e-1 0 0\n0 5000000 1000000 0  0 0", false},
		{"admitted without an epoch", "1 2000000 1000000 3  0 0\n0 5000000 1000000 0  0 0", false},
		{"admitted neither 0 nor 1", "2 2000000 1000000 3 e-1 0 0\n0 5000000 1000000 0  0 0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := sellerReservations(tc.reply, "s", ids, "reserve a slot")
			if !tc.ok {
				if err == nil || !errors.Is(err, ErrUnavailable) {
					t.Fatalf("reply %q: %v, %v; want an error wrapping ErrUnavailable", tc.reply, rs, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a, b := rs[0], rs[1]
			if !a.Admitted || a.ID != "A" || a.Seller != "s" || !a.At.Equal(time.UnixMicro(2000000)) || a.Wait != time.Second || a.InWindow != 3 || a.Epoch != "e-1" || a.Lost || !a.HeldUntil.IsZero() {
				t.Errorf("first slot %+v", a)
			}
			if b.Admitted || b.ID != "" || b.Epoch != "" || !b.At.Equal(time.UnixMicro(5000000)) || b.Wait != 4*time.Second {
				t.Errorf("second slot %+v, want refused, to ask again at 5 s", b)
			}
		})
	}
}
