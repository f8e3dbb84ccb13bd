package kafkagroup

import (
	"slices"
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
