// Package producer turns a seller's spreadsheet into one Kafka message per
// valid row and records the upload in Redis so the seller can follow it. It
// holds the library behind `producer upload` and `producer serve`: the
// upload id, publishing, the HTTP service and its authentication.
package upload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/logctx"
	"github.com/bulkreg/bulkreg/messages"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// UploadID derives an upload's id from the seller and the SHA-256 (hex) of
// the file: the same file from the same seller always gets the same id, so
// sending it again is recognised, and its rows keep their idempotency keys.
func UploadID(sellerID, fileSHA256 string) string {
	sum := sha256.Sum256([]byte(sellerID + "\x00" + fileSHA256))
	return hex.EncodeToString(sum[:8])
}

// Parser reads and validates a spreadsheet (*excel.Parser).
type Parser interface {
	Parse(ctx context.Context, r io.Reader) (*excel.Sheet, error)
}

// bytesParser is a Parser that reads a file already in memory without
// copying it (*excel.Parser): an upload's bytes are in memory already, and a
// copy is 10 MiB more for the largest.
type bytesParser interface {
	ParseBytes(ctx context.Context, data []byte) (*excel.Sheet, error)
}

// parse reads data with u.Parser, without a copy when it can.
func (u *Uploader) parse(ctx context.Context, data []byte) (*excel.Sheet, error) {
	if p, ok := u.Parser.(bytesParser); ok {
		return p.ParseBytes(ctx, data)
	}
	return u.Parser.Parse(ctx, bytes.NewReader(data))
}

// MessageWriter writes messages to the rows topic and returns once the
// broker acknowledged them (*kafka.Writer).
type MessageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// Statuses is the upload status store (*uploadstatus.Store).
type Statuses interface {
	Create(ctx context.Context, u uploadstatus.Upload) (*uploadstatus.Upload, error)
	BeginPublish(ctx context.Context, id string, staleAfter time.Duration) (bool, string, error)
	SetState(ctx context.Context, id, state, reason string) error
	RecordRows(ctx context.Context, uploadID string, rs []uploadstatus.RowResult) error
	Get(ctx context.Context, uploadID string) (uploadstatus.Status, error)
	Cells(ctx context.Context, uploadID string) (map[int][]string, error)
	// MarkPublished records rows Kafka acknowledged (and is the publisher's
	// heartbeat); PublishedRows reads them back for a resumed upload.
	MarkPublished(ctx context.Context, id string, rows []int) (int, error)
	PublishedRows(ctx context.Context, id string) ([]int, error)
}

// Index lists a seller's uploads (*uploadstatus.Store).
type Index interface {
	AddToSeller(ctx context.Context, seller, uploadID string, created time.Time) error
	SellerUploads(ctx context.Context, seller string, before time.Time, n int) ([]string, error)
	Summaries(ctx context.Context, ids []string) ([]uploadstatus.Status, error)
}

// Uploader runs uploads.
type Uploader struct {
	Parser   Parser
	Writer   MessageWriter
	Statuses Statuses
	// Ledger is the seller's record of registered SKUs: a row whose SKU is in
	// it is not published again. nil checks nothing (every valid row is
	// published); the commands always set it.
	Ledger Ledger
	// PublishTimeout bounds publishing one upload's rows; past it the upload
	// is marked publish_failed and can be sent again.
	PublishTimeout time.Duration
	// StaleAfter: an upload left "publishing" this long after Kafka last
	// acknowledged one of its batches (its producer died) may be resumed by
	// a new attempt with the same file. It must exceed the time one batch
	// takes (PublishTimeout bounds it). A published upload is never resumed.
	StaleAfter time.Duration
	// PublishBatch is the most rows handed to Kafka at once; after each
	// batch the rows acknowledged are recorded, so an upload resumed after
	// its producer died publishes only the rows Kafka had not acknowledged.
	// Default DefaultPublishBatch.
	PublishBatch int
	Logger       *slog.Logger
	Metrics      *Metrics // optional
	Now          func() time.Time
	// MaxReportCellBytes bounds the cell text kept in Redis for the upload's
	// report (see reportCells). Default DefaultMaxReportCellBytes.
	MaxReportCellBytes int
	// Index lists each seller's uploads (the history page, GET /v1/uploads,
	// and the rows ahead of an upload in its finish estimate); nil lists
	// nothing. The commands always set it.
	Index Index
	// Slots tells when the seller's next throttle slots come (the finish
	// estimate); nil gives no estimate.
	Slots Slots
	// Marketplace tells a status whether the registration API answers (the
	// consumers' circuit breaker); nil says nothing about it.
	Marketplace Marketplace
	// CheckOnlyRetention is how long an upload that publishes nothing (every
	// row refused, or registered before) is kept: its status is a check's
	// result, complete when it is created, and it leaves the seller's share
	// of Redis this soon. Default DefaultCheckOnlyRetention; it is never
	// longer than the status store's retention.
	CheckOnlyRetention time.Duration
}

