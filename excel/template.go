package excel

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/productrules"
)

// CategorySheet is the template's sheet of the marketplace's categories,
// when it has one (TemplateOptions.Categories).
const CategorySheet = "카테고리"

// TemplateOptions is what a template holds beyond the upload format.
type TemplateOptions struct {
	// Categories are the marketplace's categories. The template lists
	// them on CategorySheet and its category column takes only their
	// codes (a drop-down list). Without them the column takes any code of
	// the rule's form, and the instructions say where codes are found.
	Categories []Category
}

// TemplateHeader returns the header cells the template uses:
// "판매자상품코드* (seller_sku)", ... — both names, required ones marked.
func TemplateHeader() []string {
	cols := Columns()
	out := make([]string, len(cols))
	for i, c := range cols {
		mark := ""
		if c.Required {
			mark = "*"
		}
		out[i] = c.Korean + mark + " (" + c.Field + ")"
	}
	return out
}

// exampleRow is the product shown on the instructions sheet.
var exampleRow = []string{"ABC-0001", "여름 반팔 티셔츠 화이트 L", "50000803", "12900", "100", "베이직하우스", "https://img.example.com/abc-0001.jpg", "면 100% 반팔 티셔츠입니다.", "3000"}

// inWon reports a field counted in won.
func inWon(field string) bool { return field == FieldPrice || field == FieldShippingFee }

// ruleText says what a column takes, from its field's rule (package
// productrules), in Korean and in English: the instructions sheet and the
// message a cell shows when selected both say it. listed: the category
// column takes the codes of CategorySheet.
func ruleText(c Column, listed bool) (ko, en string) {
	r := productrules.Must(c.Field)
	n := func(v int64) string { return group(v) }
	if r.Type == productrules.WholeNumber {
		if inWon(c.Field) {
			ko = fmt.Sprintf("%s원 이상 %s원 이하의 정수, 단위(원) 없이", n(r.Min), n(r.Max))
			en = fmt.Sprintf("a whole number of won from %s to %s, without \"원\"", n(r.Min), n(r.Max))
		} else {
			ko = fmt.Sprintf("%s 이상 %s 이하의 정수", n(r.Min), n(r.Max))
			en = fmt.Sprintf("a whole number from %s to %s", n(r.Min), n(r.Max))
		}
		if !r.Required {
			free, freeEn := "", ""
			if c.Field == FieldShippingFee && r.Default == 0 {
				free, freeEn = " (무료배송)", " (free shipping)"
			}
			ko += fmt.Sprintf(", 비우면 %s%s", n(r.Default), free)
			en += fmt.Sprintf("; empty means %s%s", n(r.Default), freeEn)
		}
		return ko, en
	}
	max := n(int64(r.MaxLen))
	switch r.Format {
	case productrules.Word:
		return fmt.Sprintf("판매자가 정한 상품 코드, 공백 없이 %s자 이내, 파일 안에서 한 번만", max),
			fmt.Sprintf("your own code, no spaces, at most %s characters, once per file", max)
	case productrules.Code:
		if listed {
			return fmt.Sprintf("'%s' 시트의 목록에 있는 코드 (셀의 목록에서 고르기)", CategorySheet),
				fmt.Sprintf("a code listed on the '%s' sheet (pick it from the cell's list)", CategorySheet)
		}
		return fmt.Sprintf("마켓의 카테고리 코드: 영문, 숫자, - _ . 로 %s자 이내 (예: 50000803, CAT-101)", max),
			fmt.Sprintf("the marketplace's category code: letters, digits, '-', '_' or '.', at most %s characters (e.g. 50000803, CAT-101)", max)
	case productrules.WebURL:
		return fmt.Sprintf("http:// 또는 https:// 로 시작하는 주소, 공백 없이 %s자 이내", max),
			fmt.Sprintf("an address starting with http:// or https://, without spaces, at most %s characters", max)
	case productrules.Paragraphs:
		return fmt.Sprintf("%s자 이내, 줄바꿈 가능", max), fmt.Sprintf("at most %s characters, line breaks allowed", max)
	}
	return fmt.Sprintf("%s자 이내, 한 줄", max), fmt.Sprintf("at most %s characters, one line", max)
}

// columnRule is the instructions sheet's line for a column: required or
// not, and what it takes, in Korean and in English.
func columnRule(c Column, listed bool) string {
	ko, en := ruleText(c, listed)
	if c.Required {
		return "필수. " + ko + ". Required; " + en + "."
	}
	return "선택. " + ko + ". Optional; " + en + "."
}

