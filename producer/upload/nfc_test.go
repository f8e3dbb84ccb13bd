package upload

import (
	"context"
	"strconv"
	"testing"
	"time"

	"golang.org/x/text/unicode/norm"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testsheet"
	"github.com/bulkreg/bulkreg/ledger"
)

// TestOneSKUOneFormAcrossUploads: a SKU registered from a file in one
// Unicode form is already registered for a file in the other form, whether
// the ledger holds it under its NFC key or, written by a version that kept
// SKUs as typed, under the NFD form with the hash of the product as typed.
// Changed content under the other form is still a problem on the SKU's cell.
func TestOneSKUOneFormAcrossUploads(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil, WriterOptions{})
	rdb := testredis.Start(t).Client()
	ld := ledger.New(rdb, ledger.Options{})
	e.up.Ledger = ld
	nfc, nfd := "가방-001", norm.NFD.String("가방-001")
	files := map[string][]byte{
		"nfc": testsheet.XLSX(t, "nfc", testsheet.Row{SKU: nfc, Price: "12000"}),
		"nfd": testsheet.XLSX(t, "nfd", testsheet.Row{SKU: nfd, Price: "12000"}),
	}
	// product is the row as this version sends it, asTyped as a version
	// that kept text as typed sent it (the NFD file's name and image URL
	// hold the SKU as typed too).
	product := func(t *testing.T, file string) bulkreg.Product {
		t.Helper()
		ps := products(t, files[file])
		p, ok := ps[nfc]
		if !ok {
			t.Fatalf("the %s file's product is not keyed by the NFC SKU: %v", file, ps)
		}
		return p
	}
	asTyped := func(t *testing.T, file string, p bulkreg.Product) bulkreg.Product {
		t.Helper()
		if file == "nfd" {
			p.SellerSKU, p.Name, p.ImageURL = nfd, "상품 "+nfd, "https://img.example.com/"+nfd+".jpg"
		}
		return p
	}
	legacy := func(t *testing.T, seller, key, hash string) {
		t.Helper()
		entry := "r\t" + hash + "\t0000000000000001:2\t\tP-1\t" + strconv.FormatInt(time.Now().UnixMilli(), 10)
		if err := rdb.HSet(ctx, ledger.Key(seller), key, entry).Err(); err != nil {
			t.Fatal(err)
		}
	}
	decompose := func(p bulkreg.Product) bulkreg.Product {
		p.SellerSKU, p.Name, p.ImageURL, p.Brand, p.Description = norm.NFD.String(p.SellerSKU), norm.NFD.String(p.Name), norm.NFD.String(p.ImageURL), norm.NFD.String(p.Brand), norm.NFD.String(p.Description)
		return p
	}
	for i, tc := range []struct {
		name      string
		store     func(t *testing.T, seller string)
		upload    string
		published int
		already   int
		invalid   int
	}{
		{"registered from the NFC file, the NFD file uploaded", func(t *testing.T, s string) {
			if _, err := ld.Mark(ctx, s, nfc, "0000000000000001:2", product(t, "nfd").ContentHash(), "P-1"); err != nil {
				t.Fatal(err)
			}
		}, "nfd", 0, 1, 0},
		{"registered from the NFD file (through the ledger), the NFC file uploaded", func(t *testing.T, s string) {
			if _, err := ld.Mark(ctx, s, nfd, "0000000000000001:2", product(t, "nfc").ContentHash(), "P-1"); err != nil {
				t.Fatal(err)
			}
		}, "nfc", 0, 1, 0},
		{"an older version's entry under NFD with the product as typed, the same NFD file again", func(t *testing.T, s string) {
			legacy(t, s, nfd, asTyped(t, "nfd", product(t, "nfd")).ContentHash())
		}, "nfd", 0, 1, 0},
		{"an older version's entry of a file decomposed throughout, the NFC file uploaded", func(t *testing.T, s string) {
			legacy(t, s, nfd, decompose(product(t, "nfc")).ContentHash())
		}, "nfc", 0, 1, 0},
		{"an older version's entry under NFD with other content", func(t *testing.T, s string) {
			p := asTyped(t, "nfd", product(t, "nfd"))
			p.Price++
			legacy(t, s, nfd, p.ContentHash())
		}, "nfd", 0, 0, 1},
		{"nothing registered: published", func(t *testing.T, s string) {}, "nfd", 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seller := "seller-nfc-" + strconv.Itoa(i)
			tc.store(t, seller)
			res, err := e.up.Upload(ctx, Request{SellerID: seller, FileName: "f.xlsx", Data: files[tc.upload]})
			if err != nil {
				t.Fatal(err)
			}
			if res.Published != tc.published || res.AlreadyRegistered != tc.already || res.Invalid != tc.invalid {
				t.Fatalf("%d published, %d already registered, %d invalid; want %d, %d, %d", res.Published, res.AlreadyRegistered, res.Invalid, tc.published, tc.already, tc.invalid)
			}
			if tc.invalid == 1 {
				if ps := res.Sheet.Rows[0].Problems; len(ps) != 1 || ps[0].Cell != "A2" || ps[0].Code != CodeRegisteredOtherContent {
					t.Errorf("problems %+v, want one on A2: registered with other content", ps)
				}
			}
		})
	}
	// What was published carries the NFC form, typed in NFD.
	msgs := consume(t, e.brokers)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	m, err := bulkreg.DecodeRecord([]byte(*msgs[0].Key), []byte(msgs[0].Payload))
	if err != nil {
		t.Fatal(err)
	}
	if m.Product.SellerSKU != nfc || m.Product.Name != "상품 "+nfc || m.IdempotencyKey != bulkreg.IdempotencyKey(m.UploadID, 2) {
		t.Errorf("published %+q %+q under %s, want the NFC forms and the row's own key", m.Product.SellerSKU, m.Product.Name, m.IdempotencyKey)
	}
}
