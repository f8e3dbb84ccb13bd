package sandbox

import (
	"encoding/json"
	"net/http"
	"testing"
)

// FuzzDecodeProduct: any body gets exactly one of an accepted product, a 400
// or a 422 naming a field, and an accepted product obeys every rule.
func FuzzDecodeProduct(f *testing.F) {
	f.Add([]byte(`{"seller_sku":"A","name":"n","category_code":"c","price":1,"stock":0}`))
	f.Add([]byte(`{"seller_sku":"A","name":"n","category_code":"c","price":12.5,"stock":0}`))
	f.Add([]byte(`{"price":"12000"}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"seller_sku":"A","name":"n","category_code":"c","price":1,"stock":0,"image_url":"javascript:x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, apiErr, status := decodeProduct(body)
		switch {
		case apiErr == nil:
			if p.SellerSKU == "" || p.Name == "" || p.CategoryCode == "" || p.Price <= 0 || p.Stock < 0 || p.ShippingFee < 0 {
				t.Fatalf("accepted a product that breaks a rule: %+v from %q", p, body)
			}
			if !json.Valid(body) {
				t.Fatalf("accepted a body that is not JSON: %q", body)
			}
		case status == http.StatusBadRequest:
			if apiErr.Code == "" || apiErr.Message == "" {
				t.Fatalf("400 without code or message: %+v", apiErr)
			}
		case status == http.StatusUnprocessableEntity:
			if apiErr.Field == "" || apiErr.Message == "" {
				t.Fatalf("422 without field or message: %+v", apiErr)
			}
		default:
			t.Fatalf("status %d for %q", status, body)
		}
	})
}
