package upload

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testsheet"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// badFile is a file of 500 rows, each refused (a price that is not a
// number), distinct by salt. long makes every text cell one character
// past its limit, with text that compresses poorly: the most a file of bad
// rows keeps for its report.
func badFile(t testing.TB, salt string, long bool) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	sh := f.GetSheetName(0)
	h := make([]any, len(testsheet.Header))
	for i, c := range testsheet.Header {
		h[i] = c
	}
	if err := f.SetSheetRow(sh, "A1", &h); err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		n := strconv.Itoa(i)
		vals := []any{"SKU-" + n, "상품 " + n, "50000123", "abc", 10, "브랜드", "https://img.example.com/" + n + ".jpg", "desc " + salt, 0}
		if long {
			vals = []any{noise(i, 101), noise(i+1, 201), noise(i+2, 65), "12,000원x", "-3", noise(i+3, 101),
				"https://" + noise(i+4, 2041), noise(i+5, 10_001) + salt, "x"}
		}
		if err := f.SetSheetRow(sh, "A"+strconv.Itoa(i+2), &vals); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// noise is n letters that look random (xorshift from seed).
func noise(seed, n int) string {
	b := make([]byte, n)
	x := uint64(seed)*7919 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte('a' + x%26)
	}
	return string(b)
}

// TestOneSellerFillsOnlyTheirShare: in a Redis of 20 MB with noeviction, one
// seller sends distinct files of 500 bad rows until refused. The refusal is
// the seller's share (a *ShareFullError saying what to do and when), not
// Redis out of memory; Redis is far from full; another seller's normal
// upload of 500 rows then goes through, and so does a third seller's file
// of bad rows.
func TestOneSellerFillsOnlyTheirShare(t *testing.T) {
	const maxmemory = 20 << 20
	e := newEnv(t, nil, WriterOptions{})
	e.rdb = testredis.Start(t, "--maxmemory", strconv.Itoa(maxmemory), "--maxmemory-policy", "noeviction").Client()
	share := uploadstatus.Share{Bytes: 8 << 20, Uploads: 40}
	e.store = uploadstatus.New(e.rdb, 7*24*time.Hour, uploadstatus.WithShare(share))
	e.up.Statuses, e.up.Index = e.store, e.store
	ctx := context.Background()

	var refused error
	through := 0
	for i := range 200 {
		_, err := e.up.Upload(ctx, Request{SellerID: "greedy", FileName: "bad.xlsx", Data: badFile(t, "greedy-"+strconv.Itoa(i), i%2 == 0)})
		if err != nil {
			refused = err
			break
		}
		through++
	}
	sf, ok := ShareFull(refused)
	if !ok || !errors.Is(refused, ErrShareFull) {
		t.Fatalf("after %d uploads the seller got %v, want their share full", through, refused)
	}
	used := usedMemory(t, e.rdb)
	t.Logf("%d files of 500 bad rows went through (%d uploads, %d bytes charged); then: %v; Redis used %d of %d bytes",
		through, sf.Uploads, sf.Bytes, refused, used, maxmemory)
	if through < 3 || sf.Bytes > share.Bytes || sf.Uploads != through {
		t.Errorf("%d uploads went through, %d charged in %d bytes: want at least 3, all counted, within the share of %d", through, sf.Uploads, sf.Bytes, share.Bytes)
	}
	if sf.RetryAfter <= 0 || sf.RetryAfter > DefaultCheckOnlyRetention {
		t.Errorf("the refusal says to wait %v; files that published nothing leave within %v", sf.RetryAfter, DefaultCheckOnlyRetention)
	}
	for _, want := range []string{"wait until older uploads expire", "delete old uploads", "raise the share"} {
		if !strings.Contains(refused.Error(), want) {
			t.Errorf("the refusal %q does not say %q", refused, want)
		}
	}
	if used > maxmemory*3/4 {
		t.Errorf("Redis uses %d of its %d bytes after one seller filled their share", used, maxmemory)
	}

	res, err := e.up.Upload(ctx, Request{SellerID: "other", FileName: "ok.xlsx", Data: xlsx(t, "other", validRows(500)...)})
	if err != nil || res.Published != 500 {
		t.Fatalf("another seller's upload of 500 rows: %d published, %v", res.Published, err)
	}
	if _, err := e.up.Upload(ctx, Request{SellerID: "third", FileName: "bad.xlsx", Data: badFile(t, "third", true)}); err != nil {
		t.Errorf("a third seller's file of bad rows: %v", err)
	}
}

