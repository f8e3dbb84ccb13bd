package upload

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bulkreg/bulkreg/excel"
)

// The refusal of a strict upload is the problem detail of POST /v1/uploads
// ?strict=true as well as the CLI's message: it names no CLI flag (an API
// client has no "--strict" to pass).
func TestStrictRefusalNamesNoFlag(t *testing.T) {
	err := &InvalidRowsError{Problems: []excel.Problem{{Cell: "D3", Message: "price must be a whole number"}}}
	r, ok := Refused(fmt.Errorf("%w: %w", ErrRefused, err))
	if !ok || r.Code != "invalid_rows" {
		t.Fatalf("Refused = %+v, %v", r, ok)
	}
	if strings.Contains(r.Message, "--") || !strings.Contains(r.Message, "strict upload publishes nothing") || !strings.Contains(r.Message, "D3") {
		t.Errorf("strict refusal detail %q: want it to say a strict upload publishes nothing, name D3 and no flag", r.Message)
	}
}

// TestStrictRefusalCountsInEnglish: one problem is "1 problem".
func TestStrictRefusalCountsInEnglish(t *testing.T) {
	one := &InvalidRowsError{Problems: []excel.Problem{{Cell: "D3", Message: "price must be a whole number"}}}
	two := &InvalidRowsError{Problems: []excel.Problem{{Cell: "D3"}, {Cell: "D4"}}}
	if !strings.HasPrefix(one.Error(), "1 problem in the rows;") || !strings.HasPrefix(two.Error(), "2 problems in the rows;") {
		t.Errorf("%q, %q: want 1 problem, 2 problems", one.Error(), two.Error())
	}
}
