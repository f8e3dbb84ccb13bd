package ledger

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/text/unicode/norm"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

// TestOneSKUOneForm: a SKU typed in NFC ("가방-001", one code point a
// syllable) and pasted in NFD (the jamo one by one) is one entry of the
// ledger, whichever form wrote it and whichever form asks, including an
// entry an older version wrote under the NFD form as the seller typed it.
// A claim of such an entry moves it to the NFC key.
func TestOneSKUOneForm(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	l := New(rdb, Options{Lease: time.Minute, Retention: time.Hour})
	nfc, nfd := norm.NFC.String("가방-001"), norm.NFD.String("가방-001")
	if nfc == nfd || len(nfd) <= len(nfc) {
		t.Fatalf("the forms are not distinct: %q %q", nfc, nfd)
	}
	// legacy writes an entry as a version that keyed SKUs as typed did.
	legacy := func(t *testing.T, seller, sku, entry string) {
		t.Helper()
		if err := rdb.HSet(ctx, Key(seller), sku, entry).Err(); err != nil {
			t.Fatal(err)
		}
	}
	registered := "r\t" + hashA + "\t" + rowA + "\t\tP-1\t" + strconv.FormatInt(time.Now().UnixMilli(), 10)
	liveClaim := "c\t" + hashA + "\t" + rowA + "\t" + rowA + "\t\t" + strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10) + "\t0"

	cases := []struct {
		name  string
		store func(t *testing.T, seller string) // writes the entry
		ask   string                            // the form the later row uses
		// after the row's claim with hashA (and with hashB for the conflict):
		verdict, other Verdict
	}{
		{"registered through the ledger in NFD, asked in NFC", func(t *testing.T, s string) {
			if _, err := l.Mark(ctx, s, nfd, rowA, hashA, "P-1"); err != nil {
				t.Fatal(err)
			}
		}, nfc, Done, Conflict},
		{"registered through the ledger in NFC, asked in NFD", func(t *testing.T, s string) {
			if _, err := l.Mark(ctx, s, nfc, rowA, hashA, "P-1"); err != nil {
				t.Fatal(err)
			}
		}, nfd, Done, Conflict},
		{"an older version's entry under NFD, asked in NFC", func(t *testing.T, s string) { legacy(t, s, nfd, registered) }, nfc, Done, Conflict},
		{"an older version's entry under NFD, asked in NFD", func(t *testing.T, s string) { legacy(t, s, nfd, registered) }, nfd, Done, Conflict},
		{"an older version's entry under NFC, asked in NFD", func(t *testing.T, s string) { legacy(t, s, nfc, registered) }, nfd, Done, Conflict},
		{"claimed in NFD by a live row, claimed in NFC by another", func(t *testing.T, s string) {
			if c, err := l.Claim(ctx, s, nfd, rowA, hashA, ""); err != nil || c.Verdict != Call {
				t.Fatalf("first claim: %+v, %v", c, err)
			}
		}, nfc, Wait, Wait},
		{"an older version's live claim under NFD, claimed in NFC by another row", func(t *testing.T, s string) { legacy(t, s, nfd, liveClaim) }, nfc, Wait, Wait},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seller := "nfc-" + strconv.Itoa(i)
			tc.store(t, seller)
			m, err := l.Lookup(ctx, seller, []string{tc.ask, "OTHER-1"})
			if err != nil {
				t.Fatal(err)
			}
			if e, ok := m[tc.ask]; !ok || e.Row != rowA || len(m) != 1 {
				t.Fatalf("Lookup(%q) = %+v: the entry %s wrote is not found (or is not %s's)", tc.ask, m, tc.name, rowA)
			}
			c, err := l.Claim(ctx, seller, tc.ask, rowB, hashA, "")
			if err != nil {
				t.Fatal(err)
			}
			if c.Verdict != tc.verdict || c.Entry.Row != rowA {
				t.Errorf("claim in the other form by %s: %v of %q, want %v of %s's entry", rowB, c.Verdict, c.Entry.Row, tc.verdict, rowA)
			}
			c, err = l.Claim(ctx, seller, tc.ask, rowB, hashB, "")
			if err != nil {
				t.Fatal(err)
			}
			if c.Verdict != tc.other {
				t.Errorf("claim in the other form with other content: %v, want %v", c.Verdict, tc.other)
			}
			// One entry, under the NFC key: a NFD key was moved by the claim.
			fields, err := rdb.HKeys(ctx, Key(seller)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(fields, []string{nfc}) {
				t.Errorf("the ledger's fields after the claims: %q, want only the NFC key %q", fields, nfc)
			}
		})
	}

	// A row that registered under the NFD form (a message of an older
	// producer) is marked, released and set aside under the NFC key.
	t.Run("mark, release and set aside normalise", func(t *testing.T) {
		const seller = "nfc-steps"
		if c, err := l.Claim(ctx, seller, nfd, rowA, hashA, ""); err != nil || c.Verdict != Call {
			t.Fatalf("claim: %+v, %v", c, err)
		}
		if ok, err := l.Release(ctx, seller, nfc, rowA, false); err != nil || !ok {
			t.Fatalf("release in the other form: %v, %v; want released", ok, err)
		}
		if c, err := l.Claim(ctx, seller, nfc, rowA, hashA, ""); err != nil || c.Verdict != Call {
			t.Fatalf("claim again: %+v, %v", c, err)
		}
		if ok, err := l.SetAside(ctx, seller, nfd, rowA, "topic/0/1", AsideNote{Class: "transient", Attempts: 3}); err != nil || !ok {
			t.Fatalf("set aside in the other form: %v, %v; want the row's claim released", ok, err)
		}
		e, err := l.Mark(ctx, seller, nfd, rowA, hashA, "P-9")
		if err != nil || e.ProductID != "P-9" {
			t.Fatalf("mark: %+v, %v", e, err)
		}
		if fields := rdb.HKeys(ctx, Key(seller)).Val(); !slices.Equal(fields, []string{nfc}) {
			t.Errorf("fields %q, want only %q", fields, nfc)
		}
	})
}
