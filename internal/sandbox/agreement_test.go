package sandbox

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/productrules"
)

// agreeCase is one side of one rule: a value as a seller types it in a cell
// and the same value as it reaches the API in JSON ("" = the field absent).
type agreeCase struct {
	field string
	rule  string // which rule and which side
	cell  string
	json  string
	ok    bool
}

// agreementCases holds, for every rule of the table, a value just inside it
// and one just outside it.
func agreementCases() []agreeCase {
	str := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	text := func(field, rule, v string, ok bool) agreeCase { return agreeCase{field, rule, v, str(v), ok} }
	num := func(field, rule, cell, lit string, ok bool) agreeCase { return agreeCase{field, rule, cell, lit, ok} }
	rep := strings.Repeat
	url := "https://img.example.com/"
	return []agreeCase{
		{productrules.SellerSKU, "required: absent", "", "", false},
		text(productrules.SellerSKU, "required: present", "A", true),
		text(productrules.SellerSKU, "length: 100", rep("가", 100), true),
		text(productrules.SellerSKU, "length: 101", rep("가", 101), false),
		text(productrules.SellerSKU, "format: a word of symbols", "ABC-001_x.1/가", true),
		text(productrules.SellerSKU, "format: a space", "SKU 2", false),
		text(productrules.SellerSKU, "format: a line break", "A\nB", false),
		text(productrules.SellerSKU, "format: a control character", "A\aB", false),
		text(productrules.SellerSKU, "format: a zero-width joiner", "ZW-\u200d002", false),
		text(productrules.SellerSKU, "format: a word joiner at the end", "ZW-002\u2060", false),
		text(productrules.SellerSKU, "format: a zero-width non-joiner", "ZW-\u200c002", false),
		text(productrules.SellerSKU, "format: a right-to-left override", "\u202eZW-002", false),
		text(productrules.SellerSKU, "format: a soft hyphen", "ZW-\u00ad002", false),
		text(productrules.SellerSKU, "form: NFD", norm.NFD.String("가방-001"), true),
		text(productrules.SellerSKU, "length: 100 syllables in NFD", rep(norm.NFD.String("각"), 100), true),
		text(productrules.SellerSKU, "length: 101 syllables in NFD", rep(norm.NFD.String("각"), 101), false),

		{productrules.Name, "required: absent", "", "", false},
		text(productrules.Name, "length: 200", rep("n", 200), true),
		text(productrules.Name, "length: 201", rep("n", 201), false),
		text(productrules.Name, "format: one line with spaces", "린넨 셔츠 화이트 L", true),
		text(productrules.Name, "format: a line break", "두 줄\n이름", false),
		text(productrules.Name, "format: a tab", "a\tb", false),
		text(productrules.Name, "format: a control character", "a\x1bb", false),
		text(productrules.Name, "format: an emoji sequence joined by U+200D", "가족 👨\u200d👩\u200d👧 세트", true),
		text(productrules.Name, "form: NFD", norm.NFD.String("린넨 셔츠"), true),

		{productrules.CategoryCode, "required: absent", "", "", false},
		text(productrules.CategoryCode, "format: letters and a hyphen", "CAT-101", true),
		text(productrules.CategoryCode, "format: digits", "50000803", true),
		text(productrules.CategoryCode, "format: leading zeros, '_' and '.'", "00_a.B-9", true),
		text(productrules.CategoryCode, "length: 64", rep("7", 64), true),
		text(productrules.CategoryCode, "length: 65", rep("7", 65), false),
		text(productrules.CategoryCode, "format: a space", "CAT 101", false),
		text(productrules.CategoryCode, "format: Hangul", "카테고리", false),
		text(productrules.CategoryCode, "format: a slash", "50/803", false),

		{productrules.Price, "required: absent", "", "", false},
		num(productrules.Price, "range: 1", "1", "1", true),
		num(productrules.Price, "range: 0", "0", "0", false),
		num(productrules.Price, "range: 1,000,000,000", "1000000000", "1000000000", true),
		num(productrules.Price, "range: 1,000,000,001", "1000000001", "1000000001", false),
		num(productrules.Price, "type: a fraction", "12.5", "12.5", false),
		num(productrules.Price, "type: text", "abc", `"abc"`, false),
		num(productrules.Price, "type: a unit", "12,000원", `"12,000원"`, false),
		num(productrules.Price, "sign: -0", "-0", "-0", false),

		{productrules.Stock, "required: absent", "", "", false},
		num(productrules.Stock, "range: 0", "0", "0", true),
		num(productrules.Stock, "range: -1", "-1", "-1", false),
		num(productrules.Stock, "range: 1,000,000", "1000000", "1000000", true),
		num(productrules.Stock, "range: 1,000,001", "1000001", "1000001", false),
		num(productrules.Stock, "type: a fraction", "1.5", "1.5", false),
		num(productrules.Stock, "sign: -0", "-0", "-0", false),
		num(productrules.Stock, "sign: -0.0", "-0.0", "-0.0", false),

		{productrules.Brand, "optional: absent", "", "", true},
		text(productrules.Brand, "length: 100", rep("B", 100), true),
		text(productrules.Brand, "length: 101", rep("B", 101), false),
		text(productrules.Brand, "format: a line break", "a\nb", false),

		{productrules.ImageURL, "optional: absent", "", "", true},
		text(productrules.ImageURL, "format: https", url+"a.jpg", true),
		text(productrules.ImageURL, "format: http", "http://img.example.com/a.jpg", true),
		text(productrules.ImageURL, "format: ftp", "ftp://img.example.com/a.jpg", false),
		text(productrules.ImageURL, "format: relative", "a.jpg", false),
		text(productrules.ImageURL, "format: no host", "https:///a.jpg", false),
		text(productrules.ImageURL, "format: a space", url+"a b.jpg", false),
		text(productrules.ImageURL, "length: 2,048", url+rep("a", 2048-len(url)), true),
		text(productrules.ImageURL, "length: 2,049", url+rep("a", 2049-len(url)), false),

		{productrules.Description, "optional: absent", "", "", true},
		text(productrules.Description, "length: 10,000", rep("설", 10000), true),
		text(productrules.Description, "length: 10,001", rep("설", 10001), false),
		text(productrules.Description, "format: lines and tabs", "첫 줄\n둘째\t줄", true),
		text(productrules.Description, "format: a control character", "a\ab", false),

		{productrules.ShippingFee, "optional: absent", "", "", true},
		num(productrules.ShippingFee, "range: 0", "0", "0", true),
		num(productrules.ShippingFee, "range: -1", "-1", "-1", false),
		num(productrules.ShippingFee, "range: 1,000,000", "1000000", "1000000", true),
		num(productrules.ShippingFee, "range: 1,000,001", "1000001", "1000001", false),
		num(productrules.ShippingFee, "type: a fraction", "1.5", "1.5", false),
		num(productrules.ShippingFee, "sign: -0", "-0", "-0", false),
	}
}

