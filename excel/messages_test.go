package excel

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkreg/bulkreg/messages"
)

// TestEveryProblemCarriesItsMessagesParameters reads every fixture and
// checks each problem, warning and refusal against the message table: its
// code (and variant) is in the table, and it carries every parameter the
// table's sentence names, so the Korean sentence says what the English one
// does (the range, the unit hint, the other row, the merged range).
func TestEveryProblemCarriesItsMessagesParameters(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "*.*"))
	if err != nil || len(files) < 20 {
		t.Fatalf("fixtures: %v, %d files", err, len(files))
	}
	seen := map[string]bool{}
	check := func(where string, code string, params map[string]string) {
		t.Helper()
		key := messages.Key(code, params)
		seen[key] = true
		tmpl, ok := messages.Template(messages.KO, key)
		if !ok {
			t.Errorf("%s: code %s (%v) is not in the message table", where, key, params)
			return
		}
		for _, name := range messages.Placeholders(tmpl) {
			if _, ok := params[name]; !ok {
				t.Errorf("%s: %s lacks the parameter %q its sentence %q names (has %v)", where, key, name, tmpl, params)
			}
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		s, err := NewParser(Options{}).ParseBytes(context.Background(), data)
		if err != nil {
			fe := fileErrCode(t, err)
			check(name, fe.Code, fe.Params)
			for _, p := range fe.Problems {
				check(name+" "+p.Cell, p.Code, p.Params)
			}
			continue
		}
		for _, r := range s.Rows {
			for _, p := range r.Problems {
				check(name+" "+p.Error(), p.Code, p.Params)
			}
		}
		for _, w := range s.Warnings {
			check(name+" "+w.Error(), w.Code, w.Params)
		}
	}
	for _, want := range []string{"not_whole_number.unit", "out_of_range", "duplicate_sku", "required", "merged_cells.across", "unknown_column", "missing_column", "not_xlsx.pdf", "too_many_rows"} {
		if !seen[want] {
			t.Errorf("no fixture produced %s; the check does not cover it (saw %v)", want, strings.Join(keysOf(seen), " "))
		}
	}
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestRefusalsSayTheirPlaceInKorean: a refusal that names a cell or a
// place in English names it in Korean too.
func TestRefusalsSayTheirPlaceInKorean(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"an unclosed quote", []byte("seller_sku,name,category_code,price,stock\nA-1,\"shirt,C,1,1\n"), "B2"},
		{"damaged UTF-16", append([]byte{0xFF, 0xFE}, 'a', 0, 0x00, 0xD8, 'b'), "6바이트"},
	} {
		_, err := NewParser(Options{}).ParseBytes(context.Background(), tc.data)
		fe := fileErrCode(t, err)
		ko, ok := messages.Render(messages.KO, fe.Code, fe.Params)
		if !ok || !strings.Contains(ko, tc.want) || !strings.Contains(fe.Message, strings.TrimSuffix(tc.want, "바이트")) {
			t.Errorf("%s: %s %q / Korean %q; want both naming %s", tc.name, fe.Code, fe.Message, ko, tc.want)
		}
	}
}
