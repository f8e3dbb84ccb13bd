package messages

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestEveryKeyHasBothLanguagesWithTheSameParameters is the table's rule:
// a sentence missing in one language, or one language saying a fact (a
// {parameter}) the other leaves out, fails.
func TestEveryKeyHasBothLanguagesWithTheSameParameters(t *testing.T) {
	if len(Keys()) < 50 {
		t.Fatalf("the table has %d keys; it is not being read", len(Keys()))
	}
	for _, k := range Keys() {
		ko, _ := Template(KO, k)
		en, _ := Template(EN, k)
		if strings.TrimSpace(ko) == "" || strings.TrimSpace(en) == "" {
			t.Errorf("%s: Korean %q, English %q: both languages are needed", k, ko, en)
			continue
		}
		if !hasHangul(ko) {
			t.Errorf("%s: the Korean sentence %q has no Hangul", k, ko)
		}
		if hasHangul(strings.NewReplacer("원", "", "쉼표로 분리", "").Replace(en)) {
			t.Errorf("%s: the English sentence %q holds Korean", k, en)
		}
		if pk, pe := Placeholders(ko), Placeholders(en); !slices.Equal(pk, pe) {
			t.Errorf("%s: Korean says %v, English %v: both must carry the same facts", k, pk, pe)
		}
		if strings.Count(ko, "{") != strings.Count(ko, "}") || strings.Count(en, "{") != strings.Count(en, "}") {
			t.Errorf("%s: unbalanced braces", k)
		}
	}
}

// TestTheCodesSellersMeetAreInTheTable lists the codes bulkreg produces
// (cells, warnings, refusals, row results, notices): each must render.
func TestTheCodesSellersMeetAreInTheTable(t *testing.T) {
	codes := []string{
		"required", "not_whole_number", "out_of_range", "too_long", "invalid_characters", "invalid_url", "invalid_code",
		"formula_without_value", "logical_value", "date_value", "excel_error", "duplicate_sku", "merged_cells",
		"more_problems", "more_warnings", "hidden_row", "unknown_column", "merged_fill",
		"too_large", "not_xlsx", "damaged", "no_header", "missing_column", "duplicate_column", "too_many_rows", "no_rows", "timeout", "canceled",
		"already_registered_other_content", "already_registered", "dead_lettered", "bad_message", "registry_refused",
		"misconfigured", "too_many_reports", "bad_parameter", "uploaded_before", "cells_not_kept", "registered_twice",
	}
	for _, c := range codes {
		for _, lang := range []string{KO, EN} {
			if s, ok := Render(lang, c, nil); !ok || s == "" {
				t.Errorf("%s has no %s sentence", c, lang)
			}
		}
	}
}

// TestRegisteredTwiceNamesBothProducts: the duplicate's sentence names the
// new product, the first and, when the ledger knows it, where the first
// came from.
func TestRegisteredTwiceNamesBothProducts(t *testing.T) {
	p := map[string]string{"product": "P-9", "other": "P-1", "field": "seller_sku", "value": `"A-1"`, KindParam: "from", "upload": "9f86d081884c7d65", "row": "5", "date": "2026-03-02"}
	for _, lang := range []string{KO, EN} {
		s, ok := Render(lang, "registered_twice", p)
		for _, want := range []string{"P-9", "P-1", "9f86d081884c7d65", "5", "2026-03-02", `"A-1"`} {
			if !ok || !strings.Contains(s, want) {
				t.Errorf("%s: %q does not say %s", lang, s, want)
			}
		}
	}
	if s, _ := Render(KO, "registered_twice", map[string]string{"product": "P-9", "other": "P-1", "field": "seller_sku", "value": `"A-1"`}); !strings.Contains(s, "P-1") || strings.Contains(s, "{") {
		t.Errorf("without where the first came from: %q", s)
	}
}