// DefaultCheckOnlyRetention is Uploader.CheckOnlyRetention's default
// (--check-only-retention): time to read the problems, download the report
// and send the fixed file, while a seller who sends bad file after bad file
// gets their share back within the hour.
const DefaultCheckOnlyRetention = time.Hour

// DefaultPublishBatch is Uploader.PublishBatch's default: a 500-row upload
// is five produce round trips and five Redis writes (a few ms each), and a
// producer that dies mid-publish leaves at most 100 rows whose
// acknowledgement was not recorded.
const DefaultPublishBatch = 100

// Request is one file to upload.
type Request struct {
	SellerID string
	FileName string
	Data     []byte
	// Strict refuses the whole upload when any row is invalid.
	Strict bool
}

// Result is what an upload did.
type Result struct {
	UploadID string `json:"upload_id"`
	// Duplicate: the same file was uploaded and published before; nothing was
	// published this time. Upload is the earlier upload.
	Duplicate bool `json:"duplicate"`
	// Resumed: an earlier attempt with this file failed part way (publish
	// failed, or its producer died) and this one published the rows Kafka
	// had not acknowledged, under the same ids and keys.
	Resumed   bool `json:"resumed,omitempty"`
	Published int  `json:"published"` // rows acknowledged by Kafka in this call
	Invalid   int  `json:"invalid"`   // rows refused by validation or the ledger, recorded as failed
	// AlreadyRegistered: rows whose SKU the seller registered before with the
	// same content; recorded as such (or as registered, when this upload's
	// own row did it before a failed publish), not published.
	AlreadyRegistered int                 `json:"already_registered"`
	Upload            uploadstatus.Upload `json:"upload"`
	Sheet             *excel.Sheet        `json:"-"`
}

// Errors an upload can end with, for callers that branch (the HTTP status).
var (
	// ErrRefused: the file or its rows cannot be accepted (wraps *excel.FileError or *InvalidRowsError).
	ErrRefused = errors.New("upload refused")
	// ErrPublish: Kafka did not acknowledge every row; send the same file again.
	ErrPublish = errors.New("publishing to Kafka failed")
	// ErrInProgress: the same file is being published by another request right now.
	ErrInProgress = errors.New("the same file is being published right now")
	// ErrShareFull: the seller's uploads keep their whole share of Redis;
	// the error is an *uploadstatus.ShareFullError (ShareFull) that says
	// how much and when older uploads make room.
	ErrShareFull = uploadstatus.ErrShareFull
)

// ShareFull reports whether err refused an upload because its seller's
// share of Redis is full, and the details.
func ShareFull(err error) (*uploadstatus.ShareFullError, bool) {
	var e *uploadstatus.ShareFullError
	ok := errors.As(err, &e)
	return e, ok
}

// InvalidRowsError refuses a strict upload: every problem found.
type InvalidRowsError struct {
	Problems []excel.Problem
}

