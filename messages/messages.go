// Package messages is the one table of what bulkreg tells a seller about a
// file, a cell or a row, in Korean and English: a problem of a cell, the
// refusal of a file, a warning, a row's result. Each entry is keyed by a
// problem code (with a variant after a dot where one code says different
// things, "not_whole_number.unit") and holds both languages with the same
// {placeholders}, so a Korean page says the same facts as an English one
// (TestEveryKeyHasBothLanguagesWithTheSameParameters holds it). The codes
// and parameters are what is kept (a row's result in Redis, a problem in a
// check's JSON); the sentence is rendered in the reader's language when it
// is shown.
//
// The package imports nothing of bulkreg, so the validator (excel), the
// producer, the consumer and the pages can all render from it.
package messages

import (
	"slices"
	"strconv"
	"strings"
)

// Languages.
const (
	KO = "ko"
	EN = "en"
)

// KindParam is the parameter that picks a variant of a code: the key is
// code + "." + kind when the table has it.
const KindParam = "kind"

type text struct{ ko, en string }

// table holds every sentence. {field} is the column as the seller named it
// (their own header, or the template's Korean name on a Korean page). A
// sentence about a field's value that does not name {field} is said after
// the field (At: "D3 판매가: 0보다 …"), so the field is named once.
//
// Besides {name}, a sentence holds two marks (fill):
//   - a Korean particle in braces, {을} {은} {이} {과} {으로} (either form
//     names it), is the form that follows what comes before it: "{value}{으로}"
//     says "45413으로" and "2024-05-01로";
//   - {name|one|other}, in English, is one when the parameter is 1 and
//     other otherwise: "{count} more {count|problem|problems}".
//
// A count of rows is "N개 행" in Korean, a row's number "N행"; English says
// "1 row", "2 rows".
var table = map[string]text{
	// Cells and rows (package excel, package productrules).
	"required":                     {"값이 비어 있습니다. 필수 항목이니 값을 입력해 주세요", "the cell is empty; the field is required"},
	"required.absent":              {"값이 없습니다. 필수 항목입니다", "no value; the field is required"},
	"not_whole_number":             {"{min} 이상 {max} 이하의 정수여야 하는데 {value}입니다", "must be a whole number from {min} to {max}, got {value}"},
	"not_whole_number.unit":        {"{min} 이상 {max} 이하의 정수여야 하는데 {value}입니다. 원이나 ₩ 없이 숫자만 입력해 주세요", "must be a whole number from {min} to {max}, got {value}; type the number only, without 원 or ₩"},
	"out_of_range":                 {"{min} 이상 {max} 이하여야 하는데 {value}입니다 (허용 범위를 벗어났습니다)", "must be a whole number from {min} to {max}, got {value}"},
	"too_long":                     {"{max}자 이내여야 하는데 {n}자입니다", "must be at most {max} {max|character|characters}, got {n}"},
	"too_long.cell":                {"이 칸의 글이 너무 깁니다 ({size}). 줄여 주세요", "holds more text than one cell may hold here ({size}); shorten it"},
	"invalid_characters":           {"올바른 글자가 아닌 문자가 있습니다", "holds characters that are not valid text"},
	"invalid_characters.multiline": {"한 줄이어야 합니다. 줄바꿈이나 탭을 지워 주세요", "must be one line, without line breaks or tabs"},
	"invalid_characters.control":   {"보이지 않는 제어 문자({char})가 있습니다", "holds an invisible control character ({char})"},
	"invalid_characters.format":    {"{at}번째 글자가 보이지 않는 문자({char})입니다. 다른 코드와 똑같아 보일 수 있으니 지우고 다시 입력해 주세요", "holds the invisible character {char} at character {at}, which makes it look like another code; delete it"},
	"invalid_characters.spaces":    {"공백을 쓸 수 없는데 {value}입니다", "must not contain spaces, got {value}"},
	"invalid_url":                  {"https:// 또는 http://로 시작하는 웹 주소여야 하는데 {value}입니다", "must be a web address starting with https:// or http://, got {value}"},
	"invalid_url.spaces":           {"주소에 공백이 있습니다: {value}. 공백을 지우거나 %20으로 바꿔 주세요", "the address contains a space: {value}; remove it, or write it as %20"},
	"invalid_url.host":             {"https:// 또는 http:// 다음에 사이트 주소가 있어야 하는데 {value}입니다", "must name a site after https:// or http://, got {value}"},
	"invalid_code":                 {"영문, 숫자, '-', '_', '.'로 된 {max}자 이내의 코드여야 하는데 {value}입니다", "must be a code of 1 to {max} letters, digits, '-', '_' or '.', got {value}"},
	"invalid_code.scientific":      {"{value}{은} Excel이 줄여 쓴 긴 숫자로 보입니다. 열 서식을 텍스트로 바꾸고 코드를 다시 입력해 주세요", "{value} looks like a long number Excel shortened; format the column as text and type the code again"},
	"wrong_type":                   {"값의 형식이 맞지 않습니다: {value}", "a value of the wrong type: {value}"},
	"formula_without_value":        {"저장된 결과가 없는 수식({formula})입니다. Excel에서 파일을 열어 저장하거나 값을 직접 입력해 주세요", "a formula ({formula}) without a saved result; open the file in Excel and save it, or type the value instead"},
	"logical_value":                {"글이나 숫자가 아닌 논리값 {value}{이} 있습니다. 값을 직접 입력해 주세요", "holds the logical value {value}, not text or a number; type the value instead"},
	"date_value":                   {"날짜({value})가 있습니다. 열 서식을 텍스트로 바꾸고 값을 다시 입력해 주세요", "holds a date ({value}); format the column as text and type the value again"},
	"date_value.number":            {"날짜가 있습니다 (Excel은 {shown}{으로} 보여 주고 숫자 {value}{으로} 저장합니다). 열 서식을 텍스트로 바꾸고 값을 다시 입력해 주세요", "holds a date (Excel shows {shown} and stores the number {value}); format the column as text and type the value again"},
	"excel_error":                  {"Excel 오류 {value}{이} 표시됩니다. 수식을 고치거나 값을 입력해 주세요", "shows the Excel error {value}; fix the formula or type the value"},
	"duplicate_sku":                {"{value}{은} 이미 {row}행에서 썼습니다. 상품마다 다른 코드가 필요합니다", "{value} is already used in row {row}; each product needs its own code"},
	"duplicate_sku.report":         {"{value}{은} 이미 원본 {row}행에서 썼습니다. 상품마다 다른 코드가 필요합니다", "{value} is already used in original row {row}; each product needs its own code"},
	"merged_cells":                 {"{range} 셀이 병합되어 있습니다. 병합을 풀고 각 칸에 값을 입력해 주세요", "cells {range} are merged; unmerge them and type each value in its own cell"},
	"merged_cells.header":          {"{range} 셀이 머리글 행과 병합되어 있습니다. 병합을 풀고 각 칸에 값을 입력해 주세요", "cells {range} are merged with the header row; unmerge them and type each value in its own cell"},
	"merged_cells.across":          {"{range} 셀이 여러 열({fields})에 걸쳐 병합되어 있습니다. 병합을 풀고 각 칸에 값을 입력해 주세요", "cells {range} are merged across {fields}; unmerge them and type each value in its own cell"},
	"merged_cells.overlap":         {"{range} 셀이 다른 병합된 셀과 겹칩니다. Excel도 열 수 없는 상태입니다. 병합을 풀고 각 칸에 값을 입력해 주세요", "cells {range} overlap other merged cells, which Excel cannot open; unmerge them and type each value in its own cell"},
	"merged_cells.inside":          {"이 칸은 병합된 셀 {range} 안에 있습니다 ({row}행 참고). 병합을 풀고 각 칸에 값을 입력해 주세요", "the cell is inside the merged cells {range} (see row {row}); unmerge them and type each value in its own cell"},
	"more_problems":                {"이 행에 문제가 {count}개 더 있습니다", "and {count} more {count|problem|problems} in this row"},
	"already_registered_other_content": {"{field} {value}{은} 이미 다른 내용으로 상품 {product}{으로} 등록되어 있습니다. 일괄 등록은 기존 상품을 바꾸지 않습니다. 가격이나 재고는 판매자 센터의 상품 관리에서 바꿔 주세요",
		"{field} {value} is already registered as {product}; bulk registration does not change existing products. Change its price or stock in the seller center's product management"},
	"already_registered_other_content.conflict": {"{field} {value}{은} 이미 다른 내용으로 등록되어 있습니다 (마켓이 이 내용을 거부했습니다, 키 {key}). 일괄 등록은 기존 상품을 바꾸지 않습니다. 가격이나 재고는 판매자 센터의 상품 관리에서 바꿔 주세요",
		"{field} {value} is already registered with other content (the registration API refused this content under the Idempotency-Key {key} that registered it); bulk registration does not change existing products. Change its price or stock in the seller center's product management"},

	// Warnings.
	"hidden_row":          {"이 행은 스프레드시트에서 숨겨져 있지만 다른 행처럼 등록됩니다", "the row is hidden in the spreadsheet; it is registered like every other row"},
	"unknown_column":      {"{header} 열은 알 수 없는 열이라 무시합니다", "column {header} is not a known column; it is ignored"},
	"unknown_column.long": {"{header} 열 이름이 {max}자보다 길어 {field} 열로 읽지 않았습니다. 머리글 칸을 열 이름만 남기고 줄여 주세요", "column {header} is longer than {max} {max|character|characters}, so it is not read as {field}; shorten the header cell to the column's name"},
	"merged_fill":         {"{range} 셀이 병합되어 있어 {value} 값을 {from}행부터 {to}행까지의 {field}에 씁니다", "cells {range} are merged: the value {value} is used for {field} in rows {from} to {to}"},
	"more_warnings":       {"참고 사항이 {count}개 더 있습니다", "and {count} more {count|warning|warnings}"},
	"more_problems.rows":  {"문제 {count}개는 목록에 없습니다. 처음 {limit}개 다음부터는 행마다 첫 문제만 보여 줍니다. 고친 뒤 다시 검사해 주세요", "{count} more {count|problem is|problems are} not listed: after the first {limit}, each row lists only its first problem; fix these and check the file again"},

	// Refusals of a whole file.
	"too_large":               {"파일이 {size}보다 큽니다. {rows}개 행 이하의 파일로 나눠 주세요", "the file is larger than {size}; split it into files of at most {rows} {rows|row|rows}"},
	"too_large.content":       {"파일의 내용이 상품 목록에 필요한 것보다 훨씬 커서 받을 수 없습니다. Excel에서 .xlsx로 다시 저장하거나 CSV로 저장해 주세요", "the file holds far more than a product list needs, so it was refused; save it again from Excel as .xlsx, or as CSV"},
	"not_xlsx":                {"Excel 통합 문서(.xlsx)도 CSV 파일도 아닙니다. Excel에서 \"Excel 통합 문서(.xlsx)\" 또는 \"CSV UTF-8(쉼표로 분리)\"로 저장해 주세요", "the file is neither an Excel workbook (.xlsx) nor a CSV file; save it from Excel as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\""},
	"not_xlsx.empty":          {"빈 파일입니다", "the file is empty"},
	"not_xlsx.xls":            {"예전 형식의 .xls 통합 문서이거나 암호로 보호된 파일입니다. 암호 없이 \"Excel 통합 문서(.xlsx)\"로 저장해 주세요", "the file is an old-style .xls workbook or is protected by a password; save it as \"Excel Workbook (.xlsx)\" without a password"},
	"not_xlsx.pdf":            {"이 파일은 PDF 문서입니다. 스프레드시트가 아닙니다. 상품을 템플릿(.xlsx)에 한 행에 하나씩 적어 \"Excel 통합 문서(.xlsx)\"로 저장하거나 \"CSV UTF-8(쉼표로 분리)\"로 저장해 올려 주세요", "the file is a PDF document, not a spreadsheet; put the products in the template (.xlsx), one a row, and save it as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\""},
	"not_xlsx.png":            {"이 파일은 PNG 이미지입니다. 스프레드시트가 아닙니다. 상품을 템플릿(.xlsx)에 한 행에 하나씩 적어 \"Excel 통합 문서(.xlsx)\"로 저장하거나 \"CSV UTF-8(쉼표로 분리)\"로 저장해 올려 주세요", "the file is a PNG image, not a spreadsheet; put the products in the template (.xlsx), one a row, and save it as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\""},
	"not_xlsx.jpeg":           {"이 파일은 JPEG 이미지(사진)입니다. 스프레드시트가 아닙니다. 상품을 템플릿(.xlsx)에 한 행에 하나씩 적어 \"Excel 통합 문서(.xlsx)\"로 저장하거나 \"CSV UTF-8(쉼표로 분리)\"로 저장해 올려 주세요", "the file is a JPEG image (a photo), not a spreadsheet; put the products in the template (.xlsx), one a row, and save it as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\""},
	"not_xlsx.gif":            {"이 파일은 GIF 이미지입니다. 스프레드시트가 아닙니다. 상품을 템플릿(.xlsx)에 한 행에 하나씩 적어 \"Excel 통합 문서(.xlsx)\"로 저장하거나 \"CSV UTF-8(쉼표로 분리)\"로 저장해 올려 주세요", "the file is a GIF image, not a spreadsheet; put the products in the template (.xlsx), one a row, and save it as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\""},
	"not_xlsx.html":           {"이 파일은 웹 페이지(HTML)입니다. 스프레드시트가 아닙니다. 상품을 템플릿(.xlsx)에 한 행에 하나씩 적어 \"Excel 통합 문서(.xlsx)\"로 저장하거나 \"CSV UTF-8(쉼표로 분리)\"로 저장해 올려 주세요", "the file is a web page (HTML), not a spreadsheet; put the products in the template (.xlsx), one a row, and save it as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\""},
	"not_xlsx.rtf":            {"이 파일은 RTF 문서입니다. 스프레드시트가 아닙니다. 상품을 템플릿(.xlsx)에 한 행에 하나씩 적어 \"Excel 통합 문서(.xlsx)\"로 저장하거나 \"CSV UTF-8(쉼표로 분리)\"로 저장해 올려 주세요", "the file is an RTF (rich text) document, not a spreadsheet; put the products in the template (.xlsx), one a row, and save it as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\""},
	"not_xlsx.doc":            {"이 파일은 예전 형식의 Word 문서(.doc)입니다. 스프레드시트가 아닙니다. 상품을 템플릿(.xlsx)에 한 행에 하나씩 적어 \"Excel 통합 문서(.xlsx)\"로 저장하거나 \"CSV UTF-8(쉼표로 분리)\"로 저장해 올려 주세요", "the file is an old-style Word document (.doc), not a spreadsheet; put the products in the template (.xlsx), one a row, and save it as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\""},
	"not_xlsx.ppt":            {"이 파일은 예전 형식의 PowerPoint 문서(.ppt)입니다. 스프레드시트가 아닙니다. 상품을 템플릿(.xlsx)에 한 행에 하나씩 적어 \"Excel 통합 문서(.xlsx)\"로 저장하거나 \"CSV UTF-8(쉼표로 분리)\"로 저장해 올려 주세요", "the file is an old-style PowerPoint document (.ppt), not a spreadsheet; put the products in the template (.xlsx), one a row, and save it as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\""},
	"not_xlsx.hwp":            {"이 파일은 한글 문서(.hwp)입니다. 스프레드시트가 아닙니다. 상품을 템플릿(.xlsx)에 한 행에 하나씩 적어 \"Excel 통합 문서(.xlsx)\"로 저장하거나 \"CSV UTF-8(쉼표로 분리)\"로 저장해 올려 주세요", "the file is a Hangul word processor document (.hwp), not a spreadsheet; put the products in the template (.xlsx), one a row, and save it as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\""},
	"not_xlsx.zip":            {"이 파일은 Excel 통합 문서가 아닌 ZIP 압축 파일입니다. 압축을 풀어 안의 .xlsx 파일을 올리거나 Excel에서 \"Excel 통합 문서(.xlsx)\"로 저장해 주세요", "the file is a ZIP archive, not an Excel workbook; unpack it and upload the .xlsx inside, or save the list from Excel as \"Excel Workbook (.xlsx)\""},
	"not_xlsx.ods":            {"OpenDocument 파일(.ods, LibreOffice 형식)입니다. LibreOffice에서 파일 > 다른 이름으로 저장 > \"Excel 2007-365 (.xlsx)\"로 저장하거나 CSV로 저장해 주세요", "the file is an OpenDocument file (.ods, LibreOffice's own format), not an Excel workbook; in LibreOffice choose File > Save As, \"Excel 2007-365 (.xlsx)\", or save it as CSV"},
	"not_xlsx.numbers":        {"Apple Numbers 문서입니다. Numbers에서 파일 > 내보내기 > Excel(.xlsx) 또는 CSV로 내보내 주세요", "the file is an Apple Numbers document, not an Excel workbook; in Numbers choose File > Export To > Excel (.xlsx), or CSV"},
	"not_xlsx.office":         {"Word 또는 PowerPoint 문서입니다. 스프레드시트가 아닙니다. 상품을 템플릿(.xlsx)에 한 행에 하나씩 적거나 CSV로 저장해 주세요", "the file is a Word or PowerPoint document, not a spreadsheet; put the products in the template (.xlsx), one a row, or save them as CSV"},
	"not_xlsx.encoding":       {"Excel 통합 문서(.xlsx)가 아니고, 글자 인코딩도 UTF-8이나 CP949(EUC-KR)가 아닙니다. \"Excel 통합 문서(.xlsx)\" 또는 \"CSV UTF-8(쉼표로 분리)\"로 저장해 주세요", "the file is not an Excel workbook (.xlsx), and as text it is neither UTF-8 nor CP949 (EUC-KR); save it from Excel as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\""},
	"damaged":                 {"파일을 읽을 수 없습니다. Excel에서 열어 .xlsx로 다시 저장해 주세요", "the file could not be read; open it in Excel and save it again as .xlsx"},
	"damaged.quote":           {"파일이 손상되었습니다: 따옴표로 시작한 {cell} 칸이 닫히지 않습니다. Excel에서 다시 저장해 주세요", "the file is damaged: the quoted cell {cell} is never closed; save it again from Excel"},
	"damaged.lines":           {"파일의 줄이 {count}개가 넘어 시트 하나에 담을 수 없습니다", "the file has more than {count} {count|line|lines}, more than a sheet can hold"},
	"damaged.parts":           {"파일이 손상되었습니다: 같은 이름의 부분 {part}{이} 두 개 있습니다. Excel에서 .xlsx로 다시 저장해 주세요", "the file is damaged: it holds two parts named {part}; save it again from Excel as .xlsx"},
	"damaged.part":            {"파일이 손상되었거나 일부만 있습니다 (부분 {part}). Excel에서 다시 저장해 올려 주세요", "the file is damaged or incomplete (part {part}); save it again from Excel and upload it again"},
	"damaged.sheet":           {"파일이 손상되었거나 일부만 있습니다 (시트 {sheet}). Excel에서 다시 저장해 올려 주세요", "the file is damaged or incomplete (sheet {sheet}); save it again from Excel and upload it again"},
	"not_xlsx.utf8":           {"UTF-8 텍스트로 시작하지만 UTF-8이 아닌 바이트가 있습니다. Excel에서 \"CSV UTF-8(쉼표로 분리)\"로 다시 저장해 주세요", "the file starts as UTF-8 text but holds bytes that are not UTF-8; save it again from Excel as \"CSV UTF-8 (Comma delimited)\""},
	"not_xlsx.utf16":          {"UTF-16 텍스트(Excel의 \"유니코드 텍스트\")인데 {at}바이트 지점이 손상되었습니다. Excel에서 다시 저장하거나 \"CSV UTF-8(쉼표로 분리)\"로 저장해 주세요", "the file is UTF-16 text (Excel's \"Unicode text\") but is damaged {at} {at|byte|bytes} in; save it again from Excel, or as \"CSV UTF-8 (Comma delimited)\""},
	"no_header":               {"머리글 행을 찾지 못했습니다. 처음 {rows}개 행 중 한 행에 열 이름({names}, ...)이 있어야 합니다. 템플릿에서 시작해 주세요", "no header row was found: one of the first {rows} {rows|row|rows} must name the columns ({names}, ...); start from the template"},
	"no_header.sheets":        {"처음 {sheets}개의 보이는 시트에서 머리글 행을 찾지 못했습니다. 상품 시트를 맨 앞으로 옮기거나 템플릿에서 시작해 주세요", "no header row was found in the first {sheets} visible {sheets|sheet|sheets}; move the product sheet to the front or start from the template"},
	"missing_column":          {"머리글 행({row}행)에 필수 열 {columns}{이} 없습니다. 열을 추가하거나 템플릿에서 시작해 주세요", "the header row (row {row}) lacks the required columns {columns}; add them or start from the template"},
	"missing_column.one":      {"필수 열 {column}{이} 머리글 행({row}행)에 없습니다", "the required column {column} is missing from the header row (row {row})"},
	"missing_column.long":     {"머리글 행({row}행)에 필수 열 {columns}{이} 없습니다. {max}자보다 긴 머리글 칸({cells})은 열 이름으로 읽지 않습니다. 열 이름만 남기고 줄이거나 템플릿에서 시작해 주세요", "the header row (row {row}) lacks the required columns {columns}: header cells longer than {max} {max|character|characters} ({cells}) are not read as column names; shorten them to the columns' names, or start from the template"},
	"missing_column.one_long": {"필수 열 {column}{이} 머리글 행({row}행)에 없습니다. {cell} 칸이 이 열을 가리키지만 {max}자보다 길어 읽지 않았습니다. 열 이름만 남기고 줄여 주세요", "the required column {column} is missing from the header row (row {row}): the header cell {cell} would name it but is longer than {max} {max|character|characters}; shorten it to the column's name"},
	"duplicate_column":        {"머리글 행에 같은 열이 두 번 있습니다: {detail}", "the header row names a column twice: {detail}"},
	"duplicate_column.one":    {"{header} 열은 {field}{을} 다시 가리킵니다 (이미 {other})", "column {header} names {field} again (already {other})"},
	"too_many_rows":           {"상품 행이 {count}개입니다. 한 번에 최대 {max}개까지 올릴 수 있어 아무것도 등록하지 않았습니다. {max}개 행 이하의 파일로 나눠 주세요", "the file has {count} data {count|row|rows}; at most {max} can be uploaded at once, so nothing was registered: split it into files of at most {max} {max|row|rows}"},
	"too_many_rows.atleast":   {"상품 행이 {count}개가 넘습니다. 한 번에 최대 {max}개까지 올릴 수 있어 아무것도 등록하지 않았습니다. {max}개 행 이하의 파일로 나눠 주세요", "the file has more than {count} data {count|row|rows}; at most {max} can be uploaded at once, so nothing was registered: split it into files of at most {max} {max|row|rows}"},
	"no_rows":                 {"머리글 행({row}행)은 있지만 그 아래에 상품 행이 없습니다", "the file has a header row (row {row}) but no product rows below it"},
	"timeout":                 {"파일을 읽는 데 너무 오래 걸렸습니다. 다시 시도하거나 작은 파일로 나눠 주세요", "the file took too long to read; try again, or split it into smaller files"},
	"canceled":                {"파일 읽기가 취소되었습니다", "reading the file was cancelled"},
	"invalid_rows":            {"행에 문제가 {count}개 있습니다. 엄격한 업로드는 모든 행이 올바를 때까지 아무것도 등록하지 않습니다", "{count} {count|problem|problems} in the rows; a strict upload publishes nothing until every row is valid"},

	// Results of rows the consumers record.
	"registry_refused":            {"값이 마켓의 상품 규칙에 맞지 않아 마켓이 이 행을 받지 않았습니다. 마켓의 설명: \"{detail}\"", "the registration API refused the value: {detail}"},
	"registry_refused.nofield":    {"마켓의 상품 규칙에 맞지 않아 마켓이 이 행을 받지 않았습니다. 마켓의 설명: \"{detail}\"", "the registration API refused the row: {detail}"},
	"dead_lettered":               {"마켓이 {attempts}번 시도에도 이 행을 받지 않아 ({detail}) 운영자가 다시 시도하도록 따로 두었습니다. 다시 올릴 필요는 없습니다", "the registration API did not take the row after {attempts} {attempts|attempt|attempts} ({detail}); it was set aside for an operator to retry"},
	"dead_lettered.transient":     {"마켓이 {attempts}번 시도 모두 일시적인 오류로 답해 ({detail}) 운영자가 다시 보내도록 따로 두었습니다. 파일 내용에는 문제가 없습니다. 다시 보내지면 저절로 등록되고, 그 전에 다시 올려도 두 번 등록되지는 않습니다", "the registration API answered {attempts} {attempts|attempt|attempts} in a row with a temporary error ({detail}); the row was set aside for an operator to send again. Nothing is wrong with its content: it registers by itself when sent again, and uploading it again before that does not register it twice"},
	"dead_lettered.misconfigured": {"마켓이 bulkreg의 접속을 거부해 ({detail}) {attempts}번 시도 뒤 운영자가 다시 보내도록 따로 두었습니다. 파일 내용에는 문제가 없습니다. 다시 보내지면 저절로 등록되고, 그 전에 다시 올려도 두 번 등록되지는 않습니다", "the registration API refused bulkreg's access ({detail}) on {attempts} {attempts|attempt|attempts}; the row was set aside for an operator to send again. Nothing is wrong with its content: it registers by itself when sent again, and uploading it again before that does not register it twice"},
	"dead_lettered.rate_limited":  {"마켓이 {attempts}번 시도 모두 등록 한도를 넘었다고 답해 ({detail}) 운영자가 다시 보내도록 따로 두었습니다. 파일 내용에는 문제가 없습니다. 다시 보내지면 저절로 등록되고, 그 전에 다시 올려도 두 번 등록되지는 않습니다", "the registration API answered {attempts} {attempts|attempt|attempts} in a row that its limit was reached ({detail}); the row was set aside for an operator to send again. Nothing is wrong with its content: it registers by itself when sent again, and uploading it again before that does not register it twice"},
	"dead_lettered.status":        {"응답 코드 {status}", "status {status}"},
	"dead_lettered.noanswer":      {"제대로 된 응답을 받지 못함", "no usable answer"},
	"call_failed":                 {"제대로 된 응답을 받지 못함", "no usable answer"},
	"call_failed.timeout":         {"마켓이 제한 시간 안에 답하지 않음", "the marketplace did not answer in time"},
	"call_failed.unreachable":     {"마켓에 연결할 수 없음", "the marketplace could not be reached"},
	"call_failed.closed":          {"마켓이 답하기 전에 연결을 끊음", "the marketplace closed the connection without answering"},
	"call_failed.unreadable":      {"마켓의 응답을 읽을 수 없음", "the marketplace's answer could not be read"},
	"call_failed.tls":             {"마켓과 보안 연결을 맺지 못함", "the secure connection (TLS) to the marketplace failed"},
	"call_failed.cancelled":       {"응답을 받기 전에 호출이 취소됨", "the call was cancelled before an answer came"},
	"call_failed.not_sent":        {"요청을 보내지 않음", "no call was made"},
	"bad_message":                 {"이 행의 메시지를 읽을 수 없어 운영자에게 넘겼습니다", "the row's message could not be read; it was handed to an operator"},
	"already_registered":          {"이미 {product}{으로} 등록되어 있어 다시 보내지 않았습니다", "already registered as {product}; nothing was sent again"},
	"already_registered.from":     {"이미 {date}에 업로드 {upload}의 {row}행에서 {product}{으로} 등록되어 있어 다시 보내지 않았습니다", "already registered as {product} by upload {upload} row {row} on {date}; nothing was sent again"},
	"registered_twice":            {"{product}{으로} 등록했지만 {field} {value}{은} 이미 {other}{으로} 등록되어 있었습니다. 마켓에 같은 코드의 상품이 두 개 있으니 판매자 센터의 상품 관리에서 하나를 지워 주세요", "registered as {product}, but {field} {value} was already registered as {other}: the marketplace now holds it twice; delete one of them in the seller center's product management"},
	"registered_twice.from":       {"{product}{으로} 등록했지만 {field} {value}{은} 이미 {date}에 업로드 {upload}의 {row}행에서 {other}{으로} 등록되어 있었습니다. 마켓에 같은 코드의 상품이 두 개 있으니 판매자 센터의 상품 관리에서 하나를 지워 주세요", "registered as {product}, but {field} {value} was already registered as {other} by upload {upload} row {row} on {date}: the marketplace now holds it twice; delete one of them in the seller center's product management"},
	"cells_not_kept":              {"이 보고서에는 이 행의 셀이 없습니다. 올린 파일의 글이 bulkreg가 보관하는 양보다 많았습니다. 원래 파일에서 복사해 주세요", "the row's cells are not in this report: the upload held more text than bulkreg keeps; copy them from your file"},

	// A row's result, as a report shows it. English keeps the codes the
	// reports always said.
	"result.registered":                       {"등록됨", "registered"},
	"result.already_registered":               {"이미 등록됨", "already_registered"},
	"result.failed":                           {"실패", "failed"},
	"result.waiting":                          {"대기 중", "waiting"},
	"result.already_registered_other_content": {"다른 내용으로 이미 등록됨", "already registered with different content"},
	"report.original_row":                     {"원본 {row}행", "original row {row}"},

	// Notices of the service.
	"misconfigured":    {"마켓 연결 설정에 문제가 있어 등록을 잠시 멈췄습니다. 행은 그대로 남아 있고 운영자가 고치면 저절로 이어집니다", "registration is paused: bulkreg's connection to the marketplace is misconfigured; the rows are kept and continue by themselves once an operator fixes it"},
	"too_many_reports": {"보고서를 동시에 너무 많이 만들고 있습니다. 잠시 후 다시 시도해 주세요", "too many reports are being built at once; try again shortly"},
	"bad_parameter":    {"주소의 {parameter} 값은 true 또는 false여야 합니다", "the parameter {parameter} must be true or false"},
	"uploaded_before":  {"이 파일은 {date}에 올린 적이 있어 다시 등록하지 않습니다", "this file was uploaded on {date}; it is not registered again"},
}

