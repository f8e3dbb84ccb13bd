// Package producer turns a seller's spreadsheet into one Kafka message per
// valid row and records the upload in Redis so the seller can follow it. It
// holds the library behind `producer upload` and `producer serve`: the
// upload id, publishing, the HTTP service and its authentication.
package producer

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
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/excel"
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
}

// Uploader runs uploads.
type Uploader struct {
	Parser Parser
	Writer MessageWriter
	Status Statuses
	// PublishTimeout bounds publishing one upload's rows; past it the upload
	// is marked publish_failed and can be sent again.
	PublishTimeout time.Duration
	// StaleAfter: an upload left "publishing" this long (its producer died)
	// may be published again by a new attempt with the same file.
	StaleAfter time.Duration
	Logger     *slog.Logger
	Metrics    *Metrics // optional
	Now        func() time.Time
}

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
	// Resumed: an earlier attempt with this file failed part way and this one
	// published its rows again under the same ids and keys.
	Resumed   bool                `json:"resumed,omitempty"`
	Published int                 `json:"published"` // rows acknowledged by Kafka in this call
	Invalid   int                 `json:"invalid"`   // rows refused by validation, recorded as failed
	Upload    uploadstatus.Upload `json:"upload"`
	Sheet     *excel.Sheet        `json:"-"`
}

// Errors an upload can end with, for callers that branch (the HTTP status).
var (
	// ErrRefused: the file or its rows cannot be accepted (wraps *excel.FileError or *InvalidRowsError).
	ErrRefused = errors.New("upload refused")
	// ErrPublish: Kafka did not acknowledge every row; send the same file again.
	ErrPublish = errors.New("publishing to Kafka failed")
	// ErrInProgress: the same file is being published by another request right now.
	ErrInProgress = errors.New("the same file is being published right now")
)

// InvalidRowsError refuses a strict upload: every problem found.
type InvalidRowsError struct {
	Problems []excel.Problem
}

func (e *InvalidRowsError) Error() string {
	msg := fmt.Sprintf("%d problems in the rows; with --strict nothing is published until every row is valid", len(e.Problems))
	if len(e.Problems) > 0 {
		msg += " (first: " + e.Problems[0].Error() + ")"
	}
	return msg
}

