package kafkagroup

import (
	"math/rand/v2"
	"slices"
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

func TestDoneMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		offs []int64
		meta string
	}{
		{"none", nil, ""},
		{"one", []int64{7}, "bulkreg-done:v1:7"},
		{"ranges", []int64{22, 23, 24, 25, 26, 27, 31, 40, 41}, "bulkreg-done:v1:22-27,31,40-41"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := encodeDone(tc.offs); got != tc.meta {
				t.Errorf("encodeDone(%v) = %q, want %q", tc.offs, got, tc.meta)
			}
			if got := decodeDone(tc.meta); !slices.Equal(got, tc.offs) {
				t.Errorf("decodeDone(%q) = %v, want %v", tc.meta, got, tc.offs)
			}
		})
	}
	// Past the broker's metadata limit the rest is left out (read again).
	var many []int64
	for i := range int64(2000) {
		many = append(many, 3*i)
	}
	meta := encodeDone(many)
	if len(meta) > maxDoneMetadata {
		t.Errorf("metadata of %d rows is %d bytes, more than %d", len(many), len(meta), maxDoneMetadata)
	}
	if got := decodeDone(meta); len(got) == 0 || !slices.Equal(got, many[:len(got)]) {
		t.Errorf("decoding the cut metadata gave %d rows, want a prefix of the rows", len(got))
	}
	// However many rows a metadata names, a member reads at most
	// maxDoneRows of them, the first; the rest are read again.
	if got := decodeDone("bulkreg-done:v1:0-40000,50000-90000,x"); got != nil {
		t.Errorf("a damaged part after good ones named %d rows, want none", len(got))
	}
	if got := decodeDone("bulkreg-done:v1:0-40000,50000-90000"); len(got) != maxDoneRows || got[40000] != 40000 || got[40001] != 50000 || got[maxDoneRows-1] != 50000+maxDoneRows-40002 {
		t.Errorf("130,002 rows named: %d decoded, want the first %d", len(got), maxDoneRows)
	}
	for _, bad := range []string{"other tool's note", "bulkreg-done:v1:", "bulkreg-done:v1:x", "bulkreg-done:v1:5-3", "bulkreg-done:v1:-1",
		"bulkreg-done:v1:0-99999999999", "bulkreg-done:v1:1,,2", "bulkreg-done:v1:5,3", "bulkreg-done:v1:2-6,4"} {
		if got := decodeDone(bad); got != nil {
			t.Errorf("decodeDone(%q) = %v, want no rows", bad, got)
		}
	}
}

// FuzzDecodeDone: the metadata comes from the broker, written by any
// member or tool: no input panics, names more than maxDoneRows rows, or
// names rows out of order or twice; what decodes encodes back the same.
func FuzzDecodeDone(f *testing.F) {
	f.Add("bulkreg-done:v1:22-27,31")
	f.Add("bulkreg-done:v1:0-65535")
	f.Add("bulkreg-done:v1:0-65536,70000-135536")
	f.Add("bulkreg-done:v1:9,3-4")
	f.Add("")
	f.Fuzz(func(t *testing.T, meta string) {
		got := decodeDone(meta)
		if len(got) > maxDoneRows {
			t.Fatalf("%d rows from %d bytes, more than %d", len(got), len(meta), maxDoneRows)
		}
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("rows out of order or twice: %d after %d", got[i], got[i-1])
			}
		}
		if enc := encodeDone(got); len(got) > 0 && len(enc) < maxDoneMetadata && !slices.Equal(decodeDone(enc), got) {
			t.Fatalf("round trip of %d rows gave %v", len(got), decodeDone(enc))
		}
	})
}