// Known reports whether the table has key.
func Known(key string) bool { _, ok := table[key]; return ok }

// Keys returns every key of the table, sorted.
func Keys() []string {
	out := make([]string, 0, len(table))
	for k := range table {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Key is the table's key for code with params: code.kind when the table
// has that variant, else code.
func Key(code string, params map[string]string) string {
	if k := params[KindParam]; k != "" {
		if _, ok := table[code+"."+k]; ok {
			return code + "." + k
		}
	}
	return code
}

// Template returns the raw sentence of key in lang.
func Template(lang, key string) (string, bool) {
	t, ok := table[key]
	if !ok {
		return "", false
	}
	if lang == EN {
		return t.en, true
	}
	return t.ko, true
}

// Render is the sentence of code (and its variant, params["kind"]) in lang,
// with every {name} replaced by params[name] (a missing one by ""), its
// particles and plurals chosen (fill). False when the table has no such
// code. A sentence that does not name its field is said without it; At
// puts the field before it.
func Render(lang, code string, params map[string]string) (string, bool) {
	s, ok := Template(lang, Key(code, params))
	if !ok {
		return "", false
	}
	return fill(s, params), true
}

// NamesField reports whether the sentence of code (its variant by
// params["kind"]) names {field} itself; one that does not is said after
// its field (At).
func NamesField(code string, params map[string]string) bool {
	s, _ := Template(KO, Key(code, params))
	return strings.Contains(s, "{field}")
}

// At says a sentence where it applies: the cell (or, without one, the
// row's number) and the field, once each, before it: "D3 판매가: …",
// "5행: …", "row 5 price: …", "판매가: …"; the sentence alone when there
// is neither.
func At(lang, cell string, row int, field, sentence string) string {
	place := cell
	if place == "" && row > 0 {
		place = RowNumber(lang, row)
	}
	switch {
	case place != "" && field != "":
		return place + " " + field + ": " + sentence
	case place != "" || field != "":
		return place + field + ": " + sentence
	}
	return sentence
}

// RowNumber names a row by its number: "5행", "row 5".
func RowNumber(lang string, row int) string {
	if lang == EN {
		return "row " + strconv.Itoa(row)
	}
	return strconv.Itoa(row) + "행"
}

// Plural is one when n is 1, else other: Plural(n, "row", "rows").
func Plural(n int, one, other string) string {
	if n == 1 {
		return one
	}
	return other
}

// fill replaces each {mark} of s: {name} by params[name]; a particle
// ({을}, {으로}, ...) by its form that follows what is written before it;
// {name|one|other} by one when params[name] is the number 1, else other.
func fill(s string, params map[string]string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		mark := s[i+1 : i+j]
		name, forms, plural := strings.Cut(mark, "|")
		switch {
		case IsParticle(mark):
			b.WriteString(Particle(b.String(), mark))
		case plural:
			one, other, _ := strings.Cut(forms, "|")
			if strings.ReplaceAll(strings.TrimSpace(params[name]), ",", "") == "1" {
				b.WriteString(one)
			} else {
				b.WriteString(other)
			}
		default:
			b.WriteString(params[name])
		}
		s = s[i+j+1:]
	}
}

// Placeholders returns the parameter names a sentence uses, sorted, each
// once: {name} and {name|one|other}, not the particles.
func Placeholders(s string) []string {
	var out []string
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			break
		}
		if mark := s[i+1 : i+j]; !IsParticle(mark) {
			name, _, _ := strings.Cut(mark, "|")
			out = append(out, name)
		}
		s = s[i+j+1:]
	}
	slices.Sort(out)
	return slices.Compact(out)
}
