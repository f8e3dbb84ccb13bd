package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// TestTheJudgeFailsADoctoredWorld holds the judge to its promises with no
// consumer running: a world whose rows, calls and statuses are written by
// hand, so each broken promise is known. A row published and never ended
// must fail the run (still waiting, no outcome, its partition's offset
// short of the end) however loose the settle time; a row failed by a 503
// and not dead-lettered, and a 429 from the limit, must each be named; a
// row registered by the API and recorded so must not be.
func TestTheJudgeFailsADoctoredWorld(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and the embedded broker")
	}
	ctx := context.Background()
	sc := Scenario{Seed: -1, Limit: 3, Window: 2 * time.Second, Margin: 100 * time.Millisecond,
		Policy: "sliding", Partitions: 1, RetryAttempts: 3}
	w := newWorld(t, "", sc)
	w.start = time.Now()

	const upload, seller = "doctored", "seller-a"
	rdb := redis.NewClient(&redis.Options{Addr: w.redis.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	store := uploadstatus.New(rdb, time.Hour)
	if _, err := store.Create(ctx, uploadstatus.Upload{ID: upload, SellerID: seller, FileName: "a.csv", Total: 3, Valid: 3, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	w.uploadIDs[upload] = seller

	// Row 1 never ends: published, no call, no result.
	// Row 2 failed after a 503, an answer about the API, not its content.
	// Row 3 registered: a 201 and its status says so.
	var msgs []kafka.Message
	for row := 1; row <= 3; row++ {
		p := bulkreg.Product{SellerSKU: fmt.Sprintf("a-%03d", row), Name: "Linen shirt", CategoryCode: "50000804",
			Price: 1000, Stock: 10, ShippingFee: 0}
		b, err := json.Marshal(bulkreg.NewMessage(upload, seller, row, p, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Value: b})
	}
	kw := &kafka.Writer{Addr: kafka.TCP(w.brokers...), Topic: bulkreg.DefaultTopic, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	if err := kw.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	_ = kw.Close()
	// The group has committed nothing past the first row, as a consumer
	// that took the partition and never finished a row would leave it
	// (a standalone commit: generation -1, no member).
	kc := &kafka.Client{Addr: kafka.TCP(w.brokers...)}
	res, err := kc.OffsetCommit(ctx, &kafka.OffsetCommitRequest{GroupID: group, GenerationID: -1,
		Topics: map[string][]kafka.OffsetCommit{bulkreg.DefaultTopic: {{Partition: 0, Offset: 0}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range res.Topics {
		for _, p := range ps {
			if p.Error != nil {
				t.Fatalf("commit offset 0 of partition %d: %v", p.Partition, p.Error)
			}
		}
	}

	register := func(seller, key, sku string) int {
		t.Helper()
		body := fmt.Sprintf(`{"seller_sku":%q,"name":"Linen shirt","category_code":"50000804","price":1000,"stock":10,"shipping_fee":0}`, sku)
		req, err := http.NewRequest(http.MethodPost, "http://"+w.registry+"/v1/sellers/"+seller+"/products", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if err := w.sb.SetChaos(sandbox.Chaos{Status: http.StatusServiceUnavailable}); err != nil {
		t.Fatal(err)
	}
	if got := register(seller, bulkreg.IdempotencyKey(upload, 2), "a-002"); got != http.StatusServiceUnavailable {
		t.Fatalf("row 2's call: %d, want the injected 503", got)
	}
	if err := w.sb.SetChaos(sandbox.Chaos{}); err != nil {
		t.Fatal(err)
	}
	if got := register(seller, bulkreg.IdempotencyKey(upload, 3), "a-003"); got != http.StatusCreated {
		t.Fatalf("row 3's call: %d, want 201", got)
	}
	for _, r := range []uploadstatus.RowResult{
		{Row: 2, State: uploadstatus.Failed, Code: "unavailable", Reason: "the API answered 503", At: time.Now()},
		{Row: 3, State: uploadstatus.Registered, At: time.Now()},
	} {
		if err := store.RecordRow(ctx, upload, r); err != nil {
			t.Fatal(err)
		}
	}
	// Another seller over its limit: limit + 1 calls within the window.
	got429 := 0
	for i := range sc.Limit + 1 {
		if register("seller-z", fmt.Sprintf("z:%d", i), fmt.Sprintf("z-%03d", i)) == http.StatusTooManyRequests {
			got429++
		}
	}
	if got429 != 1 {
		t.Fatalf("seller-z got %d × 429 for %d calls at limit %d, want 1", got429, sc.Limit+1, sc.Limit)
	}

	ok, why := w.settled(ctx)
	if ok {
		t.Fatalf("settled says nothing waits with row 1 never ended")
	}
	v := w.judge(ctx, ok, why, time.Now())
	all := strings.Join(v.violations, "\n")
	for _, want := range []string{
		"still waiting at the settle time",
		"3 rows not committed; seller-a's upload doctored has 1 of 3 rows waiting",
		"row doctored:1 (seller-a a-001) has no outcome in its upload status and is not dead-lettered (the API never answered its key)",
		"partition 0: committed offset 0, end 3",
		"row doctored:2 (seller-a a-002) failed and is not dead-lettered, but the API never refused its content (the API answered its key 503)",
		"429 from the limit: seller-z got 1 × 429",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the judge did not say %q; it said:\n%s", want, all)
		}
	}
	if strings.Contains(all, "doctored:3") {
		t.Errorf("the judge blamed row 3, registered and recorded so:\n%s", all)
	}
	// A partition left behind comes with who the broker gives it to.
	notes := strings.Join(v.notes, "\n")
	if !strings.Contains(notes, "the group is ") {
		t.Errorf("the judge did not describe the group of the partition left behind; its notes:\n%s", notes)
	}
	if len(v.violations) != 5 {
		t.Errorf("%d violations, want 5:\n%s", len(v.violations), all)
	}
	if v.rows != 3 || v.outcomes[uploadstatus.Registered] != 1 || v.outcomes[uploadstatus.Failed] != 1 {
		t.Errorf("rows %d, outcomes %v: want 3 rows, 1 registered, 1 failed", v.rows, v.outcomes)
	}
}
