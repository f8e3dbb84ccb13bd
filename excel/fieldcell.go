package excel

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
