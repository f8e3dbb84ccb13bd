package sandbox

import (
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// TestOneSKUOneFormInTheAPI: the API reads a product's text in NFC, so the
// NFC and NFD forms of one SKU are one product in its bookkeeping (the
// audit's Products shows the second registration as the double one it is),
// the same body in the other form under the same Idempotency-Key is a
// replay, and its answers carry the NFC form.
func TestOneSKUOneFormInTheAPI(t *testing.T) {
	srv, ts := start(t, Options{})
	c := ts.Client()
	nfc, nfd := "가방-001", norm.NFD.String("가방-001")
	first := mustCall(t, c, ts.URL, "s", "upload-1:2", productJSON(nfc))
	replay := mustCall(t, c, ts.URL, "s", "upload-1:2", productJSON(nfd))
	second := mustCall(t, c, ts.URL, "s", "upload-2:2", productJSON(nfd))
	if first.status != 201 || replay.status != 200 || second.status != 201 {
		t.Fatalf("answers %d, %d, %d; want 201, 200 (the same body in NFD is a replay), 201", first.status, replay.status, second.status)
	}
	var body struct {
		SKU string `json:"seller_sku"`
	}
	if err := json.Unmarshal(second.body, &body); err != nil || body.SKU != nfc {
		t.Errorf("the answer to an NFD SKU names %+q (%v), want the NFC form", body.SKU, err)
	}
	if a := srv.Audit().Sellers["s"]; a.Accepted != 2 || a.Products != 1 || a.Replays != 1 {
		t.Errorf("audit %+v, want 2 accepted, 1 product (one SKU in two forms), 1 replay", a)
	}
}

// TestTheAPIRefusesInvisibleCharactersInSKUs: as the validator does, the API
// refuses a SKU holding a format character with a 422 naming seller_sku and
// the character; a signed zero in a number is refused too.
func TestTheAPIRefusesInvisibleCharactersInSKUs(t *testing.T) {
	_, ts := start(t, Options{Limit: 1000})
	c := ts.Client()
	for i, tc := range []struct{ body, field, message string }{
		{productJSON("ZW-\u200d002"), "seller_sku", "U+200D ZERO WIDTH JOINER at character 4"},
		{productJSON("ZW-\u2060002"), "seller_sku", "U+2060 WORD JOINER at character 4"},
		{productJSON("ZW-\u200c002"), "seller_sku", "U+200C ZERO WIDTH NON-JOINER at character 4"},
		{productJSON("ZW-002\u2060"), "seller_sku", "U+2060 WORD JOINER at character 7"},
		{productJSON("\u202eZW-002"), "seller_sku", "U+202E RIGHT-TO-LEFT OVERRIDE at character 1"},
		{productJSON("ZW-\u2067002\u2069"), "seller_sku", "U+2067 RIGHT-TO-LEFT ISOLATE at character 4"},
		{productJSON("ZW-\u00ad002"), "seller_sku", "U+00AD SOFT HYPHEN at character 4"},
		{productJSON("ZW-\ufeff002"), "seller_sku", "U+FEFF ZERO WIDTH NO-BREAK SPACE (BYTE ORDER MARK) at character 4"},
		{with("stock", "-0"), "stock", `stock must be a whole number from 0 to 1,000,000, got "-0"`},
		{with("shipping_fee", "-0"), "shipping_fee", `got "-0"`},
		{with("price", "-0"), "price", `got "-0"`},
	} {
		r := mustCall(t, c, ts.URL, "s", "k"+string(rune('a'+i)), tc.body)
		if r.status != 422 {
			t.Errorf("%s: status %d, want 422; body %s", tc.body, r.status, r.body)
			continue
		}
		if e := r.apiErr(t); e.Field != tc.field || e.Code != "invalid_"+tc.field || !strings.Contains(e.Message, tc.message) {
			t.Errorf("%s: error %+v, want field %s and a message containing %q", tc.body, e, tc.field, tc.message)
		}
	}
}
