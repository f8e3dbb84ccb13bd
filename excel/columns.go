package excel

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bulkreg/bulkreg/messages"
	"github.com/bulkreg/bulkreg/productrules"
)

// Column describes one column of the upload format.
type Column struct {
	Field    string // the field name, as in the registration API: "seller_sku"
	Korean   string // the name the template uses: "판매자상품코드"
	Required bool
	Aliases  []string // other accepted names, compared after normalisation
}

// Label is how messages name the column: "판매자상품코드 (seller_sku)".
func (c Column) Label() string { return c.Korean + " (" + c.Field + ")" }

// Fields of the upload, in template order: the fields of the registration API.
const (
	FieldSellerSKU    = productrules.SellerSKU
	FieldName         = productrules.Name
	FieldCategoryCode = productrules.CategoryCode
	FieldPrice        = productrules.Price
	FieldStock        = productrules.Stock
	FieldBrand        = productrules.Brand
	FieldImageURL     = productrules.ImageURL
	FieldDescription  = productrules.Description
	FieldShippingFee  = productrules.ShippingFee
)

// Columns returns the upload format, in template order. Whether a column is
// required is the field's rule (package productrules).
func Columns() []Column {
	cols := []Column{
		{FieldSellerSKU, "판매자상품코드", false, []string{"판매자상품코드", "상품코드", "판매자코드", "sku", "sellersku", "sellerproductcode", "productcode"}},
		{FieldName, "상품명", false, []string{"상품명", "제품명", "name", "productname", "itemname", "title"}},
		{FieldCategoryCode, "카테고리코드", false, []string{"카테고리코드", "카테고리", "카테고리번호", "categorycode", "category", "categoryid"}},
		{FieldPrice, "판매가", false, []string{"판매가", "판매가격", "가격", "price", "saleprice", "sellingprice"}},
		{FieldStock, "재고수량", false, []string{"재고수량", "재고", "수량", "stock", "quantity", "qty", "stockquantity"}},
		{FieldBrand, "브랜드", false, []string{"브랜드", "브랜드명", "brand", "brandname"}},
		{FieldImageURL, "대표이미지URL", false, []string{"대표이미지url", "대표이미지", "이미지url", "이미지", "imageurl", "image", "mainimageurl", "mainimage"}},
		{FieldDescription, "상세설명", false, []string{"상세설명", "상품설명", "설명", "description", "detail", "details"}},
		{FieldShippingFee, "배송비", false, []string{"배송비", "shippingfee", "shipping", "deliveryfee"}},
	}
	for i := range cols {
		cols[i].Required = productrules.Must(cols[i].Field).Required
	}
	return cols
}

// Report columns: the result report adds them after the seller's columns,
// in the report's language (a Korean report is all Korean, an English one
// all English). The parser knows both and ignores them silently, so a
// failed-rows report can be uploaded again as it is.
const (
	ReportColumnRow    = "원래 행"
	ReportColumnResult = "결과"
	ReportColumnReason = "사유"
	// ReportColumnProductID is the marketplace's product number of a
	// registered row.
	ReportColumnProductID = "상품번호"
	// ReportColumnAt is when the row's result was recorded, as the seller
	// reads times (the zone named in every cell).
	ReportColumnAt = "처리 시각"

	ReportColumnRowEN       = "Original row"
	ReportColumnResultEN    = "Result"
	ReportColumnReasonEN    = "Reason"
	ReportColumnProductIDEN = "Product ID"
	ReportColumnAtEN        = "Done at"
)

// reportColumns are the report's own columns in lang.
func reportColumns(lang string) []string {
	if lang == messages.EN {
		return []string{ReportColumnRowEN, ReportColumnResultEN, ReportColumnReasonEN, ReportColumnProductIDEN, ReportColumnAtEN}
	}
	return []string{ReportColumnRow, ReportColumnResult, ReportColumnReason, ReportColumnProductID, ReportColumnAt}
}

var ignoredHeaders = map[string]bool{
	normalizeHeader(ReportColumnRow):         true,
	normalizeHeader(ReportColumnResult):      true,
	normalizeHeader(ReportColumnReason):      true,
	normalizeHeader(ReportColumnProductID):   true,
	normalizeHeader(ReportColumnRowEN):       true,
	normalizeHeader(ReportColumnResultEN):    true,
	normalizeHeader(ReportColumnReasonEN):    true,
	normalizeHeader(ReportColumnProductIDEN): true,
	normalizeHeader(ReportColumnAt):          true,
	normalizeHeader(ReportColumnAtEN):        true,
	// The reports before said both languages, "결과 (result)" and the like:
	// without their brackets they are the Korean names.
}

