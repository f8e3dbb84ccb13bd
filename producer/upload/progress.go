package upload

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Slots tells when a seller's next rows get their throttle slots
// (*throttle.Throttle, with the consumers' policy).
type Slots interface {
	Forecast(ctx context.Context, seller string, n int) (throttle.Forecast, error)
}

// Errors of the read side, for callers that branch (the HTTP status).
var (
	// ErrNotFound: the seller has no such upload (unknown, expired, or another seller's).
	ErrNotFound = errors.New("no such upload")
	// ErrBadCursor: a listing's cursor is not one List gave.
	ErrBadCursor = errors.New("the cursor is not one this service gave")
)

// maxAhead bounds how many of the seller's earlier uploads the finish
// estimate reads: a seller has a handful in progress, never hundreds.
const maxAhead = 50

// Progress is an upload's status with its finish estimate.
type Progress struct {
	uploadstatus.Status
	// RowsWaiting is the rows not yet registered, already registered or
	// failed (Status.Waiting).
	RowsWaiting int `json:"rows_waiting"`
	// ETA is when the last waiting row is expected to be registered: the
	// throttle slot it will get, the seller's earlier uploads' waiting rows
	// and the slots already held counted first. nil when nothing waits, or
	// when no estimate can be made (the rows are not published, Redis did
	// not answer).
	ETA *time.Time `json:"eta"`
	// RowsAhead is the waiting rows of the seller's earlier uploads: they
	// take their slots first.
	RowsAhead int `json:"rows_ahead"`
	// Marketplace and Notice say whether the registration API answers
	// (UploadView).
	Marketplace string `json:"marketplace,omitempty"`
	Notice      string `json:"notice,omitempty"`
}

// Status returns the seller's upload; another seller's upload is
// ErrNotFound, so its existence does not leak.
func (u *Uploader) Status(ctx context.Context, seller, id string) (uploadstatus.Status, error) {
	st, err := u.Statuses.Get(ctx, id)
	if errors.Is(err, uploadstatus.ErrNotFound) || (err == nil && st.SellerID != seller) {
		return uploadstatus.Status{}, fmt.Errorf("upload %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return uploadstatus.Status{}, err
	}
	return st, nil
}

// Progress returns the seller's upload with its finish estimate. An
// estimate that cannot be made is logged and left out; the status is still
// answered.
func (u *Uploader) Progress(ctx context.Context, seller, id string) (Progress, error) {
	st, err := u.Status(ctx, seller, id)
	if err != nil {
		return Progress{}, err
	}
	p := u.Estimate(ctx, st)
	v := View(ctx, st, u.Marketplace)
	p.Marketplace, p.Notice = v.Marketplace, v.Notice
	return p, nil
}

// Estimate adds the finish estimate to a status.
//
// The throttle knows the seller's slots: the rows waiting take the slots
// already held (or being called) first, in order, then each the slot the
// policy's reserve script would give it (sliding: max(now, blocked,
// s(n−L+1) + W′)), so the last row's slot is computed from the log, not
// guessed from a rate. The rows of the seller's earlier
// uploads still waiting come first (one seller's rows share one partition,
// read in order). Asked again as rows finish, it stays true: a row that
// failed or found its SKU registered frees its place.
func (u *Uploader) Estimate(ctx context.Context, st uploadstatus.Status) Progress {
	p := Progress{Status: st, RowsWaiting: st.Waiting}
	if st.Waiting == 0 || st.State != uploadstatus.Published || u.Slots == nil {
		return p
	}
	if u.Index != nil {
		ids, err := u.Index.SellerUploads(ctx, st.SellerID, st.CreatedAt, maxAhead)
		if err == nil {
			var earlier []uploadstatus.Status
			earlier, err = u.Index.Summaries(ctx, ids)
			for _, e := range earlier {
				if e.ID != st.ID && e.State == uploadstatus.Published {
					p.RowsAhead += e.Waiting
				}
			}
		}
		if err != nil {
			u.logger(ctx).Warn("finish estimate: could not read the seller's earlier uploads", "upload_id", st.ID, "err", err)
			return p
		}
	}
	f, err := u.Slots.Forecast(ctx, st.SellerID, p.RowsAhead+st.Waiting)
	if err != nil {
		u.logger(ctx).Warn("finish estimate: the throttle did not answer", "upload_id", st.ID, "err", err)
		return p
	}
	// The forecast is on the Redis clock; the seller reads it on ours.
	eta := u.now().Add(f.Last.Sub(f.Now)).Round(time.Millisecond)
	p.ETA = &eta
	return p
}

// Page is one page of a seller's uploads, newest first.
type Page struct {
	Uploads []uploadstatus.Status `json:"uploads"`
	// Next is the cursor of the next (older) page; "" on the last page.
	Next string `json:"next_cursor,omitempty"`
}

// DefaultPageSize and MaxPageSize bound a listing.
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
)

// List returns a page of the seller's uploads, newest first, with their
// counts (not their rows). cursor is "" for the first page, else a Page.Next.
func (u *Uploader) List(ctx context.Context, seller, cursor string, size int) (Page, error) {
	if size <= 0 {
		size = DefaultPageSize
	}
	size = min(size, MaxPageSize)
	var before time.Time
	if cursor != "" {
		us, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || us <= 0 {
			return Page{}, fmt.Errorf("cursor %q: %w", cursor, ErrBadCursor)
		}
		before = time.UnixMicro(us)
	}
	if u.Index == nil {
		return Page{Uploads: []uploadstatus.Status{}}, nil
	}
	ids, err := u.Index.SellerUploads(ctx, seller, before, size+1)
	if err != nil {
		return Page{}, err
	}
	more := len(ids) > size
	if more {
		ids = ids[:size]
	}
	sts, err := u.Index.Summaries(ctx, ids)
	if err != nil {
		return Page{}, err
	}
	p := Page{Uploads: make([]uploadstatus.Status, 0, len(sts))}
	for _, st := range sts {
		if st.SellerID == seller { // an id collision never shows another seller's upload
			p.Uploads = append(p.Uploads, st)
		}
	}
	if more && len(sts) > 0 {
		p.Next = strconv.FormatInt(sts[len(sts)-1].CreatedAt.UnixMicro(), 10)
	}
	return p, nil
}
