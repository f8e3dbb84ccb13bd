package excel

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg/messages"
	"github.com/bulkreg/bulkreg/productrules"
)

// allSheetsCSV is LibreOffice's CSV filter in UTF-8, every sheet to a file
// of its own (NAME-SHEET.csv), formulas' results written.
const allSheetsCSV = "csv:Text - txt - csv (StarCalc):44,34,76,1,,0,false,true,false,false,false,-1"

// office is headless LibreOffice with a profile of its own for one test
// (made on the first conversion, which costs most of its time).
type office struct {
	bin, profile string
}

func newOffice(t *testing.T) office {
	t.Helper()
	bin, err := exec.LookPath("soffice")
	if err != nil {
		t.Fatal("soffice is not on PATH: run `make deps` (Debian package libreoffice-calc-nogui)")
	}
	return office{bin: bin, profile: t.TempDir()}
}

// convert converts workbooks and returns the files LibreOffice wrote by
// name. It fails the test when LibreOffice does not convert.
func (o office) convert(t *testing.T, files map[string][]byte, convertTo string) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	var inputs []string
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(in, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, filepath.Join(in, name))
	}
	// LibreOffice sometimes aborts while it sets up a new profile (several
	// start at once here): a crash is no answer about the files, so it is
	// tried again, with a fresh profile, up to twice. Any other failure,
	// and a third crash, fail the test.
	var log []byte
	for try := 1; ; try++ {
		profile := o.profile
		if try > 1 {
			profile = t.TempDir()
		}
		args := append([]string{"--headless", "--norestore", "-env:UserInstallation=file://" + profile, "--convert-to", convertTo, "--outdir", out}, inputs...)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, o.bin, args...)
		cmd.Env = append(os.Environ(), "HOME="+profile)
		var err error
		log, err = cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil {
			break
		}
		if crashed(err) && !timedOut && try < 3 {
			t.Logf("soffice crashed (%v), trying again with a fresh profile", err)
			continue
		}
		t.Fatalf("soffice %v: %v\n%s", args, err, log)
	}
	entries, _ := os.ReadDir(out)
	got := map[string][]byte{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(out, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got[e.Name()] = data
	}
	if len(got) == 0 {
		t.Fatalf("soffice wrote nothing:\n%s", log)
	}
	return got
}

// crashed reports whether soffice died of a signal, itself or as its
// wrapper script reports it (exit status 128 + the signal).
func crashed(err error) bool {
	var exit *exec.ExitError
	return errors.As(err, &exit) && (exit.ExitCode() == -1 || exit.ExitCode() > 128)
}

func readCSV(t *testing.T, data []byte) [][]string {
	t.Helper()
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		t.Fatalf("LibreOffice's CSV: %v", err)
	}
	return rows
}

// TestLibreOfficeOpensTheTemplateAndTheFixFile: LibreOffice converts the
// template (with categories) and both languages' fix files to CSV and
// reads what was written (the header, the categories, the seller's cells
// as typed, the reason naming the fix file's own cells); saved again as
// .xlsx by LibreOffice, the template keeps a check for every column and
// the fix file its notes on the cells to fix, its numbers as numbers, and
// it uploads again with the same problems.
func TestLibreOfficeOpensTheTemplateAndTheFixFile(t *testing.T) {
	t.Parallel()
	lo := newOffice(t)
	s := sellerFile(t)
	files := map[string][]byte{
		"template.xlsx": templateBytes(t, TemplateOptions{Categories: someCategories}),
		"fix-ko.xlsx":   fixFile(t, s, messages.KO),
		"fix-en.xlsx":   fixFile(t, s, messages.EN),
	}
	csvs := lo.convert(t, files, allSheetsCSV)
	sheetCSV := func(name string) [][]string {
		t.Helper()
		data, ok := csvs[name]
		if !ok {
			t.Fatalf("LibreOffice wrote no %s (wrote %d files)", name, len(csvs))
		}
		return readCSV(t, data)
	}
	if rows := sheetCSV("template-" + TemplateSheet + ".csv"); len(rows) != 1 || strings.Join(rows[0], "|") != strings.Join(TemplateHeader(), "|") {
		t.Errorf("the template's product sheet in LibreOffice: %q", rows)
	}
	if rows := sheetCSV("template-" + CategorySheet + ".csv"); len(rows) != 4 || rows[3][0] != "00123" || rows[1][1] != someCategories[0].Name {
		t.Errorf("the categories' sheet in LibreOffice: %q", rows)
	}
	for _, lang := range []string{messages.KO, messages.EN} {
		rows := sheetCSV("fix-" + lang + "-" + ReportSheetIn(lang) + ".csv")
		if len(rows) != 3 || rows[1][0] != "00123" || rows[1][3] != "12,000원" || rows[2][3] != "15000" || rows[2][4] != "-5" ||
			!strings.HasPrefix(rows[1][11], "D2: ") || !strings.HasPrefix(rows[2][11], "B3: ") {
			t.Errorf("the %s fix file in LibreOffice: %q", lang, rows)
		}
	}

	saved := lo.convert(t, files, "xlsx")
	tf := openXLSX(t, saved["template.xlsx"])
	if dvs, err := tf.GetDataValidations(TemplateSheet); err != nil || len(dvs) != len(Columns()) {
		t.Errorf("the template saved by LibreOffice has %d checks (%v), want %d", len(dvs), err, len(Columns()))
	}
	for _, lang := range []string{messages.KO, messages.EN} {
		data := saved["fix-"+lang+".xlsx"]
		f := openXLSX(t, data)
		sheet := ReportSheetIn(lang)
		comments, err := f.GetComments(sheet)
		cells := []string{}
		for _, c := range comments {
			cells = append(cells, c.Cell)
		}
		if err != nil || strings.Join(cells, ",") != "B3,D2,E3" && strings.Join(cells, ",") != "D2,B3,E3" {
			t.Errorf("%s: the fix file saved by LibreOffice has notes on %v (%v), want D2, B3, E3", lang, cells, err)
		}
		if typ, _ := f.GetCellType(sheet, "D3"); typ == excelize.CellTypeSharedString || typ == excelize.CellTypeInlineString {
			t.Errorf("%s: D3 saved by LibreOffice as text", lang)
		}
		again := mustParse(t, data)
		if got := problems(again); len(got) != 3 || !strings.HasPrefix(got[0], "D2: ") {
			t.Errorf("%s: the fix file saved by LibreOffice, uploaded again: %q", lang, got)
		}
	}
}

