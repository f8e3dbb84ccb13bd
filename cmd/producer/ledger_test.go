package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// TestUploadSkipsRegisteredSKUs: `producer upload --wait` of a file whose
// first two SKUs the seller registered before publishes the other two only,
// says so, and exits 0 once those are registered; `status` counts the
// outcome on its own.
func TestUploadSkipsRegisteredSKUs(t *testing.T) {
	ctx := context.Background()
	brokers := testkafka.Start(t, 1, bulkreg.DefaultTopic)
	rs := testredis.Start(t)
	env := map[string]string{"BULKREG_KAFKA_BROKERS": strings.Join(brokers, ","), "BULKREG_REDIS_ADDRS": rs.Addr, "BULKREG_POLL_INTERVAL": "50ms"}
	store := uploadstatus.New(rs.Client(), time.Hour)
	ld := ledger.New(rs.Client(), ledger.Options{})

	path := writeSheet(t, "1000", "2000", "3000", "4000")
	data, _ := os.ReadFile(path)
	sum := sha256.Sum256(data)
	id := upload.UploadID("seller-1", hex.EncodeToString(sum[:]))
	sheet, err := excel.NewParser(excel.Options{}).Parse(ctx, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sheet.Rows[:2] {
		if _, err := ld.Mark(ctx, "seller-1", r.Product.SellerSKU, "00000000000000aa:9", r.Product.ContentHash(), "P-old-"+r.Product.SellerSKU); err != nil {
			t.Fatal(err)
		}
	}
	// The stand-in consumer registers the two published rows.
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			if st, err := store.Get(ctx, id); err == nil && st.State == uploadstatus.Published {
				for _, row := range []int{4, 5} {
					store.RecordRow(ctx, id, uploadstatus.RowResult{Row: row, State: uploadstatus.Registered, ProductID: "P-new"})
				}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	r := runCLI(env, "upload", "--seller", "seller-1", path, "--wait")
	<-done
	if r.code != exitOK || !strings.Contains(r.stderr, "2 rows published, 2 rows registered before and not sent again") ||
		!strings.Contains(r.stderr, "2 registered, 2 already registered, 0 failed of 4 rows") {
		t.Errorf("upload --wait: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if r := runCLI(env, "status", id); !strings.Contains(r.stdout, "4 rows: 2 registered, 2 already registered, 0 failed, 0 waiting") {
		t.Errorf("status: %+v", r)
	}
}