func (e *InvalidRowsError) Error() string {
	// Said without a flag's name: the same text is the CLI's (--strict) and
	// the HTTP API's problem detail (?strict=true).
	msg := fmt.Sprintf("%d %s in the rows; a strict upload publishes nothing until every row is valid", len(e.Problems), messages.Plural(len(e.Problems), "problem", "problems"))
	if len(e.Problems) > 0 {
		msg += " (first: " + e.Problems[0].Error() + ")"
	}
	return msg
}

// logger returns u.Logger with the attributes ctx carries (the request id
// of the HTTP request being served).
func (u *Uploader) logger(ctx context.Context) *slog.Logger {
	if u.Logger != nil {
		return logctx.Logger(ctx, u.Logger)
	}
	return slog.New(slog.DiscardHandler)
}

func (u *Uploader) now() time.Time {
	if u.Now != nil {
		return u.Now()
	}
	return time.Now()
}

// Upload validates the file, records the upload and publishes its valid
// rows. The same file again is a duplicate (nothing published) unless the
// earlier attempt's publishing did not finish (publish_failed, or publishing
// with no batch acknowledged for StaleAfter), in which case the rows Kafka
// had not acknowledged are published with the same upload id and
// idempotency keys.
func (u *Uploader) Upload(ctx context.Context, req Request) (Result, error) {
	if err := bulkreg.ValidSellerID(req.SellerID); err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	sum := sha256.Sum256(req.Data)
	fileHash := hex.EncodeToString(sum[:])
	id := UploadID(req.SellerID, fileHash)
	log := u.logger(ctx).With("upload_id", id, "seller", req.SellerID)

	sheet, err := u.parse(ctx, req.Data)
	if err != nil {
		u.Metrics.upload("refused")
		var fe *excel.FileError
		if errors.As(err, &fe) && fe.Code != "timeout" && fe.Code != "canceled" {
			return Result{UploadID: id}, fmt.Errorf("%w: %w", ErrRefused, err)
		}
		return Result{UploadID: id}, fmt.Errorf("read the spreadsheet: %w", err)
	}
	res := Result{UploadID: id, Sheet: sheet}
	known, err := u.checkLedger(ctx, id, req.SellerID, sheet)
	if err != nil {
		return res, fmt.Errorf("look up the seller's registered SKUs: %w", err)
	}
	var problems []excel.Problem
	var valid, invalid []excel.Row
	for _, r := range sheet.Rows {
		switch _, ok := known[r.Number]; {
		case !r.Valid():
			invalid = append(invalid, r)
			problems = append(problems, r.Problems...)
		case !ok:
			valid = append(valid, r)
		}
	}
	if req.Strict && len(invalid) > 0 {
		u.Metrics.upload("refused")
		return res, fmt.Errorf("%w: %w", ErrRefused, &InvalidRowsError{Problems: problems})
	}
	if len(sheet.Rows) == 0 {
		u.Metrics.upload("refused")
		return res, fmt.Errorf("%w: the sheet %q has a header but no data rows", ErrRefused, sheet.SheetName)
	}

	up := uploadstatus.Upload{
		ID: id, SellerID: req.SellerID, FileName: req.FileName, SHA256: fileHash,
		Total: len(sheet.Rows), Valid: len(valid), Invalid: len(invalid),
		CreatedAt: u.now().UTC(), State: uploadstatus.Publishing,
	}
	// Only the bounded cells a report needs are kept: a tiny file can expand
	// to hundreds of MB of cell text, which Redis would hold for days.
	up.Header, up.Cells = reportCells(sheet.Header, sheet.Rows, orDefault(u.MaxReportCellBytes, DefaultMaxReportCellBytes))
	// Refused rows are failed at once, with the reason the seller reads;
	// rows registered before are recorded with their product. Create counts
	// them against the seller's share before anything is written.
	rs := make([]uploadstatus.RowResult, 0, len(invalid)+len(known))
	for _, r := range invalid {
		rs = append(rs, refusedRow(r, u.now()))
	}
	for _, rr := range known {
		rs = append(rs, rr)
	}
	up.Results = rs
	if len(valid) == 0 {
		up.Keep = orDefault(u.CheckOnlyRetention, DefaultCheckOnlyRetention)
	}
	prev, err := u.Statuses.Create(ctx, up)
	u.observeShare(ctx, req.SellerID)
	if sf, ok := ShareFull(err); ok {
		u.Metrics.upload("share_full")
		log.Info("upload refused: the seller's share of the upload storage is full",
			"uploads", sf.Uploads, "bytes", sf.Bytes, "need", sf.Need, "retry_after", sf.RetryAfter)
		return res, err
	}
	if err != nil {
		return res, fmt.Errorf("record the upload: %w", err)
	}
	if prev != nil {
		res.Upload = *prev
		if prev.SellerID != req.SellerID {
			// Ids are derived from the seller, so this is a hash collision: refuse rather than mix sellers.
			return res, fmt.Errorf("%w: upload id %s belongs to another upload", ErrRefused, id)
		}
		ok, state, err := u.Statuses.BeginPublish(ctx, id, u.StaleAfter)
		if err != nil {
			return res, fmt.Errorf("resume the upload: %w", err)
		}
		if !ok {
			if state == uploadstatus.Publishing {
				return res, fmt.Errorf("%w: upload %s", ErrInProgress, id)
			}
			log.Info("duplicate upload: nothing published", "state", state)
			u.index(ctx, req.SellerID, id, prev.CreatedAt)
			u.Metrics.upload("duplicate")
			res.Duplicate = true
			return res, nil
		}
		log.Info("publishing again an upload that failed part way", "previous_state", state)
		res.Resumed = true
	} else {
		res.Upload = up
	}
	u.index(ctx, req.SellerID, id, res.Upload.CreatedAt)

	if len(rs) > 0 {
		if err := u.Statuses.RecordRows(ctx, id, rs); err != nil {
			u.fail(ctx, id, "could not record the invalid and already registered rows")
			return res, fmt.Errorf("record the invalid and already registered rows: %w", err)
		}
	}
	res.Invalid = len(invalid)
	res.AlreadyRegistered = len(known)

	if res.Resumed {
		done, err := u.Statuses.PublishedRows(ctx, id)
		if err != nil {
			u.fail(ctx, id, "could not read which rows were queued before; send the same file again")
			return res, fmt.Errorf("read which rows of upload %s were published before: %w", id, err)
		}
		before := len(valid)
		valid = unpublished(valid, done)
		log.Info("resuming an upload: rows Kafka acknowledged before are not published again", "acknowledged_before", before-len(valid), "to_publish", len(valid))
	}

	start := time.Now()
	published, err := u.publish(ctx, id, req.SellerID, valid)
	res.Published = published
	if err != nil {
		u.Metrics.upload("publish_failed")
		// The seller reads the reason; the broker error (addresses) is in the log.
		u.fail(ctx, id, "the rows could not be queued for registration; send the same file again")
		log.Error("publishing failed; the same file can be sent again", "rows", len(valid), "acknowledged", published, "err", err)
		res.Upload.State = uploadstatus.PublishFailed
		return res, fmt.Errorf("%w: upload %s: %w; send the same file again to retry", ErrPublish, id, err)
	}
	u.Metrics.publishSeconds(time.Since(start))
	if err := u.Statuses.SetState(ctx, id, uploadstatus.Published, ""); err != nil {
		// Every row is in Kafka; only the state is stale. A retry would be a
		// harmless replay, so report success with the row counts.
		log.Warn("rows published but the upload state could not be saved", "err", err)
	}
	res.Upload.State = uploadstatus.Published
	u.Metrics.rows(len(valid), len(invalid), len(known))
	u.Metrics.upload("published")
	log.Info("upload published", "rows", len(valid), "invalid", len(invalid), "already_registered", len(known), "took", time.Since(start))
	return res, nil
}