// TestTemplateChecksAgreeWithTheRules has LibreOffice compute the
// template's own formula checks (the SKU's and the image address's) over
// values: every value the rules accept passes (a check never stops a seller
// typing what the API takes), and the mistakes sellers make are refused:
// a space, a SKU given twice (the second time it is typed), too long, an
// address without http:// or https://.
func TestTemplateChecksAgreeWithTheRules(t *testing.T) {
	t.Parallel()
	lo := newOffice(t)
	f := openXLSX(t, templateBytes(t, TemplateOptions{}))
	dvs, err := f.GetDataValidations(TemplateSheet)
	if err != nil {
		t.Fatal(err)
	}
	formulas := map[string]string{}
	for _, dv := range dvs {
		if dv.Type == "custom" {
			formulas[dv.Sqref[:1]] = dv.Formula1
		}
	}
	if len(formulas) != 2 || formulas["A"] == "" || formulas["G"] == "" {
		t.Fatalf("custom checks %v, want the SKU's (A) and the image address's (G)", formulas)
	}
	type value struct {
		v       string
		mistake bool // a mistake the check must refuse
	}
	skus := []value{{"ABC-1", false}, {"abc-1", false}, {"00123", false}, {"가방-01", false}, {strings.Repeat("x", 100), false},
		{"AB C", true}, {strings.Repeat("x", 101), true}, {"DUP", true}, {"DUP", true}}
	urls := []value{{"http://img.example.com/a.jpg", false}, {"https://img.example.com/a.jpg", false}, {"HTTPS://IMG.EXAMPLE.COM/A.JPG", false},
		{"https://img.example.com/" + strings.Repeat("a", 2048-24), false},
		{"ftp://img.example.com/a.jpg", true}, {"img.example.com/a.jpg", true}, {"https://img.example.com/a b.jpg", true},
		{"https://img.example.com/" + strings.Repeat("a", 2048-23), true}}
	book := excelize.NewFile()
	defer book.Close()
	const sheet = "Sheet1"
	// at is the formula of the check of column col for row r: written for
	// row 2, its relative references moved to row r.
	at := func(col string, r int) string {
		abs := "$" + col + "$2"
		s := strings.ReplaceAll(formulas[col], abs, "\x00")
		s = strings.ReplaceAll(s, col+"2", col+strconv.Itoa(r))
		return strings.ReplaceAll(s, "\x00", abs)
	}
	for i, v := range skus {
		r := i + 2
		book.SetCellStr(sheet, "A"+strconv.Itoa(r), v.v)
		book.SetCellFormula(sheet, "Y"+strconv.Itoa(r), at("A", r))
	}
	for i, v := range urls {
		r := i + 2
		book.SetCellStr(sheet, "G"+strconv.Itoa(r), v.v)
		book.SetCellFormula(sheet, "Z"+strconv.Itoa(r), at("G", r))
	}
	var buf bytes.Buffer
	if err := book.Write(&buf); err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for name, data := range lo.convert(t, map[string][]byte{"checks.xlsx": buf.Bytes()}, allSheetsCSV) {
		if strings.HasSuffix(name, ".csv") {
			rows = readCSV(t, data)
		}
	}
	result := func(col, r int) string {
		if r-1 < len(rows) && col < len(rows[r-1]) {
			return rows[r-1][col]
		}
		return ""
	}
	skuRule, urlRule := productrules.Must(productrules.SellerSKU), productrules.Must(productrules.ImageURL)
	seen := map[string]int{}
	for _, v := range skus {
		seen[v.v]++
	}
	for i, v := range skus {
		got := result(24, i+2) // Y
		accepted := skuRule.CheckText(v.v) == nil && seen[v.v] == 1
		if accepted && got != "TRUE" || v.mistake && got != "FALSE" {
			t.Errorf("SKU %.20q: the check says %q; the rule accepts it: %v, a mistake: %v", v.v, got, accepted, v.mistake)
		}
	}
	for i, v := range urls {
		got := result(25, i+2) // Z
		accepted := urlRule.CheckText(v.v) == nil
		if accepted && got != "TRUE" || v.mistake && got != "FALSE" {
			t.Errorf("address %.40q: the check says %q; the rule accepts it: %v, a mistake: %v", v.v, got, accepted, v.mistake)
		}
		if v.mistake && accepted {
			t.Errorf("address %.40q is listed as a mistake but the rule accepts it", v.v)
		}
	}
}
