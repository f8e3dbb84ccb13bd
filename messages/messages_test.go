package messages

import (
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
		"misconfigured", "too_many_reports", "bad_parameter", "uploaded_before", "cells_not_kept",
	}
	for _, c := range codes {
		for _, lang := range []string{KO, EN} {
			if s, ok := Render(lang, c, nil); !ok || s == "" {
				t.Errorf("%s has no %s sentence", c, lang)
			}
		}
	}
}

func TestRender(t *testing.T) {
	p := map[string]string{"field": "판매가", "value": `"12,000원"`, "min": "1", "max": "1,000,000,000", KindParam: "unit"}
	ko, _ := Render(KO, "not_whole_number", p)
	en, _ := Render(EN, "not_whole_number", map[string]string{"field": "price", "value": `"12,000원"`, "min": "1", "max": "1,000,000,000", KindParam: "unit"})
	for _, want := range []string{"판매가", `"12,000원"`, "1 이상 1,000,000,000 이하", "원이나 ₩ 없이"} {
		if !strings.Contains(ko, want) {
			t.Errorf("Korean %q lacks %q", ko, want)
		}
	}
	if want := `price must be a whole number from 1 to 1,000,000,000, got "12,000원"; type the number only, without 원 or ₩`; en != want {
		t.Errorf("English %q, want %q", en, want)
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

func hasHangul(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Hangul, r) {
			return true
		}
	}
	return false
}