// observeShare observes the seller's usage from what the Statuses store
// says now (only with Metrics, and a store that tells usage and share).
func (u *Uploader) observeShare(ctx context.Context, seller string) {
	us, ok := u.Statuses.(interface {
		Usage(ctx context.Context, seller string) (uploadstatus.Usage, error)
		Share() uploadstatus.Share
	})
	if u.Metrics == nil || !ok {
		return
	}
	if got, err := us.Usage(ctx, seller); err == nil {
		u.Metrics.share(got, us.Share())
	}
}

// index lists the upload under its seller. A failure costs only the
// listing (the upload itself is recorded), so it is logged, not returned;
// sending the same file again lists it then.
func (u *Uploader) index(ctx context.Context, seller, id string, created time.Time) {
	if u.Index == nil {
		return
	}
	if err := u.Index.AddToSeller(ctx, seller, id, created); err != nil {
		u.logger(ctx).Warn("could not list the upload under its seller; it is missing from the seller's history", "upload_id", id, "seller", seller, "err", err)
	}
}

func (u *Uploader) fail(ctx context.Context, id, reason string) {
	// The request's context may be what ended; the state must still be saved.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := u.Statuses.SetState(ctx, id, uploadstatus.PublishFailed, reason); err != nil {
		u.logger(ctx).Error("could not mark the upload publish_failed; it will be taken over after the stale time", "upload_id", id, "err", err)
	}
}

