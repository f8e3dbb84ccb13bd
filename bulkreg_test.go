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
		{"tab in upload", `{"v":1,"upload_id":"u\t1","seller_id":"s","row":1,"idempotency_key":"u\t1:1","enqueued_at":"2026-11-22T09:30:15Z"}`, "upload_id"},
		{"newline in upload", `{"v":1,"upload_id":"u\n1","seller_id":"s","row":1,"idempotency_key":"u\n1:1","enqueued_at":"2026-11-22T09:30:15Z"}`, "upload_id"},
		{"hash tag in upload", `{"v":1,"upload_id":"u}{x","seller_id":"s","row":1,"idempotency_key":"u}{x:1","enqueued_at":"2026-11-22T09:30:15Z"}`, "upload_id"},
		{"colon in upload", `{"v":1,"upload_id":"u:2","seller_id":"s","row":1,"idempotency_key":"u:2:1","enqueued_at":"2026-11-22T09:30:15Z"}`, "upload_id"},
		{"upload too long", `{"v":1,"upload_id":"` + strings.Repeat("a", 65) + `","seller_id":"s","row":1,"idempotency_key":"` + strings.Repeat("a", 65) + `:1","enqueued_at":"2026-11-22T09:30:15Z"}`, "65 characters"},
		{"row too high", `{"v":1,"upload_id":"u","seller_id":"s","row":16777217,"idempotency_key":"u:16777217","enqueued_at":"2026-11-22T09:30:15Z"}`, "field row"},
		{"no seller_sku", `{"v":1,"upload_id":"u","seller_id":"s","row":1,"idempotency_key":"u:1","product":{"seller_sku":" "},"enqueued_at":"2026-11-22T09:30:15Z"}`, "seller_sku"},
		{"no enqueued_at", `{"v":1,"upload_id":"u","seller_id":"s","row":1,"idempotency_key":"u:1"}`, "enqueued_at"},
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
	f.Add([]byte(`{"v":1,"upload_id":"u","seller_id":"s","row":1,"idempotency_key":"u:1","product":{"price":1},"enqueued_at":"2026-11-22T09:30:15Z"}`))
	f.Add([]byte(`{"v":1,"upload_id":"u\t1","seller_id":"s","row":1,"idempotency_key":"u\t1:1","enqueued_at":"2026-11-22T09:30:15Z"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
			return
		}
		if m.IdempotencyKey != IdempotencyKey(m.UploadID, m.Row) || m.Row < 1 || m.Row > MaxRowNumber || ValidSellerID(m.SellerID) != nil || ValidUploadID(m.UploadID) != nil {
			t.Fatalf("accepted an inconsistent message %+v", m)
		}
	})
}

func TestDecodeRecordKeyMustNameTheSeller(t *testing.T) {
	v, err := json.Marshal(NewMessage("up1", "seller-a", 3, Product{SellerSKU: "A-1"}, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		key  string
		ok   bool
	}{
		{"same seller", "seller-a", true},
		{"other seller", "seller-b", false},
		{"no key", "", false},
		{"prefix of the seller", "seller-", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := DecodeRecord([]byte(c.key), v)
			if c.ok {
				if err != nil || m.SellerID != "seller-a" {
					t.Fatalf("DecodeRecord = %+v, %v; want seller-a's row", m, err)
				}
				return
			}
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("err = %v, want ErrBadMessage", err)
			}
			if !strings.Contains(err.Error(), "seller_id") || !strings.Contains(err.Error(), `"`+c.key+`"`) {
				t.Errorf("err %q does not name the key %q and the field seller_id", err, c.key)
			}
		})
	}
	if _, err := DecodeRecord([]byte("seller-a"), []byte("{")); !errors.Is(err, ErrBadMessage) {
		t.Errorf("a bad value with a good key: err = %v, want ErrBadMessage", err)
	}
}

func TestContentHash(t *testing.T) {
	base := Product{SellerSKU: "A-1", Name: "Mug", CategoryCode: "50000001", Price: 12000, Stock: 10, Brand: "B", ImageURL: "https://x/1.jpg", Description: "d", ShippingFee: 3000}
	h := base.ContentHash()
	// The ledgers in Redis hold hashes written by earlier versions: the
	// hash of one product never changes.
	if h != "e9b551ddfaff15c7b43c57402cd2d96e" {
		t.Fatalf("hash %q, want e9b551ddfaff15c7b43c57402cd2d96e (the SHA-256 of json.Marshal's body, cut to 128 bits)", h)
	}
	if base.ContentHash() != h {
		t.Fatal("the hash of one product differs between two calls")
	}
	// Every field the API receives changes the hash.
	changes := map[string]func(p *Product){
		"seller_sku": func(p *Product) { p.SellerSKU = "A-2" }, "name": func(p *Product) { p.Name = "Cup" },
		"category_code": func(p *Product) { p.CategoryCode = "50000002" }, "price": func(p *Product) { p.Price = 12001 },
		"stock": func(p *Product) { p.Stock = 11 }, "brand": func(p *Product) { p.Brand = "" },
		"image_url": func(p *Product) { p.ImageURL = "https://x/2.jpg" }, "description": func(p *Product) { p.Description = "e" },
		"shipping_fee": func(p *Product) { p.ShippingFee = 0 },
	}
	for field, change := range changes {
		p := base
		change(&p)
		if p.ContentHash() == h {
			t.Errorf("changing %s leaves the hash unchanged", field)
		}
	}
}

func TestValidSellerID(t *testing.T) {
	ok := []string{"s1", "seller-a", "SELLER_B", "a", strings.Repeat("x", MaxSellerIDLen), "0-9_AZaz"}
	for _, id := range ok {
		if err := ValidSellerID(id); err != nil {
			t.Errorf("ValidSellerID(%q) = %v, want nil", id, err)
		}
	}
	bad := []string{"", "..", "a/b", "a\nb", "seller a", "a.b", "판매자", "a%2Fb", strings.Repeat("x", MaxSellerIDLen+1), "a\x00"}
	for _, id := range bad {
		err := ValidSellerID(id)
		if !errors.Is(err, ErrBadSellerID) {
			t.Errorf("ValidSellerID(%q) = %v, want ErrBadSellerID", id, err)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("ValidSellerID(%q): the message %q holds a raw line break", id, err)
		}
	}
}

// A message naming a seller outside the format is a bad message: the
// consumer dead-letters it instead of building a Redis key or a registry
// URL from it.
func TestDecodeMessageRefusesBadSellerIDs(t *testing.T) {
	for _, id := range []string{"..", "a/b", "a\nb"} {
		b, err := json.Marshal(NewMessage("u", id, 1, Product{}, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = DecodeMessage(b)
		if !errors.Is(err, ErrBadMessage) || !errors.Is(err, ErrBadSellerID) {
			t.Errorf("seller %q: err = %v, want ErrBadMessage wrapping ErrBadSellerID", id, err)
		}
	}
}

// FuzzProductJSON: AppendJSON writes what encoding/json writes for every
// product, so the content hash and the call's body are those of the
// contract (design.md) whatever a spreadsheet holds.
func FuzzProductJSON(f *testing.F) {
	f.Add("SKU-1", "무선 마우스 <블랙> & 화이트", "C-100", int64(19900), int64(3), "", "https://x/a.png?a=1&b=2", "줄\n바꿈\t\"인용\"\\", int64(0))
	f.Add("\x00\x1f\x7f", "\u2028\u2029\ufffd", "\xff\xfe", int64(-1), int64(1<<62), "a\x80b", "\xe2\x80", "\b\f\r", int64(-9223372036854775808))
	f.Fuzz(func(t *testing.T, sku, name, cat string, price, stock int64, brand, image, desc string, fee int64) {
		p := Product{SellerSKU: sku, Name: name, CategoryCode: cat, Price: price, Stock: stock, Brand: brand, ImageURL: image, Description: desc, ShippingFee: fee}
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.AppendJSON([]byte("prefix")); string(got) != "prefix"+string(want) {
			t.Fatalf("AppendJSON = %s\njson.Marshal = %s", got[len("prefix"):], want)
		}
	})
}

// BenchmarkProductJSON: the product's body as the consumer writes it twice a
// row (its content hash, its call), by AppendJSON and by encoding/json.
func BenchmarkProductJSON(b *testing.B) {
	p := Product{SellerSKU: "SKU-000123", Name: "무선 블루투스 마우스 (블랙)", CategoryCode: "50000001", Price: 19900, Stock: 30,
		Brand: "브랜드", ImageURL: "https://img.example.com/p/123.jpg", Description: "조용한 클릭, 2.4GHz & 블루투스", ShippingFee: 3000}
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 512)
		for b.Loop() {
			buf = p.AppendJSON(buf[:0])
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
