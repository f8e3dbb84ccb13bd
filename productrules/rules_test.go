package productrules

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bulkreg/bulkreg/messages"
)

func ExampleRules() {
	for _, r := range Rules() {
		switch r.Type {
		case Text:
			fmt.Printf("%-13s required=%-5v text, at most %d characters\n", r.Field, r.Required, r.MaxLen)
		case WholeNumber:
			fmt.Printf("%-13s required=%-5v %s\n", r.Field, r.Required, r.Describe())
		}
	}
	// Output:
	// seller_sku    required=true  text, at most 100 characters
	// name          required=true  text, at most 200 characters
	// category_code required=true  text, at most 64 characters
	// price         required=true  a whole number greater than 0 and at most 1,000,000,000
	// stock         required=true  a whole number from 0 to 1,000,000
	// brand         required=false text, at most 100 characters
	// image_url     required=false text, at most 2048 characters
	// description   required=false text, at most 10000 characters
	// shipping_fee  required=false a whole number from 0 to 1,000,000
}

func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		field, value, code, message string
	}{
		{SellerSKU, "", CodeRequired, "seller_sku is required"},
		{SellerSKU, " \u3000", CodeRequired, "seller_sku is required"},
		{Brand, "  ", "", ""},
		{SellerSKU, "A B", CodeInvalidChars, `seller_sku must not contain spaces, got "A B"`},
		{SellerSKU, "A\u00a0B", CodeInvalidChars, `seller_sku must not contain spaces, got "A\u00a0B"`},
		{Name, "a\xffb", CodeInvalidChars, "name holds characters that are not valid text"},
		{Name, "a\ufffdb", CodeInvalidChars, "name holds characters that are not valid text"},
		{Name, "a\u0085b", CodeInvalidChars, `name holds an invisible control character ('\u0085')`},
		{Name, strings.Repeat("가", 201), CodeTooLong, "name must be at most 200 characters, got 201 characters"},
		{CategoryCode, "CAT-101", "", ""},
		{CategoryCode, "50000803", "", ""},
		{CategoryCode, "CAT 101", CodeInvalidCode, `category_code must be a code of 1 to 64 letters, digits, '-', '_' or '.', got "CAT 101"`},
		{ImageURL, "https://img.example.com/a.jpg", "", ""},
		{ImageURL, "//img.example.com/a.jpg", CodeInvalidURL, `image_url must be a web address starting with https:// or http://, got "//img.example.com/a.jpg"`},
		{ImageURL, "http://img.example.com/a.jpg", "", ""},
		{ImageURL, "HTTPS://img.example.com/a.jpg", "", ""},
		{ImageURL, "ftp://img.example.com/a.jpg", CodeInvalidURL, `image_url must be a web address starting with https:// or http://, got "ftp://img.example.com/a.jpg"`},
		// A space: the address starts right, so the space is what is wrong.
		{ImageURL, "https://img.example.com/my image.jpg", CodeInvalidURL, `image_url must be a web address without spaces, got "https://img.example.com/my image.jpg"`},
		{ImageURL, "https://img example.com/a.jpg", CodeInvalidURL, `image_url must be a web address without spaces, got "https://img example.com/a.jpg"`},
		{ImageURL, "Http://img.example.com/a\u3000b.jpg", CodeInvalidURL, `image_url must be a web address without spaces, got "Http://img.example.com/a\u3000b.jpg"`},
		{ImageURL, "my image.jpg", CodeInvalidURL, `image_url must be a web address starting with https:// or http://, got "my image.jpg"`},
		{ImageURL, "https://", CodeInvalidURL, `image_url must name a site after https:// or http://, got "https://"`},
		{ImageURL, "http:///a.jpg", CodeInvalidURL, `image_url must name a site after https:// or http://, got "http:///a.jpg"`},
		{Description, "a\r\n\tb", "", ""},
	} {
		v := Must(tc.field).CheckText(tc.value)
		code, msg := "", ""
		if v != nil {
			code, msg = v.Code, v.Message
			if v.Field != tc.field {
				t.Errorf("%s %q: violation names %s", tc.field, tc.value, v.Field)
			}
		}
		if code != tc.code || msg != tc.message {
			t.Errorf("%s %q: %s %q, want %s %q", tc.field, tc.value, code, msg, tc.code, tc.message)
		}
	}
}

func TestCheckNumber(t *testing.T) {
	price := Must(Price)
	if v := price.CheckNumber(0, ""); v == nil || v.Message != `price must be a whole number greater than 0 and at most 1,000,000,000, got "0"` {
		t.Errorf("price 0: %v", v)
	}
	if v := price.CheckNumber(1_000_000_000, ""); v != nil {
		t.Errorf("price 1,000,000,000: %v", v)
	}
	if v := Must(ShippingFee).Missing(); v != nil || Must(ShippingFee).Default != 0 {
		t.Errorf("an absent shipping_fee: %v", v)
	}
	if v := Must(Stock).WrongType("a string"); v == nil || v.Code != CodeWrongType || v.Message != "stock must be a whole number from 0 to 1,000,000 written as a JSON number, got a string" {
		t.Errorf("stock as a string: %v", v)
	}
}

func TestRulesAreComplete(t *testing.T) {
	for _, r := range Rules() {
		switch {
		case r.Type == Text && (r.MaxLen <= 0 || r.Format == 0):
			t.Errorf("%s: text without a length or format", r.Field)
		case r.Type == WholeNumber && r.Min > r.Max:
			t.Errorf("%s: range %d..%d", r.Field, r.Min, r.Max)
		case r.Type != Text && r.Type != WholeNumber:
			t.Errorf("%s: no type", r.Field)
		}
	}
	if _, ok := Lookup("colour"); ok {
		t.Error("Lookup found a field that is not in the table")
	}
}

// TestURLRefusalsSayWhatIsWrong: an image address with a space is told of
// the space, one without a site of the site, in both languages of the
// message table, not both told to start with https://.
func TestURLRefusalsSayWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		value, key, ko, en string
	}{
		{"https://img.example.com/my image.jpg", "invalid_url.spaces", "주소에 공백이 있습니다", "the address contains a space"},
		{"https://", "invalid_url.host", "사이트 주소가 있어야", "must name a site"},
		{"img.jpg", "invalid_url", "https:// 또는 http://로 시작하는", "starting with https:// or http://"},
	} {
		v := Must(ImageURL).CheckText(tc.value)
		if v == nil {
			t.Fatalf("%q is accepted", tc.value)
		}
		if k := messages.Key(v.Code, v.Params); k != tc.key {
			t.Errorf("%q: key %s, want %s", tc.value, k, tc.key)
		}
		ko, _ := messages.Render(messages.KO, v.Code, v.Params)
		en, _ := messages.Render(messages.EN, v.Code, v.Params)
		if !strings.Contains(ko, tc.ko) || !strings.Contains(en, tc.en) || !strings.Contains(ko, Quote(tc.value)) {
			t.Errorf("%q: Korean %q, English %q; want %q and %q with the value", tc.value, ko, en, tc.ko, tc.en)
		}
	}
}
