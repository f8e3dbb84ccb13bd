package excel

import (
	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/productrules"
)

// FieldCell names the cell of field (for example FieldSellerSKU) in
// spreadsheet row n ("A17"), so a problem found after parsing (the SKU
// ledger's) names a cell like the parser's own problems do. It returns ""
// when the sheet has no column for field.
func (s *Sheet) FieldCell(field string, n int) string {
	for i, h := range s.Header {
		if c, ok := lookupColumn(h); ok && c.Field == field {
			return cellName(i+1, n)
		}
	}
	return ""
}

// AsTyped returns the product of a valid row with its text as the seller
// typed it (without normalising again for a row the parser built): outer spaces trimmed as always, but not brought to NFC. It
// differs from r.Product only in text typed in another normalization form
// (NFD, as macOS writes it). A version that kept text as typed sent and
// hashed this product, so the producer compares a ledger entry's content
// hash with it too: the same file uploaded again is the same content.
func (s *Sheet) AsTyped(r Row) bulkreg.Product {
	p := r.Product
	seen := map[string]bool{}
	for i, h := range s.Header {
		c, ok := lookupColumn(h)
		if !ok || seen[c.Field] || i >= len(r.Cells) {
			continue
		}
		seen[c.Field] = true // the first column of a field is the one read
		var f *string
		switch c.Field {
		case FieldSellerSKU:
			f = &p.SellerSKU
		case FieldName:
			f = &p.Name
		case FieldCategoryCode:
			f = &p.CategoryCode
		case FieldBrand:
			f = &p.Brand
		case FieldImageURL:
			f = &p.ImageURL
		case FieldDescription:
			f = &p.Description
		default:
			continue
		}
		// Only a change of form is undone: a cell that reads otherwise
		// (a merged cell's value, a cleaned apostrophe) keeps the product's.
		// The validator recorded which fields it brought to NFC (the text
		// it checked is the cleaned cell): normalising every text again
		// would cost as much as reading the file.
		typed := cleanCell(r.Cells[i])
		if r.typed.known {
			if r.typed.changed&textFieldBit(c.Field) != 0 {
				*f = typed
			}
		} else if typed != *f && productrules.NFC(typed) == *f {
			*f = typed
		}
	}
	return p
}
