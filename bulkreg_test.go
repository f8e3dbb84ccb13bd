package bulkreg

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMessageRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 22, 9, 30, 15, 0, time.UTC)
	m := NewMessage("up1", "s1", 17, Product{SellerSKU: "A-1", Name: "Mug", CategoryCode: "50000001", Price: 12000, Stock: 10}, at)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"v":1`, `"upload_id":"up1"`, `"seller_id":"s1"`, `"row":17`, `"idempotency_key":"up1:17"`, `"price":12000`, `"enqueued_at":"2026-11-22T09:30:15Z"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("encoded message %s lacks %s", b, want)
		}
	}
	got, err := DecodeMessage(b)
	if err != nil {
		t.Fatalf("DecodeMessage: %v", err)
	}
	if got != m {
		t.Errorf("round trip: got %+v, want %+v", got, m)
	}
}

func TestDecodeMessageRejects(t *testing.T) {
	cases := []struct{ name, value, field string }{
		{"not json", `{"v":1,`, "JSON"},
		{"wrong version", `{"v":2,"upload_id":"u","seller_id":"s","row":1,"idempotency_key":"u:1"}`, "field v"},
		{"no upload", `{"v":1,"seller_id":"s","row":1,"idempotency_key":":1"}`, "upload_id"},
		{"no seller", `{"v":1,"upload_id":"u","row":1,"idempotency_key":"u:1"}`, "seller_id"},
		{"row zero", `{"v":1,"upload_id":"u","seller_id":"s","row":0,"idempotency_key":"u:0"}`, "field row"},
		{"key mismatch", `{"v":1,"upload_id":"u","seller_id":"s","row":2,"idempotency_key":"u:3"}`, "idempotency_key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeMessage([]byte(c.value))
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("err = %v, want ErrBadMessage", err)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("err %q does not name %q", err, c.field)
			}
		})
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add([]byte(`{"v":1,"upload_id":"u","seller_id":"s","row":1,"idempotency_key":"u:1","product":{"price":1}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
			return
		}
		if m.IdempotencyKey != IdempotencyKey(m.UploadID, m.Row) || m.Row < 1 || m.SellerID == "" {
			t.Fatalf("accepted an inconsistent message %+v", m)
		}
	})
}
