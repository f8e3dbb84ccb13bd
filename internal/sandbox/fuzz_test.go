package sandbox

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/bulkreg/bulkreg/productrules"
)

// FuzzDecodeProduct: any body gets exactly one of an accepted product, a 400
// or a 422 naming a field of the table, and an accepted product obeys every
// rule of the table.
func FuzzDecodeProduct(f *testing.F) {
	f.Add([]byte(`{"seller_sku":"A","name":"n","category_code":"c","price":1,"stock":0}`))
	f.Add([]byte(`{"seller_sku":"A","name":"n","category_code":"CAT-101","price":12.5,"stock":0}`))
	f.Add([]byte(`{"price":"12000"}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"seller_sku":"A","name":"n","category_code":"c","price":1,"stock":0,"image_url":"javascript:x"}`))
	f.Add([]byte(`{"seller_sku":"A","name":"n\u0000","category_code":"c","price":1e3,"stock":99999999999999999999}`))
	f.Add([]byte(`{"seller_sku":"ZW-\u200d002","name":"n","category_code":"c","price":1,"stock":-0}`))
	f.Add([]byte(`{"seller_sku":"\u1100\u1161\u1107\u1161\u11bc-001","name":"\u1100\u1161","category_code":"c","price":1,"stock":0}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, apiErr, status := decodeProduct(body)
		switch {
		case apiErr == nil:
			texts := map[string]string{productrules.SellerSKU: p.SellerSKU, productrules.Name: p.Name, productrules.CategoryCode: p.CategoryCode,
				productrules.Brand: p.Brand, productrules.ImageURL: p.ImageURL, productrules.Description: p.Description}
			numbers := map[string]int64{productrules.Price: p.Price, productrules.Stock: p.Stock, productrules.ShippingFee: p.ShippingFee}
			for _, r := range productrules.Rules() {
				var v *productrules.Violation
				if r.Type == productrules.Text {
					v = r.CheckText(texts[r.Field])
				} else {
					v = r.CheckNumber(numbers[r.Field], "")
				}
				if v != nil {
					t.Fatalf("accepted a product that breaks a rule (%v): %+v from %q", v, p, body)
				}
				if r.Type == productrules.Text && !productrules.IsNFC(texts[r.Field]) {
					t.Fatalf("accepted %s %+q, not in NFC, from %q", r.Field, texts[r.Field], body)
				}
			}
			if !json.Valid(body) {
				t.Fatalf("accepted a body that is not JSON: %q", body)
			}
		case status == http.StatusBadRequest:
			if apiErr.Code == "" || apiErr.Message == "" {
				t.Fatalf("400 without code or message: %+v", apiErr)
			}
		case status == http.StatusUnprocessableEntity:
			if _, ok := productrules.Lookup(apiErr.Field); !ok || apiErr.Message == "" || apiErr.Code != "invalid_"+apiErr.Field {
				t.Fatalf("422 without a field of the table, a code or a message: %+v", apiErr)
			}
		default:
			t.Fatalf("status %d for %q", status, body)
		}
	})
}
