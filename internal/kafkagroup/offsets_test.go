package kafkagroup

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestOffsetsCommitPoint(t *testing.T) {
	type step struct {
		read   []int64
		finish []int64
		want   int64 // -1: nothing to commit
	}
	for _, tc := range []struct {
		name  string
		start int64
		steps []step
	}{
		{"nothing read, no committed offset", -2, []step{{want: -1}}},
		{"nothing read, resume at the committed offset", 7, []step{{want: 7}}},
		{"read, none finished: commit where reading started", 7, []step{{read: []int64{7, 8, 9}, want: 7}}},
		{"in order", 0, []step{
			{read: []int64{0, 1, 2}, finish: []int64{0}, want: 1},
			{finish: []int64{1, 2}, want: 3},
		}},
		{"out of order holds at the lowest unfinished", 0, []step{
			{read: []int64{0, 1, 2, 3}, finish: []int64{2, 3}, want: 0},
			{finish: []int64{1}, want: 0},
			{finish: []int64{0}, want: 4},
		}},
		{"gaps in the log", 10, []step{
			{read: []int64{10, 13, 20}, finish: []int64{13}, want: 10},
			{finish: []int64{10}, want: 20},
			{finish: []int64{20}, want: 21},
		}},
		{"first offset marker then reads", -2, []step{
			{read: []int64{0}, want: 0},
			{finish: []int64{0}, want: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOffsets(tc.start)
			for i, s := range tc.steps {
				for _, off := range s.read {
					o.read(off, time.Time{})
				}
				for _, off := range s.finish {
					if !o.finish(off) {
						t.Fatalf("step %d: finish(%d) refused", i, off)
					}
				}
				got, ok := o.commitPoint()
				if !ok {
					got = -1
				}
				if got != s.want {
					t.Fatalf("step %d: commit point %d, want %d", i, got, s.want)
				}
			}
		})
	}
}

func TestOffsetsRefusesUnknownAndDoubleFinish(t *testing.T) {
	o := newOffsets(0)
	o.read(0, time.Time{})
	o.read(1, time.Time{})
	if o.finish(5) {
		t.Error("finish of an offset never read accepted")
	}
	if !o.finish(1) || o.finish(1) {
		t.Error("second finish of offset 1 accepted")
	}
	if got := o.unfinished(); got != 1 {
		t.Errorf("unfinished = %d, want 1", got)
	}
}

// TestOffsetsRandomOrder checks the invariant on random finishing orders:
// the commit point is never above an unfinished row, and reaches the end.
func TestOffsetsRandomOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := 1 + rng.IntN(60)
		o := newOffsets(-2)
		base := time.Unix(0, 0)
		for i := range n {
			o.read(int64(i), base.Add(time.Duration(i)))
		}
		done := make([]bool, n)
		for _, i := range rng.Perm(n) {
			o.finish(int64(i))
			done[i] = true
			cp, _ := o.commitPoint()
			lowest := int64(n)
			for j := range n {
				if !done[j] {
					lowest = int64(j)
					break
				}
			}
			if cp != lowest {
				t.Fatalf("commit point %d, lowest unfinished %d", cp, lowest)
			}
			if lowest < int64(n) && !o.oldest().Equal(base.Add(time.Duration(lowest))) {
				t.Fatalf("oldest %v, want row %d's time", o.oldest(), lowest)
			}
		}
	}
}
