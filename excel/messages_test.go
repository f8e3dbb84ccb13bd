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