// columnIndex maps a normalised header to its column; built once, never changed.
var columnIndex = func() map[string]Column {
	m := map[string]Column{}
	for _, c := range Columns() {
		m[normalizeHeader(c.Field)] = c
		m[normalizeHeader(c.Korean)] = c
		for _, a := range c.Aliases {
			m[normalizeHeader(a)] = c
		}
	}
	return m
}()

// normalizeHeader folds the ways sellers decorate a column name: case,
// spaces, "_", "-", ".", "*", and anything in brackets such as "(필수)",
// "(원)" or "【필수】" (ASCII, full-width and CJK brackets alike). "판매가
// (필수)*" and "Price" both become their bare name.
func normalizeHeader(s string) string {
	return string(appendNormalizedHeader(nil, s))
}

// appendNormalizedHeader appends normalizeHeader(s) to dst: a header is
// looked up for every cell of the rows searched for one, without allocating.
func appendNormalizedHeader(dst []byte, s string) []byte {
	dst, _ = appendHeaderKeyWithin(dst, s, -1)
	return dst
}

// MaxHeaderChars bounds a header cell, in characters, its surrounding
// spaces trimmed: a known column's name with its decorations ("판매가 (원,
// 필수)*") is far shorter. A longer header cell names no column (however
// its text reads once decorations and brackets are dropped), and the
// reader keeps only its first MaxHeaderChars characters and "…" (Sheet.Header),
// so every page, answer and report that shows the header shows at most
// that.
const MaxHeaderChars = 100

// maxHeaderKey is the longest normalised name of a known column, in bytes.
var maxHeaderKey = func() int {
	n := 0
	for k := range columnIndex {
		n = max(n, len(k))
	}
	return n
}()

// lookupColumn returns the column a header cell names: none when the cell
// is longer than MaxHeaderChars.
func lookupColumn(header string) (Column, bool) {
	header = strings.TrimFunc(header, isSpace)
	if len(header) > MaxHeaderChars && (len(header) > utf8.UTFMax*MaxHeaderChars || utf8.RuneCountInString(header) > MaxHeaderChars) {
		return Column{}, false
	}
	return lookupNormalized(header)
}

// lookupNormalized is lookupColumn whatever the header's length. It stops
// normalising past the longest known name, so a long header costs no more
// than a short one.
func lookupNormalized(header string) (Column, bool) {
	var buf [64]byte
	key, ok := appendHeaderKey(buf[:0], header)
	if !ok {
		return Column{}, false
	}
	c, ok := columnIndex[string(key)]
	return c, ok
}

// appendHeaderKey is appendNormalizedHeader stopping (false) once the key
// is longer than any known column's.
func appendHeaderKey(dst []byte, s string) ([]byte, bool) {
	return appendHeaderKeyWithin(dst, s, maxHeaderKey)
}

// appendHeaderKeyWithin appends s to dst without its bracketed text,
// spaces and decorations, lower-cased; it stops (false) once dst is longer
// than limit bytes (limit < 0: no limit).
func appendHeaderKeyWithin(dst []byte, s string, limit int) ([]byte, bool) {
	depth := 0
	for _, r := range s {
		switch r {
		case '(', '[', '{', '<', '（', '［', '｛', '＜', '‹', '〈', '《', '「', '『', '【', '〔', '〖', '〘':
			depth++
			continue
		case ')', ']', '}', '>', '）', '］', '｝', '＞', '›', '〉', '》', '」', '』', '】', '〕', '〗', '〙':
			if depth > 0 {
				depth--
			}
			continue
		}
		if depth > 0 || unicode.IsSpace(r) || r == '_' || r == '-' || r == '.' || r == '*' || r == '＊' || r == '\u200b' || r == '\ufeff' {
			continue
		}
		if dst = utf8.AppendRune(dst, unicode.ToLower(r)); limit >= 0 && len(dst) > limit {
			return dst, false
		}
	}
	return dst, true
}

// cutHeader keeps the first MaxHeaderChars characters of a header cell (or
// a sheet's name), marking a cut with "…": a cut header is longer than
// MaxHeaderChars and so names no column, as the whole cell did not.
func cutHeader(s string) string {
	if len(s) <= MaxHeaderChars {
		return s
	}
	n := 0
	for i := range s {
		if n == MaxHeaderChars {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// headerScore counts the distinct known columns a row names.
func headerScore(cells []cell) int {
	seen := map[string]bool{}
	for _, h := range cells {
		if c, ok := lookupColumn(h.text); ok {
			seen[c.Field] = true
		}
	}
	return len(seen)
}
