package upload

import (
	"context"
	"fmt"
	"strconv"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/productrules"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Ledger tells which of a seller's SKUs bulkreg registered before (*ledger.Ledger).
type Ledger interface {
	Lookup(ctx context.Context, seller string, skus []string) (map[string]ledger.Entry, error)
}

// CodeRegisteredOtherContent is the problem code of a row whose SKU the
// seller registered before with other content.
const CodeRegisteredOtherContent = "already_registered_other_content"

// checkLedger looks every valid row's SKU up in the seller's ledger, in one
// round trip, before anything is published:
//   - registered with the same content: the row is not published; it is
//     returned as already registered (or as registered, when this very
//     upload's row registered it: a publish that failed part way, sent again);
//   - registered with other content: the row gets a problem on its SKU cell
//     and is refused like any invalid row: bulk registration only adds products;
//   - claimed or unknown: the row is published, and a consumer claims it.
//
// Rows of one SKU in flight in two uploads at once are both published; the
// consumers' claim lets only one of them call.
//
// The rows' SKUs and text are in NFC (the validator normalises them), and
// the ledger finds a SKU under either form (ledger.Ledger.Lookup), so a SKU
// typed in NFC in one file and pasted in NFD in another is one product.
func (u *Uploader) checkLedger(ctx context.Context, uploadID, seller string, sheet *excel.Sheet) (map[int]uploadstatus.RowResult, error) {
	known := map[int]uploadstatus.RowResult{}
	if u.Ledger == nil {
		return known, nil
	}
	var skus []string
	for _, r := range sheet.Rows {
		if r.Valid() {
			skus = append(skus, r.Product.SellerSKU)
		}
	}
	if len(skus) == 0 {
		return known, nil
	}
	entries, err := u.Ledger.Lookup(ctx, seller, skus)
	if err != nil {
		return nil, err
	}
	at := u.now()
	nfd := nfdBudget
	for i := range sheet.Rows {
		r := &sheet.Rows[i]
		e, ok := entries[r.Product.SellerSKU]
		if !r.Valid() || !ok || e.State != ledger.Registered {
			continue
		}
		if !sameContent(e.Hash, r.Product, func() bulkreg.Product { return sheet.AsTyped(*r) }, &nfd) {
			r.Problems = append(r.Problems, excel.Problem{Row: r.Number, Column: excel.FieldSellerSKU,
				Cell: sheet.FieldCell(excel.FieldSellerSKU, r.Number), Code: CodeRegisteredOtherContent,
				Message: fmt.Sprintf("seller_sku %q is already registered as %s; bulk registration does not change existing products", r.Product.SellerSKU, e.ProductID),
				Params:  map[string]string{"field": excel.FieldSellerSKU, "value": strconv.Quote(r.Product.SellerSKU), "product": e.ProductID}})
			continue
		}
		rr := uploadstatus.RowResult{Row: r.Number, State: uploadstatus.AlreadyRegistered, ProductID: e.ProductID, At: at, Reason: e.AlreadyRegistered(),
			Details: []uploadstatus.Detail{alreadyDetail(e)}}
		if e.Row == bulkreg.IdempotencyKey(uploadID, r.Number) {
			rr.State, rr.Reason = uploadstatus.Registered, ""
		}
		known[r.Number] = rr
	}
	return known, nil
}

// sameContent reports whether a ledger entry's content hash is p's. An
// entry registered before text was normalised holds the hash of the product
// as the seller typed it then. The same file uploaded again is the same
// content (typed: excel.Sheet.AsTyped, the text of this file as typed), and
// so is a file whose text was decomposed throughout (NFD, as macOS writes
// it) uploaded again from elsewhere in NFC. The hash of p is compared
// first: the common case (the same file again, typed in NFC) costs one hash,
// and typed (AsTyped) and the NFD form are built only when it differs.
//
// Decomposing is the one cost here that grows with what a file holds (about
// 70 ns a byte for text of composable pairs), so an upload decomposes at
// most nfdBudget bytes of text: *budget is what is left. Past it a row is
// other content: refused on its SKU cell, never registered twice.
func sameContent(hash string, p bulkreg.Product, asTyped func() bulkreg.Product, budget *int) bool {
	if hash == p.ContentHash() {
		return true
	}
	typed := asTyped()
	if typed != p && hash == typed.ContentHash() {
		return true
	}
	n := len(p.SellerSKU) + len(p.Name) + len(p.CategoryCode) + len(p.Brand) + len(p.ImageURL) + len(p.Description)
	if n > *budget {
		return false
	}
	*budget -= n
	d := p
	d.SellerSKU, d.Name, d.CategoryCode = productrules.NFD(p.SellerSKU), productrules.NFD(p.Name), productrules.NFD(p.CategoryCode)
	d.Brand, d.ImageURL, d.Description = productrules.NFD(p.Brand), productrules.NFD(p.ImageURL), productrules.NFD(p.Description)
	return d != p && d != typed && hash == d.ContentHash()
}

// nfdBudget is the text an upload's ledger check decomposes at most (see
// sameContent): 500 rows of 2 KiB, a few milliseconds; a whole 8 MiB of
// composable text would take most of a second.
const nfdBudget = 1 << 20

// alreadyDetail is ledger.Entry.AlreadyRegistered for the message table.
func alreadyDetail(e ledger.Entry) uploadstatus.Detail {
	return uploadstatus.Detail{Code: "already_registered", Params: e.Facts()}
}