// An upload that publishes nothing is kept --check-only-retention; one that
// publishes rows is kept the whole retention.
func TestCheckOnlyUploadsExpireEarly(t *testing.T) {
	e := newEnv(t, nil, WriterOptions{})
	e.store = uploadstatus.New(e.rdb, 7*24*time.Hour)
	e.up.Statuses, e.up.Index = e.store, e.store
	e.up.CheckOnlyRetention = 90 * time.Minute
	ctx := context.Background()
	bad, err := e.up.Upload(ctx, Request{SellerID: "s", FileName: "bad.xlsx", Data: badFile(t, "check-only", false)})
	if err != nil || bad.Published != 0 || bad.Invalid != 500 {
		t.Fatalf("bad file: %+v, %v", bad, err)
	}
	good, err := e.up.Upload(ctx, Request{SellerID: "s", FileName: "ok.xlsx", Data: xlsx(t, "check-only", validRows(3)...)})
	if err != nil || good.Published != 3 {
		t.Fatalf("good file: %+v, %v", good, err)
	}
	for _, tc := range []struct {
		id       string
		parts    []string
		min, max time.Duration
	}{
		{bad.UploadID, []string{"meta", "states", "rows", "cells"}, 89 * time.Minute, 90 * time.Minute},
		{good.UploadID, []string{"meta", "cells"}, 7*24*time.Hour - time.Minute, 7 * 24 * time.Hour},
	} {
		for _, part := range tc.parts {
			ttl, err := e.rdb.PTTL(ctx, "bulkreg:upload:{"+tc.id+"}:"+part).Result()
			if err != nil || ttl < tc.min || ttl > tc.max {
				t.Errorf("upload %s %s expires in %v (%v), want %v to %v", tc.id, part, ttl, err, tc.min, tc.max)
			}
		}
	}
}

// TestShareChargesWhatRedisKeeps: what a seller's share is charged for an
// upload covers what Redis keeps of it (MEMORY USAGE of its keys), once
// its rows' results are in, and is not far above it.
func TestShareChargesWhatRedisKeeps(t *testing.T) {
	e := newEnv(t, nil, WriterOptions{})
	ctx := context.Background()
	for i, tc := range []struct {
		name string
		data []byte
	}{
		{"500 bad rows", badFile(t, "charge", false)},
		{"500 bad rows, every text one past its limit", badFile(t, "charge", true)},
		{"500 valid rows, registered", xlsx(t, "charge", validRows(500)...)},
	} {
		seller := "charge-" + strconv.Itoa(i)
		res, err := e.up.Upload(ctx, Request{SellerID: seller, FileName: "f.xlsx", Data: tc.data})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// What the consumers record: each published row registered.
		for row := 2; row < 2+res.Published; row++ {
			if err := e.store.RecordRows(ctx, res.UploadID, []uploadstatus.RowResult{{Row: row, State: uploadstatus.Registered,
				ProductID: "P-" + strconv.Itoa(100000+row), Attempts: 1, At: time.Now()}}); err != nil {
				t.Fatal(err)
			}
		}
		var kept int64
		for _, part := range []string{"meta", "states", "rows", "cells", "published"} {
			n, err := e.rdb.MemoryUsage(ctx, "bulkreg:upload:{"+res.UploadID+"}:"+part, 0).Result()
			if err == nil {
				kept += n
			}
		}
		u, err := e.store.Usage(ctx, seller)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: Redis keeps %d bytes, the share is charged %d", tc.name, kept, u.Bytes)
		if u.Bytes < kept || u.Bytes > kept*3/2 {
			t.Errorf("%s: charged %d bytes for %d kept; want at least what is kept and at most half again", tc.name, u.Bytes, kept)
		}
	}
}

// The share's metrics keep one series whatever the number of sellers (a
// seller label would keep one per seller for the life of the process): the
// usage of each seller whose upload was handled is observed, and how full
// their share is.
func TestShareMetricsHaveNoSellerLabel(t *testing.T) {
	e := newEnv(t, nil, WriterOptions{})
	e.store = uploadstatus.New(e.rdb, time.Hour, uploadstatus.WithShare(uploadstatus.Share{Bytes: 64 << 20, Uploads: 4}))
	e.up.Statuses, e.up.Index = e.store, e.store
	reg := prometheus.NewRegistry()
	e.up.Metrics = NewMetrics(reg)
	ctx := context.Background()
	const sellers = 30
	for i := range sellers {
		seller := "seller-" + strconv.Itoa(i)
		if _, err := e.up.Upload(ctx, Request{SellerID: seller, FileName: "f.xlsx", Data: xlsx(t, seller, validRows(2)...)}); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.Contains(name, "seller") {
			continue
		}
		seen[name] = true
		if len(mf.GetMetric()) != 1 || len(mf.GetMetric()[0].GetLabel()) != 0 {
			t.Errorf("%s: %d series, labels %v; want one series without labels", name, len(mf.GetMetric()), mf.GetMetric()[0].GetLabel())
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != sellers {
			t.Errorf("%s: %d observations, want one per upload (%d)", name, h.GetSampleCount(), sellers)
		}
		if name == "bulkreg_producer_seller_share_used_ratio" {
			// Each seller keeps 1 of 4 uploads: a quarter of their share.
			if got := h.GetSampleSum() / float64(sellers); got < 0.25 || got > 0.26 {
				t.Errorf("%s: mean %.3f, want each seller's 1 upload of 4 (0.25)", name, got)
			}
		}
	}
	for _, want := range []string{"bulkreg_producer_seller_usage_bytes", "bulkreg_producer_seller_share_used_ratio"} {
		if !seen[want] {
			t.Errorf("%s is not registered", want)
		}
	}
}