// templateLastRow is the last row the template's checks cover: a file
// holds at most bulkreg.MaxRows products under its header.
const templateLastRow = 1 + bulkreg.MaxRows

// Lengths Excel allows a cell check's texts (longer ones make it repair
// the file): a title, the message shown on selecting the cell, the one
// shown on refusing a value.
const (
	maxValidationTitle  = 32
	maxValidationPrompt = 255
	maxValidationError  = 225
)

// columnCheck is the template's cell check (data validation) of a column,
// the spreadsheet's own refusal of what the column's rule refuses: whole
// numbers within the range, texts within the length, a SKU without spaces
// and once in the sheet, an address starting with http:// or https://,
// and with categories a code from their list. categories is how many codes
// CategorySheet lists (0: none). Empty cells pass: a row is left empty or
// filled, and a required cell left empty is for the upload's check to name.
func columnCheck(c Column, col string, categories int) *excelize.DataValidation {
	r := productrules.Must(c.Field)
	first := col + "2"
	dv := excelize.NewDataValidation(true)
	dv.SetSqref(first + ":" + col + strconv.Itoa(templateLastRow))
	custom := func(formula string) {
		dv.Type = "custom"
		dv.Formula1 = xmlFormula.Replace(formula)
	}
	switch {
	case r.Type == productrules.WholeNumber:
		_ = dv.SetRange(int(r.Min), int(r.Max), excelize.DataValidationTypeWhole, excelize.DataValidationOperatorBetween)
	case r.Format == productrules.Code && categories > 0:
		dv.SetSqrefDropList(fmt.Sprintf("'%s'!$A$2:$A$%d", CategorySheet, categories+1))
	case r.Format == productrules.Word:
		custom(fmt.Sprintf(`AND(LEN(%[1]s)<=%[2]d,ISERROR(FIND(" ",%[1]s)),SUMPRODUCT(--EXACT($%[3]s$2:$%[3]s$%[4]d,%[1]s))=1)`,
			first, r.MaxLen, col, templateLastRow))
	case r.Format == productrules.WebURL:
		custom(fmt.Sprintf(`AND(LEN(%[1]s)<=%[2]d,OR(LEFT(%[1]s,7)="http://",LEFT(%[1]s,8)="https://"),ISERROR(FIND(" ",%[1]s)))`, first, r.MaxLen))
	default:
		_ = dv.SetRange(1, r.MaxLen, excelize.DataValidationTypeTextLength, excelize.DataValidationOperatorBetween)
	}
	ko, en := ruleText(c, categories > 0)
	title := c.Korean + " (" + c.Field + ")"
	dv.SetInput(title, ko+".\n"+en+".")
	dv.SetError(excelize.DataValidationErrorStyleStop, title, "이 칸의 규칙에 맞지 않습니다: "+ko+".\nThis cell takes "+en+".")
	return dv
}

// xmlFormula escapes a formula for the XML text of a cell check (excelize
// writes a custom formula as it is given).
var xmlFormula = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// WriteTemplate writes the upload template: a product sheet with the header
// row frozen, the text columns formatted as text (a code such as 00123
// stays 00123) and each column's check; an instructions sheet with the
// rules and an example row; and, with categories, their sheet. The example
// is not on the product sheet so that uploading an untouched template
// registers nothing.
func WriteTemplate(w io.Writer, opts TemplateOptions) error {
	f := excelize.NewFile()
	defer f.Close()
	if err := writeTemplate(f, opts); err != nil {
		return fmt.Errorf("excel: template: %w", err)
	}
	if err := f.Write(w); err != nil {
		return fmt.Errorf("excel: template: %w", err)
	}
	return nil
}

