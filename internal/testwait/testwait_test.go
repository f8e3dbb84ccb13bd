package testwait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

type fakeT struct{ failed string }

func (f *fakeT) Helper()                           {}
func (f *fakeT) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestFor(t *testing.T) {
	for _, tc := range []struct {
		name     string
		metAfter time.Duration // the condition holds from this long after the start; < 0: never
		within   time.Duration
		fails    bool
	}{
		{"met at once", 0, time.Second, false},
		{"met after 30 ms", 30 * time.Millisecond, time.Second, false},
		{"never met", -1, 100 * time.Millisecond, true},
		{"met too late", 500 * time.Millisecond, 100 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := &fakeT{}
			start := time.Now()
			looks := 0
			For(ft, tc.within, "the thing", func() bool {
				looks++
				return tc.metAfter >= 0 && time.Since(start) >= tc.metAfter
			})
			took := time.Since(start)
			if got := ft.failed != ""; got != tc.fails {
				t.Fatalf("failed %v (%q), want %v", got, ft.failed, tc.fails)
			}
			if tc.fails {
				if !strings.Contains(ft.failed, "the thing") || took < tc.within {
					t.Errorf("failed with %q after %v, want it to name the thing, after %v", ft.failed, took, tc.within)
				}
				return
			}
			if tc.metAfter == 0 && looks != 1 {
				t.Errorf("a condition met at once was asked %d times, want 1", looks)
			}
			// Seen within one pause (at most maxPoll) of becoming true.
			if took > tc.metAfter+maxPoll+50*time.Millisecond {
				t.Errorf("a condition met after %v was seen after %v", tc.metAfter, took)
			}
		})
	}
}