// base is a valid product: the cells of a CSV row and the JSON fields.
var baseCells = map[string]string{
	productrules.SellerSKU: "SKU-1", productrules.Name: "상품", productrules.CategoryCode: "50000803",
	productrules.Price: "12000", productrules.Stock: "10",
}

// validatorAnswer uploads a CSV holding the base product with one cell
// changed and answers whether the row is valid, the field of its first
// problem, and the product it would send.
func validatorAnswer(t *testing.T, field, cell string) (ok bool, problemField string, product []byte) {
	t.Helper()
	var header, row []string
	for _, r := range productrules.Rules() {
		header = append(header, r.Field)
		v := baseCells[r.Field]
		if r.Field == field {
			v = cell
		}
		row = append(row, `"`+strings.ReplaceAll(v, `"`, `""`)+`"`)
	}
	data := strings.Join(header, ",") + "\r\n" + strings.Join(row, ",") + "\r\n"
	s, err := excel.NewParser(excel.Options{}).ParseBytes(context.Background(), []byte(data))
	if err != nil {
		t.Fatalf("the validator refused the whole file: %v", err)
	}
	if len(s.Rows) != 1 {
		t.Fatalf("%d rows", len(s.Rows))
	}
	r := s.Rows[0]
	if !r.Valid() {
		return false, r.Problems[0].Column, nil
	}
	b, err := json.Marshal(r.Product)
	if err != nil {
		t.Fatal(err)
	}
	return true, "", b
}

// TestValidatorAndAPIAgree: for every rule of the shared table, a value just
// inside and one just outside, the spreadsheet validator and the API (the
// sandbox, over HTTP) both accept or both refuse, and a refusal names the
// same field. What the validator accepts, sent as the validator builds it,
// the API accepts too.
func TestValidatorAndAPIAgree(t *testing.T) {
	_, ts := start(t, Options{Limit: 10000})
	c := ts.Client()
	seen := map[string]bool{}
	for i, tc := range agreementCases() {
		seen[tc.field] = true
		t.Run(tc.field+"/"+tc.rule, func(t *testing.T) {
			vOK, vField, product := validatorAnswer(t, tc.field, tc.cell)

			fields := map[string]json.RawMessage{}
			for f, v := range baseCells {
				if f == productrules.Price || f == productrules.Stock {
					fields[f] = json.RawMessage(v)
				} else {
					b, _ := json.Marshal(v)
					fields[f] = b
				}
			}
			delete(fields, tc.field)
			if tc.json != "" {
				fields[tc.field] = json.RawMessage(tc.json)
			}
			body, _ := json.Marshal(fields)
			r := mustCall(t, c, ts.URL, "s", "k"+strconv.Itoa(i), string(body))
			aOK, aField := r.status == 201, ""
			if r.status == 422 {
				aField = r.apiErr(t).Field
			} else if !aOK {
				t.Fatalf("the API answered %d: %s", r.status, r.body)
			}

			if vOK != tc.ok || aOK != tc.ok {
				t.Fatalf("validator accepts: %v (%s), API accepts: %v (%s); want both %v", vOK, vField, aOK, r.body, tc.ok)
			}
			if !tc.ok && (vField != tc.field || aField != tc.field) {
				t.Fatalf("refused naming %q by the validator and %q by the API; want %q", vField, aField, tc.field)
			}
			if vOK {
				// The product the validator would publish is registered as it is.
				if r := mustCall(t, c, ts.URL, "s", "v"+strconv.Itoa(i), string(product)); r.status != 201 {
					t.Fatalf("the API answered %d to the validator's product %s: %s", r.status, product, r.body)
				}
			}
		})
	}
	for _, r := range productrules.Rules() {
		if !seen[r.Field] {
			t.Errorf("no case for %s", r.Field)
		}
	}
}
