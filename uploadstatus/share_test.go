package uploadstatus

import (
	"context"
	"encoding/json"
	"errors"
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
