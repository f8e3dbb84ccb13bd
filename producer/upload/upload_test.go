package upload

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

func TestUploadID(t *testing.T) {
	a := UploadID("seller-1", "aa")
	cases := []struct {
		seller, hash string
		same         bool
	}{
		{"seller-1", "aa", true},
		{"seller-2", "aa", false},
		{"seller-1", "ab", false},
		{"seller-1\x00a", "a", false}, // the separator keeps seller and hash apart
	}
	for _, c := range cases {
		if got := UploadID(c.seller, c.hash); (got == a) != c.same || len(got) != 16 {
			t.Errorf("UploadID(%q, %q) = %q; same as %q: want %v", c.seller, c.hash, got, a, c.same)
		}
	}
}

// TestPublishedMessagesMatchContract: kcat reads what an upload published and
// each message is exactly the contract's JSON, keyed by the seller.
func TestPublishedMessagesMatchContract(t *testing.T) {
	e := newEnv(t, nil, WriterOptions{})
	rows := validRows(5)
	rows[2].Price = "12,000원" // row 4 is invalid
	data := xlsx(t, "contract", rows...)
	before := time.Now().UTC().Truncate(time.Second)
	res, err := e.up.Upload(context.Background(), Request{SellerID: "seller-1", FileName: "f.xlsx", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if res.Published != 4 || res.Invalid != 1 || res.Duplicate || res.UploadID != UploadID("seller-1", sha(data)) {
		t.Fatalf("result %+v: want 4 published, 1 invalid, id from seller and file hash", res)
	}
	msgs := consume(t, e.brokers)
	if len(msgs) != 4 {
		t.Fatalf("kcat read %d messages, want 4", len(msgs))
	}
	wantFields := []string{"enqueued_at", "idempotency_key", "product", "row", "seller_id", "upload_id", "v"}
	wantProduct := []string{"brand", "category_code", "description", "image_url", "name", "price", "seller_sku", "shipping_fee", "stock"}
	var gotRows []int
	for _, m := range msgs {
		if m.Key == nil || *m.Key != "seller-1" {
			t.Errorf("message at offset %d: key %v, want seller-1", m.Offset, m.Key)
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(m.Payload), &raw); err != nil {
			t.Fatalf("payload %q: %v", m.Payload, err)
		}
		if got := slices.Sorted(mapKeys(raw)); !slices.Equal(got, wantFields) {
			t.Errorf("payload fields %v, want %v", got, wantFields)
		}
		var product map[string]json.RawMessage
		json.Unmarshal(raw["product"], &product)
		if got := slices.Sorted(mapKeys(product)); !slices.Equal(got, wantProduct) {
			t.Errorf("product fields %v, want %v", got, wantProduct)
		}
		var at string
		json.Unmarshal(raw["enqueued_at"], &at)
		ts, err := time.Parse(time.RFC3339, at)
		if err != nil || ts.Before(before) || ts.After(time.Now().Add(time.Second)) {
			t.Errorf("enqueued_at %q: not an RFC3339 time of this upload (%v)", at, err)
		}
		msg, err := bulkreg.DecodeMessage([]byte(m.Payload))
		if err != nil {
			t.Fatal(err)
		}
		sku := rows[msg.Row-2].SKU
		if msg.V != 1 || msg.UploadID != res.UploadID || msg.SellerID != "seller-1" || msg.IdempotencyKey != res.UploadID+":"+itoa(msg.Row) ||
			msg.Product.SellerSKU != sku || msg.Product.Price != int64(1000+msg.Row-2) || msg.Product.Name != "상품 "+sku {
			t.Errorf("message %+v does not carry row %d of the file", msg, msg.Row)
		}
		gotRows = append(gotRows, msg.Row)
	}
	slices.Sort(gotRows)
	if !slices.Equal(gotRows, []int{2, 3, 5, 6}) {
		t.Errorf("published rows %v, want 2 3 5 6 (row 4 is invalid)", gotRows)
	}
	st, err := e.store.Get(context.Background(), res.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != uploadstatus.Published || st.Total != 5 || st.Failed != 1 || st.Waiting != 4 || len(st.Rows) != 1 ||
		st.Rows[0].Row != 4 || !strings.Contains(st.Rows[0].Reason, "D4") || st.Rows[0].Field != "price" {
		t.Errorf("status %+v: want published, 5 rows, row 4 failed with a reason naming D4", st)
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestDuplicateUploadPublishesNothing(t *testing.T) {
	e := newEnv(t, nil, WriterOptions{})
	ctx := context.Background()
	data := xlsx(t, "dup", validRows(3)...)
	first, err := e.up.Upload(ctx, Request{SellerID: "s", FileName: "a.xlsx", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.up.Upload(ctx, Request{SellerID: "s", FileName: "renamed.xlsx", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.UploadID != first.UploadID || again.Published != 0 || again.Upload.FileName != "a.xlsx" {
		t.Errorf("second upload %+v: want a duplicate of %s (a.xlsx), nothing published", again, first.UploadID)
	}
	// Another seller with the same file is a different upload.
	other, err := e.up.Upload(ctx, Request{SellerID: "t", FileName: "a.xlsx", Data: data})
	if err != nil || other.Duplicate || other.UploadID == first.UploadID || other.Published != 3 {
		t.Errorf("same file from another seller: %+v, %v", other, err)
	}
	if n := len(consume(t, e.brokers)); n != 6 {
		t.Errorf("topic holds %d messages, want 6 (3 per seller, none for the duplicate)", n)
	}
}

func TestStrictRefusesInvalidRows(t *testing.T) {
	e := newEnv(t, nil, WriterOptions{})
	rows := validRows(3)
	rows[1].Price = "-5"
	data := xlsx(t, "strict", rows...)
	res, err := e.up.Upload(context.Background(), Request{SellerID: "s", Data: data, Strict: true})
	var ir *InvalidRowsError
	if !errors.Is(err, ErrRefused) || !errors.As(err, &ir) || len(ir.Problems) != 1 || ir.Problems[0].Cell != "D3" {
		t.Fatalf("strict upload: err = %v, want ErrRefused with one problem in D3", err)
	}
	if _, err := e.store.Get(context.Background(), res.UploadID); !errors.Is(err, uploadstatus.ErrNotFound) {
		t.Errorf("a refused strict upload was recorded: %v", err)
	}
	if n := len(consume(t, e.brokers)); n != 0 {
		t.Errorf("strict refusal published %d messages", n)
	}
	// Without --strict the same file goes through.
	if res, err := e.up.Upload(context.Background(), Request{SellerID: "s", Data: data}); err != nil || res.Published != 2 || res.Invalid != 1 {
		t.Errorf("non-strict: %+v %v", res, err)
	}
}

// TestKafkaFailsPartWay: the broker takes the first batch of a 500-row upload
// and then fails; the upload is answered as failed, and the same file sent
// again publishes the rows Kafka had not acknowledged under the same upload
// id and idempotency keys: every row once.
func TestKafkaFailsPartWay(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var produces, failing atomic.Int32
	failing.Store(1)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if produces.Add(1) > 1 && failing.Load() == 1 {
			return nil, errors.New("injected broker failure"), true // closes the connection
		}
		return nil, nil, false
	})
	e := newEnv(t, c.ListenAddrs(), WriterOptions{BatchSize: 100, MaxAttempts: 2, WriteTimeout: time.Second})
	ctx := context.Background()
	data := xlsx(t, "partway", validRows(500)...)
	start := time.Now()
	res, err := e.up.Upload(ctx, Request{SellerID: "s", Data: data})
	if !errors.Is(err, ErrPublish) {
		t.Fatalf("upload with a failing broker: err = %v, want ErrPublish", err)
	}
	t.Logf("failure answered after %v", time.Since(start))
	st, _ := e.store.Get(ctx, res.UploadID)
	if st.State != uploadstatus.PublishFailed || st.StateReason == "" {
		t.Errorf("state %q (%q), want publish_failed with a reason", st.State, st.StateReason)
	}
	firstTry := consume(t, e.brokers)
	if len(firstTry) == 0 || len(firstTry) >= 500 {
		t.Fatalf("the first attempt left %d rows in Kafka, want some but not all (a failure part way)", len(firstTry))
	}

	failing.Store(0)
	again, err := e.up.Upload(ctx, Request{SellerID: "s", Data: data})
	if err != nil {
		t.Fatalf("the same file again: %v", err)
	}
	if want := 500 - len(firstTry); again.UploadID != res.UploadID || !again.Resumed || again.Duplicate || again.Published != want {
		t.Errorf("retry %+v: want the same id %s, resumed, the %d rows Kafka had not acknowledged published", again, res.UploadID, want)
	}
	keys := map[string]int{}
	for _, m := range consume(t, e.brokers) {
		msg, err := bulkreg.DecodeMessage([]byte(m.Payload))
		if err != nil || msg.UploadID != res.UploadID {
			t.Fatalf("message %q: %v", m.Payload, err)
		}
		keys[msg.IdempotencyKey]++
	}
	if len(keys) != 500 {
		t.Errorf("%d distinct idempotency keys in Kafka, want 500", len(keys))
	}
	for r := 2; r <= 501; r++ {
		if c := keys[bulkreg.IdempotencyKey(res.UploadID, r)]; c != 1 {
			t.Errorf("row %d published %d times, want once", r, c)
		}
	}
	if st, _ := e.store.Get(ctx, res.UploadID); st.State != uploadstatus.Published {
		t.Errorf("state after the retry: %q", st.State)
	}
	// Now it is a plain duplicate.
	if dup, err := e.up.Upload(ctx, Request{SellerID: "s", Data: data}); err != nil || !dup.Duplicate {
		t.Errorf("third upload: %+v %v, want a duplicate", dup, err)
	}
}

func TestDeadBroker(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	addrs := c.ListenAddrs()
	c.Close() // nothing listens there any more
	e := newEnv(t, addrs, WriterOptions{MaxAttempts: 2, WriteTimeout: 500 * time.Millisecond})
	e.up.PublishTimeout = 5 * time.Second
	start := time.Now()
	_, err = e.up.Upload(context.Background(), Request{SellerID: "s", Data: xlsx(t, "dead", validRows(3)...)})
	if !errors.Is(err, ErrPublish) || !strings.Contains(err.Error(), "send the same file again") {
		t.Errorf("upload to a dead broker: %v, want ErrPublish telling to send again", err)
	}
	if took := time.Since(start); took > 6*time.Second {
		t.Errorf("a dead broker took %v to answer, want within the publish timeout", took)
	}
}

func TestInProgressIsNotPublishedTwice(t *testing.T) {
	e := newEnv(t, nil, WriterOptions{})
	ctx := context.Background()
	data := xlsx(t, "inprogress", validRows(2)...)
	id := UploadID("s", sha(data))
	// Another producer created the upload and is publishing it.
	if _, err := e.store.Create(ctx, uploadstatus.Upload{ID: id, SellerID: "s", Total: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.up.Upload(ctx, Request{SellerID: "s", Data: data}); !errors.Is(err, ErrInProgress) {
		t.Errorf("upload while another publishes: %v, want ErrInProgress", err)
	}
	if n := len(consume(t, e.brokers)); n != 0 {
		t.Errorf("%d messages published", n)
	}
	// That producer died: once its state is stale the same file is published.
	e.up.StaleAfter = 300 * time.Millisecond
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := e.up.Upload(ctx, Request{SellerID: "s", Data: data})
		if err == nil {
			if !res.Resumed || res.Published != 2 || res.UploadID != id {
				t.Errorf("takeover of a stale upload: %+v", res)
			}
			break
		}
		if !errors.Is(err, ErrInProgress) || time.Now().After(deadline) {
			t.Fatalf("upload after the stale time: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(consume(t, e.brokers)); n != 2 {
		t.Errorf("%d messages after the takeover, want 2", n)
	}
}