// publish hands rows to Kafka PublishBatch at a time and records, after
// each batch, the rows Kafka acknowledged. It returns how many rows were
// acknowledged. A row is recorded only after its acknowledgement, so a
// resumed upload may publish again a row whose acknowledgement was lost with
// its producer (at least once; its Idempotency-Key makes that a replay),
// never skip one.
func (u *Uploader) publish(ctx context.Context, id, seller string, rows []excel.Row) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	if u.PublishTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, u.PublishTimeout)
		defer cancel()
	}
	at := u.now()
	msgs := make([]kafka.Message, 0, len(rows))
	for _, r := range rows {
		v, err := json.Marshal(bulkreg.NewMessage(id, seller, r.Number, r.Product, at))
		if err != nil {
			return 0, fmt.Errorf("encode row %d: %w", r.Number, err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(seller), Value: v})
	}
	batch := orDefault(u.PublishBatch, DefaultPublishBatch)
	published := 0
	for lo := 0; lo < len(rows); lo += batch {
		hi := min(lo+batch, len(rows))
		werr := u.Writer.WriteMessages(ctx, msgs[lo:hi]...)
		acked := make([]int, 0, hi-lo)
		var perRow kafka.WriteErrors
		if werr == nil || errors.As(werr, &perRow) {
			for i, r := range rows[lo:hi] {
				if werr == nil || perRow[i] == nil {
					acked = append(acked, r.Number)
				}
			}
		}
		published += len(acked)
		if len(acked) > 0 {
			if _, err := u.Statuses.MarkPublished(ctx, id, acked); err != nil {
				// Without the record a resume would publish these rows again:
				// stop here rather than go on blind.
				return published, fmt.Errorf("record the rows Kafka acknowledged: %w", err)
			}
		}
		if werr != nil {
			return published, werr
		}
	}
	return published, nil
}

// unpublished returns the rows not in done (row numbers, increasing).
func unpublished(rows []excel.Row, done []int) []excel.Row {
	if len(done) == 0 {
		return rows
	}
	out := make([]excel.Row, 0, len(rows))
	for _, r := range rows {
		if _, found := slices.BinarySearch(done, r.Number); !found {
			out = append(out, r)
		}
	}
	return out
}

func refusedRow(r excel.Row, at time.Time) uploadstatus.RowResult {
	reasons := make([]string, 0, len(r.Problems))
	for _, p := range r.Problems {
		reasons = append(reasons, p.Error())
	}
	// The row's problems are bounded in number and length (package excel),
	// and the reason is cut to what Redis keeps of it.
	rr := uploadstatus.RowResult{Row: r.Number, State: uploadstatus.Failed, Code: "invalid", Reason: uploadstatus.CutReason(strings.Join(reasons, "; ")), At: at,
		Details: details(r.Problems)}
	if len(r.Problems) > 0 {
		rr.Code = r.Problems[0].Code
		rr.Field = r.Problems[0].Column
	}
	return rr
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}
