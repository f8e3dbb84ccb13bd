package ledger

import (
	"strconv"
	"testing"
)

// TestReadingAClaimReply: the claim script's one-string reply is read whole,
// whatever bytes an entry holds (its length says where it ends), or refused
// when it is cut, malformed or longer than the claims asked.
func TestReadingAClaimReply(t *testing.T) {
	entry := func(s string) string { return strconv.Itoa(len(s)) + " " + s }
	odd := "c\th a\nb\t k \tx"
	for _, tc := range []struct {
		name   string
		reply  string
		claims int
		want   []claimReply
	}{
		{"no claim", "1700000000000", 0, []claimReply{}},
		{"two claims", "17 call " + entry(odd) + " wait " + entry("c\th"), 2,
			[]claimReply{{verdict: "call", entry: odd, now: 17}, {verdict: "wait", entry: "c\th", now: 17}}},
		{"an empty entry", "17 error 0 ", 1, []claimReply{{verdict: "error", entry: "", now: 17}}},
		{"no time", "call 3 abc", 1, nil},
		{"one claim for two", "17 call 3 abc", 2, nil},
		{"an entry cut short", "17 call 9 abc", 1, nil},
		{"bytes after the last claim", "17 call 3 abcd", 1, nil},
		{"no length", "17 call abc", 1, nil},
		{"a negative length", "17 call -1 abc", 1, nil},
		{"a time and nothing else for a claim", "17", 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := make([]claimReply, tc.claims)
			err := readClaimReplies(tc.reply, out)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("reply %q for %d claims read as %+v; want an error", tc.reply, tc.claims, out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				if out[i] != tc.want[i] {
					t.Errorf("claim %d: %+v, want %+v", i, out[i], tc.want[i])
				}
			}
		})
	}
}
