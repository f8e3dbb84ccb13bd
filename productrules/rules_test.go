package productrules

import (
	"fmt"
	"strings"
	"testing"
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