func TestRender(t *testing.T) {
	p := map[string]string{"field": "판매가", "value": `"12,000원"`, "min": "1", "max": "1,000,000,000", KindParam: "unit"}
	ko, _ := Render(KO, "not_whole_number", p)
	en, _ := Render(EN, "not_whole_number", map[string]string{"field": "price", "value": `"12,000원"`, "min": "1", "max": "1,000,000,000", KindParam: "unit"})
	if want := `1 이상 1,000,000,000 이하의 정수여야 하는데 "12,000원"입니다. 원이나 ₩ 없이 숫자만 입력해 주세요`; ko != want {
		t.Errorf("Korean %q, want %q", ko, want)
	}
	if want := `must be a whole number from 1 to 1,000,000,000, got "12,000원"; type the number only, without 원 or ₩`; en != want {
		t.Errorf("English %q, want %q", en, want)
	}
	// The field is named once, before the problem.
	if got, want := At(KO, "D3", 3, "판매가", ko), `D3 판매가: 1 이상 1,000,000,000 이하의 정수여야 하는데 "12,000원"입니다. 원이나 ₩ 없이 숫자만 입력해 주세요`; got != want {
		t.Errorf("At = %q, want %q", got, want)
	}
	if NamesField("not_whole_number", p) || !NamesField("merged_fill", nil) {
		t.Error("NamesField: not_whole_number is said after its field, merged_fill names it")
	}
	if got, _ := Render(KO, "not_whole_number", map[string]string{KindParam: "nosuch"}); !strings.Contains(got, "정수") {
		t.Errorf("an unknown variant falls back to the code: %q", got)
	}
	if _, ok := Render(KO, "nosuch", nil); ok {
		t.Error("an unknown code renders")
	}
	if got := Placeholders("{a} {b} {a}"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Placeholders = %v", got)
	}
}

// TestTheChangedSentences: the sentences the seller pages got wrong say
// it right: the particle after a number or a product number, the count
// of rows apart from a row's number, the English singular, and a web
// address with a space or without a site told so.
func TestTheChangedSentences(t *testing.T) {
	for _, tc := range []struct {
		lang, code string
		params     map[string]string
		want       string
	}{
		{KO, "date_value", map[string]string{KindParam: "number", "shown": "2024-05-01", "value": "45413"},
			"날짜가 있습니다 (Excel은 2024-05-01로 보여 주고 숫자 45413으로 저장합니다). 열 서식을 텍스트로 바꾸고 값을 다시 입력해 주세요"},
		{KO, "already_registered", map[string]string{"product": "P-000123"}, "이미 P-000123으로 등록되어 있어 다시 보내지 않았습니다"},
		{KO, "already_registered", map[string]string{"product": "P-2"}, "이미 P-2로 등록되어 있어 다시 보내지 않았습니다"},
		{KO, "duplicate_sku", map[string]string{"value": `"A-1"`, "row": "2"}, `"A-1"은 이미 2행에서 썼습니다. 상품마다 다른 코드가 필요합니다`},
		{KO, "duplicate_sku", map[string]string{"value": `"A-2"`, "row": "2"}, `"A-2"는 이미 2행에서 썼습니다. 상품마다 다른 코드가 필요합니다`},
		{KO, "missing_column", map[string]string{"row": "1", "columns": "상품명 (name)"}, "머리글 행(1행)에 필수 열 상품명 (name)이 없습니다. 열을 추가하거나 템플릿에서 시작해 주세요"},
		{KO, "missing_column", map[string]string{"row": "1", "columns": "판매가 (price)"}, "머리글 행(1행)에 필수 열 판매가 (price)가 없습니다. 열을 추가하거나 템플릿에서 시작해 주세요"},
		{KO, "too_large", map[string]string{"size": "10 MiB", "rows": "500"}, "파일이 10 MiB보다 큽니다. 500개 행 이하의 파일로 나눠 주세요"},
		{EN, "more_problems", map[string]string{"count": "1"}, "and 1 more problem in this row"},
		{EN, "more_problems", map[string]string{"count": "2"}, "and 2 more problems in this row"},
		{EN, "more_problems", map[string]string{KindParam: "rows", "count": "1", "limit": "200"}, "1 more problem is not listed: after the first 200, each row lists only its first problem; fix these and check the file again"},
		{EN, "dead_lettered", map[string]string{"attempts": "1", "detail": "status 503"}, "the registration API did not take the row after 1 attempt (status 503); it was set aside for an operator to retry"},
		{KO, "invalid_url", map[string]string{KindParam: "spaces", "value": `"https://a.com/my image.jpg"`}, `주소에 공백이 있습니다: "https://a.com/my image.jpg". 공백을 지우거나 %20으로 바꿔 주세요`},
		{EN, "invalid_url", map[string]string{KindParam: "spaces", "value": `"https://a.com/my image.jpg"`}, `the address contains a space: "https://a.com/my image.jpg"; remove it, or write it as %20`},
		{EN, "invalid_url", map[string]string{KindParam: "host", "value": `"https://"`}, `must name a site after https:// or http://, got "https://"`},
	} {
		if got, _ := Render(tc.lang, tc.code, tc.params); got != tc.want {
			t.Errorf("%s %s %v:\n got %q\nwant %q", tc.lang, tc.code, tc.params, got, tc.want)
		}
	}
}

