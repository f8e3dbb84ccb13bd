package upload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/sellertime"
	"github.com/bulkreg/bulkreg/messages"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Row states of a check.
const (
	RowValid             = "valid"
	RowInvalid           = "invalid"
	RowAlreadyRegistered = uploadstatus.AlreadyRegistered
)

// CheckedRow is one row of a checked file.
type CheckedRow struct {
	Number    int       `json:"row"`
	State     string    `json:"state"` // RowValid, RowInvalid or RowAlreadyRegistered
	ProductID string    `json:"product_id,omitempty"`
	Cells     []string  `json:"cells"` // aligned with Checked.Header
	Problems  []Problem `json:"problems,omitempty"`
}

// Checked is what an upload of the file would do, without doing it.
type Checked struct {
	Header []string `json:"header"`
	// Columns are the spreadsheet's column letters of Header ("A", "B", …).
	Columns           []string     `json:"columns"`
	Rows              []CheckedRow `json:"rows"`
	Valid             int          `json:"valid"`              // rows that would be published
	Invalid           int          `json:"invalid"`            // rows with a problem
	AlreadyRegistered int          `json:"already_registered"` // rows the seller registered before, same content
	// OtherContent counts the invalid rows whose only problem is that their
	// SKU is registered already with different content: nothing in the
	// file is wrong, and bulk registration does not change products.
	OtherContent int       `json:"other_content"`
	Problems     []Problem `json:"problems"`
	Warnings     []Problem `json:"warnings"`
	// UploadedBefore is this seller's earlier upload of this very file,
	// while it is kept: registering the file again registers nothing and
	// shows that upload.
	UploadedBefore *UploadedBefore `json:"uploaded_before,omitempty"`
}

// UploadedBefore names an earlier upload of the same file.
type UploadedBefore struct {
	UploadID  string    `json:"upload_id"`
	FileName  string    `json:"file_name"`
	CreatedAt time.Time `json:"created_at"`
}

// Check reads and validates the file and looks its SKUs up in the seller's
// ledger as Upload would, and records and publishes nothing: the answer
// lists every problem by cell. A file refused whole is an error wrapping
// ErrRefused (see Refused).
func (u *Uploader) Check(ctx context.Context, seller string, data []byte) (*Checked, error) {
	if err := bulkreg.ValidSellerID(seller); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	sheet, err := u.parse(ctx, data)
	if err != nil {
		var fe *excel.FileError
		if errors.As(err, &fe) && fe.Code != excel.CodeTimeout && fe.Code != excel.CodeCanceled {
			return nil, fmt.Errorf("%w: %w", ErrRefused, err)
		}
		return nil, fmt.Errorf("read the spreadsheet: %w", err)
	}
	// The upload id only tells this file's own earlier rows apart, which a
	// check does not report differently.
	known, err := u.checkLedger(ctx, "", seller, sheet)
	if err != nil {
		return nil, fmt.Errorf("look up the seller's registered SKUs: %w", err)
	}
	c := &Checked{Header: sheet.Header, Rows: make([]CheckedRow, 0, len(sheet.Rows)),
		Problems: []Problem{}, Warnings: Problems(sheet.Warnings)}
	if c.Warnings == nil {
		c.Warnings = []Problem{}
	}
	for i := range sheet.Header {
		c.Columns = append(c.Columns, ColumnLetters(i))
	}
	c.UploadedBefore = u.uploadedBefore(ctx, seller, data)
	for _, r := range sheet.Rows {
		cr := CheckedRow{Number: r.Number, State: RowValid, Cells: r.Cells, Problems: Problems(r.Problems)}
		switch k, ok := known[r.Number]; {
		case !r.Valid():
			cr.State = RowInvalid
			c.Invalid++
			if OnlyOtherContent(cr.Problems) {
				c.OtherContent++
			}
			c.Problems = append(c.Problems, cr.Problems...)
		case ok:
			cr.State, cr.ProductID = RowAlreadyRegistered, k.ProductID
			c.AlreadyRegistered++
		default:
			c.Valid++
		}
		c.Rows = append(c.Rows, cr)
	}
	return c, nil
}

// ColumnLetters names the i-th column (from 0) as a spreadsheet does: A, …, Z, AA, ….
func ColumnLetters(i int) string {
	var b []byte
	for i++; i > 0; i = (i - 1) / 26 {
		b = append([]byte{byte('A' + (i-1)%26)}, b...)
	}
	return string(b)
}

// Category is one of the marketplace's categories (excel.Category).
type Category = excel.Category

// WriteTemplate writes the empty upload template (.xlsx); with
// categories, a sheet lists them and its category column takes only their
// codes.
func WriteTemplate(w io.Writer, categories []Category) error {
	return excel.WriteTemplate(w, excel.TemplateOptions{Categories: categories})
}

// OnlyOtherContent reports whether a row's problems are only that its SKU
// is registered already with different content.
func OnlyOtherContent(ps []Problem) bool {
	for _, p := range ps {
		if p.Code != CodeRegisteredOtherContent {
			return false
		}
	}
	return len(ps) > 0
}

// uploadedBefore finds the seller's earlier upload of data (the upload id
// is the seller and the file's hash), published or publishing; nil when
// there is none or it cannot be read now (the check still answers).
func (u *Uploader) uploadedBefore(ctx context.Context, seller string, data []byte) *UploadedBefore {
	if u.Index == nil {
		return nil
	}
	sum := sha256.Sum256(data)
	id := UploadID(seller, hex.EncodeToString(sum[:]))
	sts, err := u.Index.Summaries(ctx, []string{id})
	if err != nil || len(sts) != 1 || sts[0].SellerID != seller || sts[0].State == uploadstatus.PublishFailed {
		return nil
	}
	return &UploadedBefore{UploadID: id, FileName: sts[0].FileName, CreatedAt: sts[0].CreatedAt}
}

// Text says, in lang, that the file was uploaded before and when, the time
// in zone.
func (b UploadedBefore) Text(lang string, zone *time.Location) string {
	s, _ := messages.Render(lang, "uploaded_before", map[string]string{"date": sellertime.Format(lang, b.CreatedAt, zone)})
	return s
}
