package uploadstatus

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

// A seller's share counts uploads: past it Create refuses with a
// *ShareFullError and writes nothing; the same upload again is not counted
// twice; another seller is not affected.
func TestShareCountsUploads(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	s := New(rdb, time.Hour, WithShare(Share{Uploads: 2}))
	for _, id := range []string{"a1", "a2"} {
		if _, err := s.Create(ctx, newUpload(id, 3)); err != nil {
			t.Fatalf("upload %s within the share: %v", id, err)
		}
	}
	if prev, err := s.Create(ctx, newUpload("a1", 3)); err != nil || prev == nil {
		t.Errorf("the same upload again: %v, %v; want the existing one, not a refusal", prev, err)
	}
	_, err := s.Create(ctx, newUpload("a3", 3))
	var sf *ShareFullError
	if !errors.As(err, &sf) || !errors.Is(err, ErrShareFull) {
		t.Fatalf("a third upload: %v, want a *ShareFullError", err)
	}
	if sf.Uploads != 2 || sf.Seller != "seller-1" || sf.RetryAfter <= 0 || sf.RetryAfter > time.Hour {
		t.Errorf("refusal %+v: want 2 uploads kept and a wait within the hour's retention", sf)
	}
	for _, want := range []string{"wait until older uploads expire", "ask the operator to delete old uploads or raise the share"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if n, _ := rdb.Exists(ctx, MetaKey("a3"), key("a3", "cells")).Result(); n != 0 {
		t.Errorf("a refused upload wrote %d keys", n)
	}
	other := newUpload("b1", 3)
	other.SellerID = "seller-2"
	if _, err := s.Create(ctx, other); err != nil {
		t.Errorf("another seller's upload: %v", err)
	}
	if u, err := s.Usage(ctx, "seller-1"); err != nil || u.Uploads != 2 || u.Bytes <= 0 {
		t.Errorf("seller-1's usage %+v, %v; want 2 uploads", u, err)
	}
}

// A share of bytes refuses the upload that would not fit, and says when
// enough of the seller's uploads expire; an upload larger than the whole
// share never fits (no wait).
func TestShareCountsBytes(t *testing.T) {
	ctx := context.Background()
	s := New(testredis.Start(t).Client(), time.Hour)
	probe := newUpload("probe", 100)
	probe.SellerID = "probe"
	if _, err := s.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	one, err := s.Usage(ctx, "probe")
	if err != nil || one.Bytes <= 0 {
		t.Fatalf("usage of one upload: %+v, %v", one, err)
	}
	s = New(s.rdb, time.Hour, WithShare(Share{Bytes: 2*one.Bytes + one.Bytes/2}))
	for _, id := range []string{"x1", "x2"} {
		if _, err := s.Create(ctx, newUpload(id, 100)); err != nil {
			t.Fatalf("upload %s within the share: %v", id, err)
		}
	}
	_, err = s.Create(ctx, newUpload("x3", 100))
	var sf *ShareFullError
	if !errors.As(err, &sf) || sf.Bytes != 2*one.Bytes || sf.Need != one.Bytes || sf.RetryAfter <= 0 {
		t.Fatalf("a third upload: %v (%+v), want refused with 2 × %d bytes kept and a wait", err, sf, one.Bytes)
	}
	_, err = s.Create(ctx, newUpload("huge", 400))
	if !errors.As(err, &sf) || sf.RetryAfter != 0 || !strings.Contains(err.Error(), "larger than the share") {
		t.Errorf("an upload larger than the share: %v, want refused without a wait", err)
	}
}

// An upload's part of the share is released when its keys expire, and not
// before: a consumer's late row moves the expiry, and the share follows.
func TestShareReleasedWhenTheUploadExpires(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	s := New(rdb, time.Hour, WithShare(Share{Uploads: 1}))
	first := newUpload("e1", 2)
	first.Keep = 600 * time.Millisecond
	if _, err := s.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	if pttl, _ := rdb.PTTL(ctx, MetaKey("e1")).Result(); pttl <= 0 || pttl > 600*time.Millisecond {
		t.Errorf("an upload kept 600ms expires in %v", pttl)
	}
	second := newUpload("e2", 2)
	second.Keep = time.Minute
	time.Sleep(400 * time.Millisecond)
	// A row recorded late keeps the upload 600 ms from now (its keep_ms),
	// past the expiry its charge knew.
	if err := s.RecordRows(ctx, "e1", []RowResult{{Row: 2, State: Registered, ProductID: "P-1"}}); err != nil {
		t.Fatal(err)
	}
	if pttl, _ := rdb.PTTL(ctx, key("e1", "rows")).Result(); pttl < 500*time.Millisecond || pttl > 600*time.Millisecond {
		t.Errorf("a row recorded in an upload kept 600ms: its keys expire in %v, want its own keep", pttl)
	}
	time.Sleep(300 * time.Millisecond) // the charge's expiry has passed; the upload lives on
	if _, err := s.Create(ctx, second); !errors.Is(err, ErrShareFull) {
		t.Fatalf("while the first upload still lives: %v, want the share full", err)
	}
	time.Sleep(400 * time.Millisecond) // the first upload's keys are gone now
	if _, err := s.Create(ctx, second); err != nil {
		t.Fatalf("after the first upload expired: %v, want room", err)
	}
	if u, _ := s.Usage(ctx, "seller-1"); u.Uploads != 1 {
		t.Errorf("usage %+v, want the second upload alone", u)
	}
}

// Delete removes an upload's keys, its listing and its part of the share;
// another seller cannot delete it.
func TestShareReleasedWhenTheUploadIsDeleted(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	s := New(rdb, time.Hour, WithShare(Share{Uploads: 1}))
	u := newUpload("d1", 3)
	if _, err := s.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	if err := s.AddToSeller(ctx, u.SellerID, u.ID, u.CreatedAt); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkPublished(ctx, "d1", []int{2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRows(ctx, "d1", []RowResult{{Row: 2, State: Failed, Reason: "bad"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, newUpload("d2", 3)); !errors.Is(err, ErrShareFull) {
		t.Fatalf("second upload: %v, want the share full", err)
	}
	if err := s.Delete(ctx, "seller-2", "d1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another seller deleting it: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "seller-1", "d1"); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, key("d1", "meta"), key("d1", "cells"), key("d1", "published"), key("d1", "rows"), key("d1", "states")).Result(); n != 0 {
		t.Errorf("%d keys of the deleted upload remain", n)
	}
	if ids, _ := s.SellerUploads(ctx, "seller-1", time.Time{}, 10); len(ids) != 0 {
		t.Errorf("the seller still lists %v", ids)
	}
	// What is left is the upload's tombstone, charged what Redis keeps of it.
	tomb, _ := rdb.MemoryUsage(ctx, goneKey("d1"), 0).Result()
	if u, _ := s.Usage(ctx, "seller-1"); u.Uploads != 0 || tomb == 0 || u.Bytes < tomb || u.Bytes > 2*tomb {
		t.Errorf("usage after the delete: %+v, want no upload and the tombstone's %d bytes", u, tomb)
	}
	if _, err := s.Create(ctx, newUpload("d2", 3)); err != nil {
		t.Errorf("an upload after the delete: %v", err)
	}
}

// An upload's cells are one compressed field and read back whole; a field
// per row (JSON) is read as well.
func TestCellsKeptAsOneBlob(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	s := New(rdb, time.Hour)
	u := newUpload("c1", 500)
	for r := range u.Cells {
		u.Cells[r] = append(u.Cells[r], strings.Repeat("같은 설명 ", 40))
	}
	if _, err := s.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	fields, err := rdb.HLen(ctx, key("c1", "cells")).Result()
	if err != nil || fields != 1 {
		t.Errorf("the cells hash has %d fields (%v), want 1", fields, err)
	}
	raw, _ := json.Marshal(u.Cells)
	blob, _ := rdb.HGet(ctx, key("c1", "cells"), cellsField).Result()
	if len(blob)*10 > len(raw) {
		t.Errorf("500 rows of repeated cells keep %d bytes of %d bytes of JSON, want a tenth at most", len(blob), len(raw))
	}
	got, err := s.Cells(ctx, "c1")
	if err != nil || len(got) != 500 {
		t.Fatalf("cells read back: %d rows, %v", len(got), err)
	}
	for r, c := range u.Cells {
		if strings.Join(got[r], "\x00") != strings.Join(c, "\x00") {
			t.Fatalf("row %d read back as %q, want %q", r, got[r], c)
		}
	}
	rdb.HSet(ctx, key("c1", "cells"), "9999", `["old","row"]`)
	if got, _ := s.Cells(ctx, "c1"); len(got) != 501 || got[9999][0] != "old" {
		t.Errorf("a row kept in a field of its own is not read back: %q", got[9999])
	}
}

// keptBytes is MEMORY USAGE of every key of upload id.
func keptBytes(t *testing.T, s *Store, id string) int64 {
	t.Helper()
	var kept int64
	for _, part := range []string{"meta", "states", "rows", "cells", "published"} {
		if n, err := s.rdb.MemoryUsage(context.Background(), key(id, part), 0).Result(); err == nil {
			kept += n
		}
	}
	return kept
}

// A consumer records rows of an upload whose keys expired (a consumer far
// behind, a dead letter redriven late) after a charge settled the upload's
// entry as gone, or rows of an upload deleted while they were being
// registered: the upload's tombstone keeps them from bringing it back for
// a retention with nothing charged. The share never counts less than what
// is kept.
func TestLateRowsDoNotBringBackAGoneUpload(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"expired", "deleted"} {
		t.Run(how, func(t *testing.T) {
			rdb := testredis.Start(t).Client()
			retention := time.Hour
			if how == "expired" {
				retention = 1500 * time.Millisecond
			}
			s := New(rdb, retention, WithShare(Share{Uploads: 1}))
			if _, err := s.Create(ctx, newUpload("u1", 500)); err != nil {
				t.Fatal(err)
			}
			if how == "expired" {
				time.Sleep(retention + 300*time.Millisecond)
				// The seller's next upload settles u1's entry: gone.
				if _, err := s.Create(ctx, newUpload("u2", 3)); err != nil {
					t.Fatalf("the next upload after u1 expired: %v", err)
				}
			} else if err := s.Delete(ctx, "seller-1", "u1"); err != nil {
				t.Fatal(err)
			}
			// A consumer records u1's rows late.
			rows := make([]RowResult, 0, 500)
			for r := 2; r < 502; r++ {
				rows = append(rows, RowResult{Row: r, State: Failed, Code: "transient", Attempts: 3,
					Reason: "the registration API did not take the row after 3 attempts (the marketplace closed the connection without answering); it was set aside for an operator to retry"})
			}
			if err := s.RecordRows(ctx, "u1", rows); err != nil {
				t.Fatal(err)
			}
			kept := keptBytes(t, s, "u1")
			ttl, _ := rdb.PTTL(ctx, MetaKey("u1")).Result()
			u, err := s.Usage(ctx, "seller-1")
			if err != nil {
				t.Fatal(err)
			}
			charged := int64(0)
			if v, err := rdb.HGet(ctx, usageKey("seller-1"), "u1").Result(); err == nil {
				charged, _ = strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			}
			t.Logf("u1 keeps %d bytes for %v more; its share entry charges %d; the seller's usage %+v", kept, ttl, charged, u)
			if kept > 0 && charged < kept {
				t.Errorf("u1 (%s, then recorded late) keeps %d bytes in Redis for %v, charged %d: the share counts less than what is kept", how, kept, ttl, charged)
			}
		})
	}
}

// A row set aside after its retries (consumer.setAside's reason) or refused
// with the API's message (kept up to MaxReasonJSON, its code and field as
// long as the API sent them) keeps several times what a registered row
// keeps: the share charges each row not yet recorded the largest result a
// consumer records, so it covers what Redis keeps of the worst failed rows.
// TestShareChargesWhatRedisKeeps (producer/upload) checks the usual rows.
func TestShareChargesFailedRowsTheirLargestResult(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		reason string
	}{
		{"set aside after 3 attempts", "the registration API did not take the row after 3 attempts (the marketplace closed the connection without answering); it was set aside for an operator to retry"},
		{"refused with the API's message of 1 KB", strings.Repeat("가", MaxReasonJSON/3)},
		{"refused with a 1 KB message of escaped characters", strings.Repeat("<\x01", MaxReasonJSON)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := testredis.Start(t).Client()
			s := New(rdb, time.Hour, WithShare(Share{Bytes: 1 << 30}))
			up := newUpload("u1", 500)
			if _, err := s.Create(ctx, up); err != nil {
				t.Fatal(err)
			}
			rows := make([]RowResult, 0, 500)
			for r := 2; r < 502; r++ {
				rows = append(rows, RowResult{Row: r, State: Failed, Code: "transient", Attempts: 3, Reason: tc.reason})
			}
			// Half as the producer records, half as a consumer does, with
			// the API's code and field as long as it sent them.
			if err := s.RecordRows(ctx, "u1", rows[:250]); err != nil {
				t.Fatal(err)
			}
			for _, r := range rows[250:] {
				r.Code, r.Field, r.ProductID = strings.Repeat("c", 10_000), strings.Repeat("\x02", 10_000), strings.Repeat("가", 10_000)
				if err := s.RecordRow(ctx, "u1", r); err != nil {
					t.Fatal(err)
				}
			}
			kept := keptBytes(t, s, "u1")
			u, err := s.Usage(ctx, "seller-1")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: Redis keeps %d bytes, the share is charged %d", tc.name, kept, u.Bytes)
			if u.Bytes < kept {
				t.Errorf("%s: charged %d bytes for %d kept (%.1f×): the share counts less than what is kept", tc.name, u.Bytes, kept, float64(kept)/float64(u.Bytes))
			}
		})
	}
}

// The share's scripts run on Redis 6.2, which has no PEXPIRETIME (7.0):
// emulated here by renaming the command away. An entry whose expiry passed
// while its upload is still kept (the same file sent again as a check-only
// upload moves its entry to a second) is settled, and a seller at their
// share gets the 429 share_full, not a Redis error (503).
func TestSettleRunsWithoutPEXPIRETIME(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t, "--rename-command", "PEXPIRETIME", "").Client()
	s := New(rdb, time.Hour, WithShare(Share{Uploads: 1}))
	if _, err := s.Create(ctx, newUpload("u1", 3)); err != nil {
		t.Fatal(err)
	}
	again := newUpload("u1", 3)
	again.Keep = time.Second // the same file, now with nothing to publish
	if _, err := s.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	_, err := s.Create(ctx, newUpload("u2", 3))
	var sf *ShareFullError
	if !errors.As(err, &sf) {
		t.Errorf("a second upload past a share of 1 on a Redis without PEXPIRETIME: %v; want a *ShareFullError", err)
	}
}

// The share's entries change only while they hold what their caller read:
// a settle or a delete that read an entry before the seller sent the same
// file again leaves the fresh charge in place. Run deterministically by
// calling the settle script with the value read before the new charge.
func TestSettleKeepsAChargeMadeSinceItsLookUp(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	s := New(rdb, time.Hour, WithShare(Share{Uploads: 1}))
	if _, err := s.Create(ctx, newUpload("r1", 3)); err != nil {
		t.Fatal(err)
	}
	stale, err := rdb.HGet(ctx, usageKey("seller-1"), "r1").Result()
	if err != nil {
		t.Fatal(err)
	}
	// Deleted, then the same file again: a fresh charge.
	if err := s.Delete(ctx, "seller-1", "r1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if _, err := s.Create(ctx, newUpload("r1", 3)); err != nil {
		t.Fatalf("the same file after its delete: %v", err)
	}
	fresh, _ := rdb.HGet(ctx, usageKey("seller-1"), "r1").Result()
	if n, _ := rdb.Exists(ctx, goneKey("r1")).Result(); n != 0 || fresh == stale {
		t.Fatalf("after the upload came back: tombstone %d, entry %q (stale %q); want no tombstone and a fresh entry", n, fresh, stale)
	}
	// A settle that looked r1 up before it came back, as gone.
	for _, args := range [][]any{
		{s.retention.Milliseconds(), "r1", stale, -2, "", ""},
		{s.retention.Milliseconds(), "r1", stale, 1000, tombstoneBytes("r1"), "g"},
		{s.retention.Milliseconds(), "r1", "", 1000, tombstoneBytes("r1"), "g"},
	} {
		if err := s.settle(ctx, "seller-1", args); err != nil {
			t.Fatal(err)
		}
		if got, _ := rdb.HGet(ctx, usageKey("seller-1"), "r1").Result(); got != fresh {
			t.Errorf("a settle %v with a value read before the new charge changed it: %q, want %q", args[2:], got, fresh)
		}
	}
	if u, _ := s.Usage(ctx, "seller-1"); u.Uploads != 1 {
		t.Errorf("usage %+v, want the upload sent again", u)
	}
	// Rows of the upload sent again are recorded: its tombstone is gone.
	if err := s.RecordRows(ctx, "r1", []RowResult{{Row: 2, State: Registered, ProductID: "P-2"}}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Get(ctx, "r1"); err != nil || st.Registered != 1 {
		t.Errorf("a row of the upload sent again: %d registered, %v", st.Registered, err)
	}
}

// While an upload's rows come in, the share follows what they keep and
// never counts less: each row not yet recorded, and each failed row a
// consumer recorded (a later attempt may bring a longer reason), is
// counted the largest result; once every row is in, the entry is final.
func TestShareFollowsTheRowsAsTheyComeIn(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	s := New(rdb, time.Hour, WithShare(Share{Bytes: 1 << 30}))
	up := newUpload("m1", 300)
	if _, err := s.Create(ctx, up); err != nil {
		t.Fatal(err)
	}
	first, _ := s.Usage(ctx, "seller-1")
	if err := s.SetState(ctx, "m1", Published, ""); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("가", MaxReasonJSON/3)
	steps := []struct {
		name string
		rows func(r int) RowResult
	}{
		{"100 registered", func(r int) RowResult {
			return RowResult{Row: r, State: Registered, ProductID: "P-" + strconv.Itoa(r), Attempts: 1}
		}},
		{"100 failed, short", func(r int) RowResult { return RowResult{Row: r, State: Failed, Code: "transient", Reason: "x"} }},
		{"the same 100 failed again, 1 KB", func(r int) RowResult { return RowResult{Row: r, State: Failed, Code: "invalid", Reason: long} }},
		{"the last 100 registered", func(r int) RowResult { return RowResult{Row: r, State: Registered, ProductID: "P-" + strconv.Itoa(r)} }},
	}
	starts := []int{2, 102, 102, 202}
	var last Usage
	for i, st := range steps {
		for r := starts[i]; r < starts[i]+100; r++ {
			if err := s.RecordRow(ctx, "m1", st.rows(r)); err != nil {
				t.Fatal(err)
			}
		}
		kept := keptBytes(t, s, "m1")
		u, err := s.Usage(ctx, "seller-1")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: Redis keeps %d bytes, the share counts %d", st.name, kept, u.Bytes)
		if u.Bytes < kept {
			t.Errorf("%s: the share counts %d bytes for %d kept", st.name, u.Bytes, kept)
		}
		last = u
	}
	if last.Bytes >= first.Bytes {
		t.Errorf("with every row in, the share counts %d bytes, as much as before any (%d)", last.Bytes, first.Bytes)
	}
	if v, _ := rdb.HGet(ctx, usageKey("seller-1"), "m1").Result(); strings.HasSuffix(v, " p") {
		t.Errorf("every row is in, the entry %q is still provisional", v)
	}
}

// A consumer's row result is at most MaxResultJSON bytes of JSON: the
// API's code, field and product id are cut, and details past the bound are
// left out (the reason says them). rowAllowance is what such a row keeps.
func TestRecordRowBoundsTheResult(t *testing.T) {
	if rowAllowance != rowCost(MaxResultJSON) {
		t.Fatalf("rowAllowance %d, want rowCost(MaxResultJSON) = %d", rowAllowance, rowCost(MaxResultJSON))
	}
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	s := New(rdb, time.Hour)
	big := strings.Repeat("\x01", 20_000)
	rr := RowResult{Row: 2, State: Failed, Code: big, Field: big, ProductID: big, Reason: big, Attempts: 1 << 62,
		At:      time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("x", -(23*3600+59*60))),
		Details: []Detail{{Code: "c", Params: map[string]string{"v": strings.Repeat("d", 5000)}}}}
	if err := s.RecordRow(ctx, "b1", rr); err != nil {
		t.Fatal(err)
	}
	small := RowResult{Row: 3, State: Failed, Code: "x", Reason: "r", Details: []Detail{{Code: "c", Params: map[string]string{"v": "d"}}}}
	if err := s.RecordRow(ctx, "b1", small); err != nil {
		t.Fatal(err)
	}
	for row, wantDetails := range map[string]bool{"2": false, "3": true} {
		js, err := rdb.HGet(ctx, key("b1", "rows"), row).Result()
		if err != nil {
			t.Fatal(err)
		}
		var got RowResult
		if err := json.Unmarshal([]byte(js), &got); err != nil {
			t.Fatal(err)
		}
		if len(js) > MaxResultJSON || (len(got.Details) > 0) != wantDetails {
			t.Errorf("row %s keeps %d bytes of JSON with %d details; want at most %d, details kept: %v", row, len(js), len(got.Details), MaxResultJSON, wantDetails)
		}
		if row == "2" && (JSONSize(got.Code) > MaxCodeJSON+2 || JSONSize(got.Field) > MaxFieldJSON+2 || JSONSize(got.ProductID) > MaxProductIDJSON+2) {
			t.Errorf("row 2 keeps code %d, field %d, product id %d bytes of JSON", JSONSize(got.Code), JSONSize(got.Field), JSONSize(got.ProductID))
		}
	}
}