// TestEverySentenceReadsRightWithAnyCount walks every key in both
// languages with its counts 0, 1, 2 and 21 (a row's number apart): no
// "은(는)"-style pair is left, a count of rows never reads as a row's
// number ("21행" is row 21; 21 rows are "21개 행"), a row's number reads as
// one, and English nouns agree with their number.
func TestEverySentenceReadsRightWithAnyCount(t *testing.T) {
	const rowNumber = "7" // {row}, {from}, {to}: a row's number
	isRowNumber := map[string]bool{"row": true, "from": true, "to": true}
	// Parameters that are no number: said as "X".
	isText := map[string]bool{"product": true, "upload": true, "date": true, "value": true, "field": true, "header": true,
		"range": true, "fields": true, "columns": true, "column": true, "cell": true, "cells": true, "detail": true, "key": true,
		"part": true, "sheet": true, "formula": true, "char": true, "names": true, "shown": true, "size": true, "status": true,
		"parameter": true, "other": true}
	onePlural := regexp.MustCompile(`\b1 (?:more |data )?(?:rows|problems|warnings|lines|bytes|characters|sheets|attempts)\b|\b1 (?:more )?[a-z]+ are\b`)
	manySingular := regexp.MustCompile(`\b(?:0|2|21) (?:more |data )?(?:row|problem|warning|line|byte|character|sheet|attempt)\b`)
	for _, k := range Keys() {
		for _, n := range []string{"0", "1", "2", "21"} {
			for _, lang := range []string{KO, EN} {
				tmpl, _ := Template(lang, k)
				params := map[string]string{}
				for _, name := range Placeholders(tmpl) {
					switch {
					case isRowNumber[name]:
						params[name] = rowNumber
					case isText[name]:
						params[name] = "X"
					default:
						params[name] = n
					}
				}
				got := fill(tmpl, params)
				for _, pair := range []string{"(는)", "(은)", "(를)", "(을)", "(가)", "(이)", "(와)", "(과)", "(으)"} {
					if strings.Contains(got, pair) {
						t.Errorf("%s %s: %q holds %q: the particle is chosen, not both", k, lang, got, pair)
					}
				}
				if strings.ContainsAny(got, "{}") {
					t.Errorf("%s %s: %q holds a mark fill did not replace", k, lang, got)
				}
				if lang == KO {
					if regexp.MustCompile(`(?:^|[^0-9,])` + n + `행`).MatchString(got) {
						t.Errorf("%s: %q says the count %s as a row's number (%s행); a count is \"%s개 행\"", k, got, n, n, n)
					}
					for name := range params {
						if isRowNumber[name] && !strings.Contains(got, rowNumber+"행") {
							t.Errorf("%s: %q does not say the row's number {%s} as \"%s행\"", k, got, name, rowNumber)
						}
					}
					continue
				}
				if n == "1" && onePlural.MatchString(got) {
					t.Errorf("%s: %q: one is singular", k, got)
				}
				if n != "1" && manySingular.MatchString(got) {
					t.Errorf("%s: %q: %s is plural", k, got, n)
				}
			}
		}
	}
}

func hasHangul(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Hangul, r) {
			return true
		}
	}
	return false
}