func (u *Uploader) logger() *slog.Logger {
	if u.Logger != nil {
		return u.Logger
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
// earlier attempt failed to publish, in which case it is published again with
// the same upload id and idempotency keys.
func (u *Uploader) Upload(ctx context.Context, req Request) (Result, error) {
	if strings.TrimSpace(req.SellerID) == "" {
		return Result{}, fmt.Errorf("%w: no seller id", ErrRefused)
	}
	sum := sha256.Sum256(req.Data)
	fileHash := hex.EncodeToString(sum[:])
	id := UploadID(req.SellerID, fileHash)
	log := u.logger().With("upload_id", id, "seller_id", req.SellerID)

	sheet, err := u.Parser.Parse(ctx, bytes.NewReader(req.Data))
	if err != nil {
		u.Metrics.upload("refused")
		var fe *excel.FileError
		if errors.As(err, &fe) && fe.Code != "timeout" && fe.Code != "canceled" {
			return Result{UploadID: id}, fmt.Errorf("%w: %w", ErrRefused, err)
		}
		return Result{UploadID: id}, fmt.Errorf("read the spreadsheet: %w", err)
	}
	res := Result{UploadID: id, Sheet: sheet}
	var problems []excel.Problem
	var valid, invalid []excel.Row
	for _, r := range sheet.Rows {
		if r.Valid() {
			valid = append(valid, r)
		} else {
			invalid = append(invalid, r)
			problems = append(problems, r.Problems...)
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
		Total: len(sheet.Rows), Valid: len(valid), Invalid: len(invalid), Header: sheet.Header,
		CreatedAt: u.now().UTC(), State: uploadstatus.Publishing, Cells: map[int][]string{},
	}
	for _, r := range sheet.Rows {
		up.Cells[r.Number] = r.Cells
	}
	prev, err := u.Status.Create(ctx, up)
	if err != nil {
		return res, fmt.Errorf("record the upload: %w", err)
	}
	if prev != nil {
		res.Upload = *prev
		if prev.SellerID != req.SellerID {
			// Ids are derived from the seller, so this is a hash collision: refuse rather than mix sellers.
			return res, fmt.Errorf("%w: upload id %s belongs to another upload", ErrRefused, id)
		}
		ok, state, err := u.Status.BeginPublish(ctx, id, u.StaleAfter)
		if err != nil {
			return res, fmt.Errorf("resume the upload: %w", err)
		}
		if !ok {
			if state == uploadstatus.Publishing {
				return res, fmt.Errorf("%w: upload %s", ErrInProgress, id)
			}
			log.Info("duplicate upload: nothing published", "state", state)
			u.Metrics.upload("duplicate")
			res.Duplicate = true
			return res, nil
		}
		log.Info("publishing again an upload that failed part way", "previous_state", state)
		res.Resumed = true
	} else {
		res.Upload = up
	}

	// Refused rows are failed at once, with the reason the seller reads.
	if len(invalid) > 0 {
		rs := make([]uploadstatus.RowResult, 0, len(invalid))
		for _, r := range invalid {
			rs = append(rs, refusedRow(r, u.now()))
		}
		if err := u.Status.RecordRows(ctx, id, rs); err != nil {
			u.fail(ctx, id, "could not record the invalid rows")
			return res, fmt.Errorf("record the invalid rows: %w", err)
		}
	}
	res.Invalid = len(invalid)

	start := time.Now()
	if err := u.publish(ctx, id, req.SellerID, valid); err != nil {
		u.Metrics.upload("publish_failed")
		u.fail(ctx, id, err.Error())
		log.Error("publishing failed; the same file can be sent again", "rows", len(valid), "err", err)
		res.Upload.State = uploadstatus.PublishFailed
		return res, fmt.Errorf("%w: upload %s: %w; send the same file again to retry", ErrPublish, id, err)
	}
	u.Metrics.publishSeconds(time.Since(start))
	if err := u.Status.SetState(ctx, id, uploadstatus.Published, ""); err != nil {
		// Every row is in Kafka; only the state is stale. A retry would be a
		// harmless replay, so report success with the row counts.
		log.Warn("rows published but the upload state could not be saved", "err", err)
	}
	res.Upload.State = uploadstatus.Published
	res.Published = len(valid)
	u.Metrics.rows(len(valid), len(invalid))
	u.Metrics.upload("published")
	log.Info("upload published", "rows", len(valid), "invalid", len(invalid), "took", time.Since(start))
	return res, nil
}

func (u *Uploader) fail(ctx context.Context, id, reason string) {
	// The request's context may be what ended; the state must still be saved.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := u.Status.SetState(ctx, id, uploadstatus.PublishFailed, reason); err != nil {
		u.logger().Error("could not mark the upload publish_failed; it will be taken over after the stale time", "upload_id", id, "err", err)
	}
}

func (u *Uploader) publish(ctx context.Context, id, seller string, rows []excel.Row) error {
	if len(rows) == 0 {
		return nil
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
			return fmt.Errorf("encode row %d: %w", r.Number, err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(seller), Value: v})
	}
	return u.Writer.WriteMessages(ctx, msgs...)
}

func refusedRow(r excel.Row, at time.Time) uploadstatus.RowResult {
	reasons := make([]string, 0, len(r.Problems))
	for _, p := range r.Problems {
		reasons = append(reasons, p.Error())
	}
	rr := uploadstatus.RowResult{Row: r.Number, State: uploadstatus.Failed, Code: "invalid", Reason: strings.Join(reasons, "; "), At: at}
	if len(r.Problems) > 0 {
		rr.Code = r.Problems[0].Code
		rr.Field = r.Problems[0].Column
	}
	return rr
}

// Problem is an excel.Problem as JSON: what `check --json` prints per line
// and what the HTTP service answers.
type Problem struct {
	Row     int    `json:"row"`
	Column  string `json:"column"`
	Cell    string `json:"cell"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Problems converts excel problems for JSON.
func Problems(ps []excel.Problem) []Problem {
	if len(ps) == 0 {
		return nil
	}
	out := make([]Problem, len(ps))
	for i, p := range ps {
		out[i] = Problem{Row: p.Row, Column: p.Column, Cell: p.Cell, Code: p.Code, Message: p.Message}
	}
	return out
}