func writeTemplate(f *excelize.File, opts TemplateOptions) error {
	if err := f.SetSheetName("Sheet1", TemplateSheet); err != nil {
		return err
	}
	header := TemplateHeader()
	styles, err := columnStyles(f, header)
	if err != nil {
		return err
	}
	if err := writeTable(f, TemplateSheet, header, styles, nil); err != nil {
		return err
	}
	listed := len(opts.Categories)
	for i, c := range Columns() {
		col, _ := excelize.ColumnNumberToName(i + 1)
		if err := f.AddDataValidation(TemplateSheet, columnCheck(c, col, listed)); err != nil {
			return err
		}
	}
	if _, err := f.NewSheet(InstructionsSheet); err != nil {
		return err
	}
	lines := [][]string{
		{"상품 일괄 등록 작성 방법 / How to fill in the product sheet"},
		{"'" + TemplateSheet + "' 시트의 2행부터 한 행에 상품 하나씩 입력하세요. 최대 " + strconv.Itoa(bulkreg.MaxRows) + "행. / One product per row from row 2 of the '" + TemplateSheet + "' sheet, at most " + strconv.Itoa(bulkreg.MaxRows) + " rows."},
		{"머리글(1행)은 바꾸지 마세요. * 표시는 필수 항목입니다. / Keep the header row; columns marked * are required."},
		{"셀 병합, 수식, 날짜 서식은 사용하지 마세요. / Do not merge cells, use formulas or date formats."},
		{"칸을 고르면 그 칸의 규칙이 보이고, 규칙에 맞지 않는 값은 Excel이 받지 않습니다. 붙여 넣은 값은 Excel이 검사하지 않으니 올린 뒤 검사 결과를 확인하세요. / Selecting a cell shows its rule, and Excel refuses a value that breaks it; pasted values are not checked by Excel, so read the check after uploading."},
	}
	if listed > 0 {
		lines = append(lines, []string{"카테고리 코드는 '" + CategorySheet + "' 시트에 있습니다 (" + group(int64(listed)) + "개). / The category codes are on the '" + CategorySheet + "' sheet (" + group(int64(listed)) + ")."})
	} else {
		lines = append(lines, []string{"카테고리 코드는 마켓 판매자 센터의 카테고리 목록에서 확인하세요. / Look the category codes up in the marketplace's seller center."})
	}
	lines = append(lines, []string{}, []string{"항목 / Column", "규칙 / Rule"})
	for i, c := range Columns() {
		lines = append(lines, []string{header[i], columnRule(c, listed > 0)})
	}
	lines = append(lines, []string{}, []string{"예시 / Example"})
	for i, l := range lines {
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		row := make([]any, len(l))
		for j, v := range l {
			row[j] = v
		}
		if err := f.SetSheetRow(InstructionsSheet, cell, &row); err != nil {
			return err
		}
	}
	example := exampleRow
	if listed > 0 {
		example = append([]string(nil), exampleRow...)
		example[2] = opts.Categories[0].Code
	}
	start := len(lines) + 1
	for j, v := range header {
		cell, _ := excelize.CoordinatesToCellName(j+1, start)
		if err := f.SetCellStr(InstructionsSheet, cell, v); err != nil {
			return err
		}
		cell, _ = excelize.CoordinatesToCellName(j+1, start+1)
		if err := f.SetCellStr(InstructionsSheet, cell, example[j]); err != nil {
			return err
		}
	}
	if err := f.SetColWidth(InstructionsSheet, "A", "A", 34); err != nil {
		return err
	}
	if err := f.SetColWidth(InstructionsSheet, "B", "B", 90); err != nil {
		return err
	}
	f.SetActiveSheet(0)
	if listed > 0 {
		// Last: a sheet streamed is written as it is, unless a later call
		// (SetActiveSheet reads every sheet) reads it back.
		if err := writeCategories(f, opts.Categories); err != nil {
			return err
		}
	}
	return nil
}

// writeCategories writes the categories' sheet: code and name, one a row
// under a bold frozen header, the codes formatted as text. It streams the
// rows: a hundred thousand cells set one by one cost seconds.
func writeCategories(f *excelize.File, cats []Category) error {
	if _, err := f.NewSheet(CategorySheet); err != nil {
		return err
	}
	sw, err := f.NewStreamWriter(CategorySheet)
	if err != nil {
		return err
	}
	text, err := f.NewStyle(&excelize.Style{NumFmt: textFormat})
	if err != nil {
		return err
	}
	bold, err := f.NewStyle(headerStyle())
	if err != nil {
		return err
	}
	if err := sw.SetColStyle(1, 2, text); err != nil {
		return err
	}
	if err := sw.SetColWidth(1, 1, 24); err != nil {
		return err
	}
	if err := sw.SetColWidth(2, 2, 60); err != nil {
		return err
	}
	if err := sw.SetPanes(frozenHeader()); err != nil {
		return err
	}
	if err := sw.SetRow("A1", []any{excelize.Cell{StyleID: bold, Value: "카테고리코드 (category_code)"}, excelize.Cell{StyleID: bold, Value: "카테고리명 (name)"}}); err != nil {
		return err
	}
	for i, c := range cats {
		row := []any{excelize.Cell{StyleID: text, Value: c.Code}, excelize.Cell{StyleID: text, Value: c.Name}}
		if err := sw.SetRow("A"+strconv.Itoa(i+2), row); err != nil {
			return err
		}
	}
	return sw.Flush()
}
