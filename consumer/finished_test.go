package consumer

import (
	"slices"
	"strings"
	"testing"
)

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
	for _, bad := range []string{"other tool's note", "bulkreg-done:v1:", "bulkreg-done:v1:x", "bulkreg-done:v1:5-3", "bulkreg-done:v1:-1",
		"bulkreg-done:v1:0-99999999999", "bulkreg-done:v1:1,,2"} {
		if got := decodeDone(bad); got != nil {
			t.Errorf("decodeDone(%q) = %v, want no rows", bad, got)
		}
	}
}

// FuzzDecodeDone: the metadata comes from the broker, written by any
// member or tool: no input panics, takes unbounded memory, or names rows out
// of order.
func FuzzDecodeDone(f *testing.F) {
	f.Add("bulkreg-done:v1:22-27,31")
	f.Add("bulkreg-done:v1:0-65536")
	f.Add("")
	f.Fuzz(func(t *testing.T, meta string) {
		got := decodeDone(meta)
		if len(got) > (maxDoneRange+1)*(strings.Count(meta, ",")+1) {
			t.Fatalf("%d rows from %d bytes", len(got), len(meta))
		}
		if again := decodeDone(encodeDone(got)); len(got) > 0 && len(encodeDone(got)) < maxDoneMetadata && !slices.Equal(again, got) && slices.IsSorted(got) {
			t.Fatalf("round trip of %v gave %v", got, again)
		}
	})
}
