// Package uploadstatus keeps what a seller sees of an upload: its fields,
// its publish state, its counts and every row's result. The producer creates
// the upload and records the rows it refused and the rows the seller had
// registered before (already registered); the consumers record each row they
// registered, found registered already, or gave up on.
//
// Every key of one upload shares the hash tag {<upload_id>}, so each script
// runs on one Redis Cluster slot:
//
//	bulkreg:upload:{<id>}:meta    HASH  the upload's fields, publish state, counts "registered"/"already_registered"/"failed", "lost_at"
//	bulkreg:upload:{<id>}:states  HASH  row → "registered" | "already_registered" | "failed"
//	bulkreg:upload:{<id>}:rows    HASH  row → JSON of its RowResult
//	bulkreg:upload:{<id>}:cells   HASH  "z" → every row's original cells (for the error report), as cellsBlob writes them
//
// Every key expires a retention after the upload's last change; an upload
// that published nothing (Upload.Keep) sooner.
//
// Each seller's uploads together keep at most the seller's Share of Redis,
// counted in a usage record under the seller's own hash tag (share.go).
//
// Redis can lose an upload's record (a restart without persistence, FLUSHALL,
// a failover to a replica that missed it) while its rows are still being
// registered. A row recorded then is kept, and the status says plainly that
// part of it was lost (Status.LostAt) instead of passing for a smaller upload.
// Sending the same file again restores it: same upload id, same
// Idempotency-Keys, so rows registered before are replays, not products.
package uploadstatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/jsonenc"
	"github.com/bulkreg/bulkreg/internal/redisfail"
	"github.com/bulkreg/bulkreg/lua"
)

// Row states. Registered and AlreadyRegistered are final: once recorded, a
// row keeps that state and its details.
const (
	// Registered: this upload's row registered the product (a 201, or the
	// 200 replay of its own earlier call).
	Registered = "registered"
	// AlreadyRegistered: the seller had registered this SKU with the same
	// content before (another upload, or the same SKU in flight at once);
	// nothing was registered again. ProductID names the existing product.
	AlreadyRegistered = "already_registered"
	// Failed: not registered; Reason says why.
	Failed = "failed"
)

// OtherContent is the code of a Failed row whose SKU the seller had
// registered with different content: bulk registration does not change
// existing products, so the row is not registered, but nothing is wrong
// with the file. Such rows are counted in Failed and, apart, in
// Status.OtherContent, so pages and reports can group them on their own.
const OtherContent = "already_registered_other_content"

// RegisteredTwice is the code of a Registered row whose call the API
// answered with another product than the one already registered for its
// SKU: the marketplace holds the SKU twice, and the seller must delete one.
// Such rows are counted in Registered and, apart, in Status.Twice.
const RegisteredTwice = "registered_twice"

// Publish states of an upload.
const (
	// Publishing: the producer is writing the upload's rows to Kafka.
	Publishing = "publishing"
	// Published: Kafka acknowledged every valid row.
	Published = "published"
	// PublishFailed: Kafka failed part way; sending the same file again republishes
	// with the same upload id and idempotency keys.
	PublishFailed = "publish_failed"
)

// ErrNotFound is returned by Get for an upload Redis does not know (never
// created, or expired).
var ErrNotFound = errors.New("upload not found")

// Store reads and writes upload status in Redis.
type Store struct {
	rdb       redis.UniversalClient
	retention time.Duration
	create    *redis.Script
	record    *redis.Script
	state     *redis.Script

	share        Share
	tombstone    time.Duration
	log          *slog.Logger
	shareCharge  *redis.Script
	shareSettle  *redis.Script
	shareLookup  *redis.Script
	shareMeasure *redis.Script
	shareDelete  *redis.Script
}

// maxRecordBatch caps the rows of one record call. The script runs about
// six commands per row, and Redis runs nothing else meanwhile.
const maxRecordBatch = 100

// Option changes how a Store writes.
type Option func(*options)

type options struct {
	share     Share
	tombstone time.Duration
	log       *slog.Logger
}

// KeepTombstones sets how long an upload that was deleted, or that expired
// and left its seller's share, keeps its tombstone (a key of under 150
// bytes, charged to the seller's share while it lives): meanwhile a row of
// it recorded late is dropped and logged, not kept as a new upload that
// nothing is charged for. Without it, the Store's retention: a row later
// than that is later than any consumer's backlog or redrive the retention
// is sized for. 0 or less: the retention.
func KeepTombstones(d time.Duration) Option { return func(o *options) { o.tombstone = d } }

// Logger sets where the Store logs the rows it drops (rows recorded after
// their upload was deleted or expired); without it, slog.Default().
func Logger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// New returns a Store whose keys expire retention after the upload's last change.
func New(rdb redis.UniversalClient, retention time.Duration, opts ...Option) *Store {
	if retention <= 0 {
		retention = 7 * 24 * time.Hour
	}
	s := &Store{
		rdb:       rdb,
		retention: retention,
		create:    redis.NewScript(lua.Script("upload_create.lua")),
		record:    redis.NewScript(lua.Script("upload_record.lua")),
		state:     redis.NewScript(lua.Script("upload_state.lua")),

		shareCharge:  redis.NewScript(lua.Script("upload_share_charge.lua")),
		shareSettle:  redis.NewScript(lua.Script("upload_share_settle.lua")),
		shareLookup:  redis.NewScript(lua.Script("upload_share_lookup.lua")),
		shareMeasure: redis.NewScript(lua.Script("upload_share_measure.lua")),
		shareDelete:  redis.NewScript(lua.Script("upload_delete.lua")),
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s.share = o.share
	s.tombstone = o.tombstone
	if s.tombstone <= 0 {
		s.tombstone = retention
	}
	s.log = o.log
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Upload is what the producer knows of an upload when it creates it.
type Upload struct {
	ID        string    `json:"id"`
	SellerID  string    `json:"seller_id"`
	FileName  string    `json:"file_name"`
	SHA256    string    `json:"sha256"`
	Total     int       `json:"total"`   // data rows in the file
	Valid     int       `json:"valid"`   // rows published
	Invalid   int       `json:"invalid"` // rows refused by validation (recorded as failed)
	Header    []string  `json:"header"`
	CreatedAt time.Time `json:"created_at"`

	// State is the publish state (Publishing, Published, PublishFailed), read
	// back by Get and Create; Create writes Publishing whatever it holds.
	State       string `json:"state"`
	StateReason string `json:"state_reason,omitempty"`

	// Cells are the original cells of every row by row number, kept for the
	// error report. Create writes them; Get does not read them back (Cells does).
	Cells map[int][]string `json:"-"`

	// Keep is how long the upload's keys are kept after its last change,
	// when shorter than the Store's retention (0: the retention): an upload
	// that published nothing is a check's result, with nothing left to
	// follow. Create writes it; the record script keeps to it.
	Keep time.Duration `json:"-"`
	// Results are the rows' results the producer records right after
	// creating the upload (RecordRows: the refused rows, the rows
	// registered before). Create counts their bytes against the seller's
	// share, and for every other row the result a consumer will record.
	Results []RowResult `json:"-"`
}

// RowResult is one row's outcome.
type RowResult struct {
	Row       int    `json:"row"`
	State     string `json:"state"` // Registered, AlreadyRegistered or Failed
	ProductID string `json:"product_id,omitempty"`
	Code      string `json:"code,omitempty"`
	Field     string `json:"field,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Details are the facts of Reason by code and parameters, for the
	// message table (package messages) to say them in the reader's
	// language; Reason stays the English sentence.
	Details  []Detail  `json:"details,omitempty"`
	Attempts int       `json:"attempts,omitempty"`
	At       time.Time `json:"at"`
	Cells    []string  `json:"cells,omitempty"`
}

// Detail is one problem or fact of a row's result: a code of the message
// table, the cell and field it concerns, and its parameters.
type Detail struct {
	Code   string            `json:"code"`
	Cell   string            `json:"cell,omitempty"`
	Field  string            `json:"field,omitempty"`
	Params map[string]string `json:"params,omitempty"`
}

// Status is an upload with its progress.
type Status struct {
	Upload
	Registered        int `json:"registered"`
	AlreadyRegistered int `json:"already_registered"`
	Failed            int `json:"failed"`
	// OtherContent counts the Failed rows whose SKU is registered already
	// with different content (code OtherContent), as read from the rows.
	OtherContent int `json:"other_content"`
	// Twice counts the Registered rows whose SKU the marketplace now holds
	// twice (code RegisteredTwice), as read from the rows.
	Twice   int         `json:"registered_twice"`
	Waiting int         `json:"waiting"` // Total − Registered − AlreadyRegistered − Failed, never below 0
	Rows    []RowResult `json:"rows"`    // every recorded row, by row number
	// LostAt is when a consumer recorded a row of this upload and Redis no
	// longer held the upload's record (Redis clock); zero when nothing was
	// lost. The upload's fields and the results recorded before are gone
	// (until the same file is sent again), so Total and Waiting do not
	// count them.
	LostAt time.Time `json:"lost_at,omitzero"`
}

// PartlyLost reports whether Redis lost part of the upload's status: its
// record is gone and only rows recorded since are known.
func (s Status) PartlyLost() bool { return !s.LostAt.IsZero() && s.Total == 0 }

// Succeeded reports whether every row of the upload is registered, by this
// upload or before it.
// ToFix is how many failed rows need a fix in the file: the rows whose SKU
// is registered already with other content (OtherContent) need none.
func (s Status) ToFix() int { return max(0, s.Failed-s.OtherContent) }

func (s Status) Succeeded() bool { return s.Total > 0 && s.Registered+s.AlreadyRegistered == s.Total }

// Done reports whether every row of the upload is registered, already
// registered or failed.
func (s Status) Done() bool { return s.Total > 0 && s.Waiting == 0 }

func key(id, part string) string { return "bulkreg:upload:{" + id + "}:" + part }

func (s *Store) ms() string { return strconv.FormatInt(s.retention.Milliseconds(), 10) }

// Create records a new upload in the Publishing state. When the upload
// exists already it writes nothing and returns the existing one: a
// duplicate of an earlier upload.
func (s *Store) Create(ctx context.Context, u Upload) (existing *Upload, err error) {
	if u.ID == "" {
		return nil, errors.New("create upload: the upload id is empty")
	}
	header, err := json.Marshal(u.Header)
	if err != nil {
		return nil, fmt.Errorf("create upload %s: %w", u.ID, err)
	}
	keep := s.retention
	meta := []any{
		"id", u.ID, "seller_id", u.SellerID, "file_name", u.FileName, "sha256", u.SHA256,
		"total", u.Total, "valid", u.Valid, "invalid", u.Invalid, "header", string(header),
		"created_at", u.CreatedAt.UTC().Format(time.RFC3339Nano), "state", Publishing,
	}
	if u.Keep > 0 && u.Keep < keep {
		keep = u.Keep
		meta = append(meta, "keep_ms", keep.Milliseconds())
	}
	var cells []any
	if len(u.Cells) > 0 {
		blob, err := cellsBlob(u.Cells)
		if err != nil {
			return nil, fmt.Errorf("create upload %s: %w", u.ID, err)
		}
		cells = []any{cellsField, blob}
	}
	if u.SellerID != "" {
		results := make([][]any, 0, len(u.Results))
		for _, r := range u.Results {
			a, err := s.recordArgs(u.ID, r)
			if err != nil {
				return nil, fmt.Errorf("create upload %s: %w", u.ID, err)
			}
			results = append(results, a)
		}
		// The meta carries what the share needs to measure the upload once
		// its rows are in (lua/upload_share_measure.lua); until then its
		// entry is provisional: each row not yet recorded is charged the
		// largest result a consumer records.
		base, need := uploadBytes(meta, cells, results, max(0, u.Total-len(u.Results)), u.Total)
		meta = append(meta, "charge_base", base, "row_allowance", rowAllowance)
		if _, err := s.charge(ctx, u.SellerID, u.ID, need, keep, "p"); err != nil {
			return nil, fmt.Errorf("create upload %s: %w", u.ID, err)
		}
	}
	args := append([]any{keep.Milliseconds(), len(meta) / 2}, meta...)
	args = append(args, cells...)
	res, err := s.create.Run(ctx, s.rdb, []string{key(u.ID, "meta"), key(u.ID, "cells"), goneKey(u.ID)}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("create upload %s in Redis: %w", u.ID, redisfail.Wrap(err))
	}
	if len(res) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		m[res[i]] = res[i+1]
	}
	prev := parseMeta(m)
	return &prev, nil
}

// BeginPublish takes the right to publish an existing upload again: it
// moves the state to Publishing when it is PublishFailed, or when it is
// Publishing but has not changed for staleAfter (a producer that died part
// way; 0 = never take over). It reports whether the caller may publish and
// the state found.
func (s *Store) BeginPublish(ctx context.Context, id string, staleAfter time.Duration) (ok bool, found string, err error) {
	return s.move(ctx, id, Publishing, "", staleAfter, PublishFailed)
}

// SetState records the outcome of publishing: Published, or PublishFailed
// with a reason the seller can read.
func (s *Store) SetState(ctx context.Context, id, state, reason string) error {
	if state != Published && state != PublishFailed && state != Publishing {
		return fmt.Errorf("set state of upload %s: unknown state %q", id, state)
	}
	_, _, err := s.move(ctx, id, state, reason, 0, Publishing, Published, PublishFailed, "")
	return err
}

func (s *Store) move(ctx context.Context, id, to, reason string, stale time.Duration, from ...string) (bool, string, error) {
	args := []any{to, reason, stale.Milliseconds()}
	for _, f := range from {
		args = append(args, f)
	}
	res, err := s.state.Run(ctx, s.rdb, []string{key(id, "meta")}, args...).Slice()
	if err != nil {
		return false, "", fmt.Errorf("change the state of upload %s in Redis: %w", id, redisfail.Wrap(err))
	}
	if len(res) != 2 {
		return false, "", fmt.Errorf("change the state of upload %s: unexpected reply %v", id, res)
	}
	code, _ := res[0].(int64)
	cur, _ := res[1].(string)
	if code < 0 {
		return false, "", fmt.Errorf("change the state of upload %s: %w", id, ErrNotFound)
	}
	return code == 1, cur, nil
}

// RecordRow records one row's result. It is idempotent per row: the same
// row recorded twice counts once, and the first "registered" or
// "already_registered" is final: it wins over an earlier or later "failed"
// and is never replaced.
//
// It is RecordRows for one row: one script call.
//
// The result is kept to MaxResultJSON bytes of JSON (its details, then its
// cells, are left out past it): the seller's share charges each row not
// yet recorded that much.
//
// A row of an upload that was deleted, or that expired and left its
// seller's share, is dropped while the upload's tombstone lives (logged at
// Warn): it would bring back an upload that nothing is charged for. The
// call then returns nil: there is nothing the caller can do about it.
func (s *Store) RecordRow(ctx context.Context, uploadID string, r RowResult) error {
	return s.RecordRows(ctx, uploadID, []RowResult{r})
}

// writeRecords is one record call for rows of one upload.
func (s *Store) writeRecords(ctx context.Context, uploadID string, rows [][]any) error {
	args := make([]any, 0, 1+3*len(rows))
	args = append(args, s.ms())
	for _, a := range rows {
		args = append(args, a...)
	}
	n, err := s.record.Run(ctx, s.rdb, recordKeys(uploadID), args...).Int()
	if err != nil {
		return fmt.Errorf("the record script did not run: %w", redisfail.Wrap(err))
	}
	if n < 0 {
		first, _ := rows[0][0].(int)
		s.log.Warn("rows of an upload that was deleted or expired were not recorded: their upload is gone on purpose, and recording them would keep it again uncharged",
			"upload_id", uploadID, "rows", len(rows), "first_row", first)
	}
	return nil
}

// boundedArgs are r's arguments args, made again without its details and
// cells when its JSON is longer than MaxResultJSON.
func (s *Store) boundedArgs(uploadID string, r RowResult, args []any) ([]any, error) {
	if js, _ := args[2].(string); len(js) > MaxResultJSON {
		r.Details, r.Cells = nil, nil
		return s.recordArgs(uploadID, r)
	}
	return args, nil
}

// RecordRows records many rows (the producer's refused rows, a consumer's
// batch of one upload's rows): up to maxRecordBatch rows per script call,
// each kept to MaxResultJSON as RecordRow keeps it.
func (s *Store) RecordRows(ctx context.Context, uploadID string, rs []RowResult) error {
	rows := make([][]any, len(rs))
	for i, r := range rs {
		a, err := s.recordArgs(uploadID, r)
		if err == nil {
			a, err = s.boundedArgs(uploadID, r, a)
		}
		if err != nil {
			return err
		}
		rows[i] = a
	}
	for i, chunk := range slices.Collect(slices.Chunk(rows, maxRecordBatch)) {
		if err := s.writeRecords(ctx, uploadID, chunk); err != nil {
			if len(rs) == 1 {
				return fmt.Errorf("record row %d of upload %s: %w", rs[0].Row, uploadID, err)
			}
			first := i * maxRecordBatch
			return fmt.Errorf("record rows %d to %d of upload %s (%d of %d rows recorded before): %w",
				rs[first].Row, rs[first+len(chunk)-1].Row, uploadID, first, len(rs), err)
		}
	}
	return nil
}

func recordKeys(id string) []string {
	return []string{key(id, "meta"), key(id, "states"), key(id, "rows"), key(id, "cells"), goneKey(id)}
}

func (s *Store) recordArgs(uploadID string, r RowResult) ([]any, error) {
	if uploadID == "" {
		return nil, errors.New("record row: the upload id is empty")
	}
	if r.Row < 1 {
		return nil, fmt.Errorf("record row of upload %s: row %d, rows start at 1", uploadID, r.Row)
	}
	if r.State != Registered && r.State != AlreadyRegistered && r.State != Failed {
		return nil, fmt.Errorf("record row %d of upload %s: state %q is not %q, %q or %q", r.Row, uploadID, r.State, Registered, AlreadyRegistered, Failed)
	}
	if r.At.IsZero() {
		r.At = time.Now()
	}
	r.Reason = CutReason(r.Reason)
	// The API's code, field and product id come from its answer: bounded,
	// so a row's result has a largest size the share can charge.
	r.Code = jsonenc.Cut(r.Code, MaxCodeJSON)
	r.Field = jsonenc.Cut(r.Field, MaxFieldJSON)
	r.ProductID = jsonenc.Cut(r.ProductID, MaxProductIDJSON)
	b, ok := r.appendJSON(make([]byte, 0, 160))
	if !ok {
		var err error
		if b, err = json.Marshal(r); err != nil {
			return nil, fmt.Errorf("record row %d of upload %s: %w", r.Row, uploadID, err)
		}
	}
	return []any{r.Row, r.State, string(b)}, nil
}

// appendJSON appends r as json.Marshal writes it (FuzzRowResultJSON holds
// it to that) when it carries no details or cells, as nearly every row
// does: encoding/json's reflection is a visible share of the consumer's
// CPU profile. ok is false for any other row, and for a time encoding/json
// refuses.
func (r RowResult) appendJSON(dst []byte) (_ []byte, ok bool) {
	if len(r.Details) > 0 || len(r.Cells) > 0 {
		return dst, false
	}
	dst = append(dst, `{"row":`...)
	dst = strconv.AppendInt(dst, int64(r.Row), 10)
	dst = append(dst, `,"state":`...)
	dst = jsonenc.AppendString(dst, r.State)
	for _, f := range [...]struct{ name, v string }{{`,"product_id":`, r.ProductID}, {`,"code":`, r.Code}, {`,"field":`, r.Field}, {`,"reason":`, r.Reason}} {
		if f.v != "" {
			dst = append(dst, f.name...)
			dst = jsonenc.AppendString(dst, f.v)
		}
	}
	if r.Attempts != 0 {
		dst = append(dst, `,"attempts":`...)
		dst = strconv.AppendInt(dst, int64(r.Attempts), 10)
	}
	dst = append(dst, `,"at":`...)
	if dst, ok = jsonenc.AppendTime(dst, r.At); !ok {
		return dst, false
	}
	return append(dst, '}'), true
}

// Get returns the upload, its counts and every recorded row. An upload whose
// rows were recorded but that was never created (a consumer fed by hand) is
// returned with its counts and rows only.
func (s *Store) Get(ctx context.Context, uploadID string) (Status, error) {
	pipe := s.rdb.Pipeline()
	metaCmd := pipe.HGetAll(ctx, key(uploadID, "meta"))
	rowsCmd := pipe.HGetAll(ctx, key(uploadID, "rows"))
	if _, err := pipe.Exec(ctx); err != nil {
		return Status{}, fmt.Errorf("read upload %s from Redis: %w", uploadID, redisfail.Wrap(err))
	}
	m := metaCmd.Val()
	if len(m) == 0 {
		return Status{}, fmt.Errorf("upload %s: %w", uploadID, ErrNotFound)
	}
	st := Status{Upload: parseMeta(m)}
	if st.ID == "" {
		st.ID = uploadID
	}
	st.Registered, _ = strconv.Atoi(m[Registered])
	st.AlreadyRegistered, _ = strconv.Atoi(m[AlreadyRegistered])
	st.Failed, _ = strconv.Atoi(m[Failed])
	st.Waiting = max(0, st.Total-st.Registered-st.AlreadyRegistered-st.Failed)
	if ms, err := strconv.ParseInt(m["lost_at"], 10, 64); err == nil && ms > 0 {
		st.LostAt = time.UnixMilli(ms)
	}
	for _, v := range rowsCmd.Val() {
		var r RowResult
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			continue // one unreadable row must not hide the others
		}
		st.Rows = append(st.Rows, r)
		switch {
		case r.State == Failed && r.Code == OtherContent:
			st.OtherContent++
		case r.State == Registered && r.Code == RegisteredTwice:
			st.Twice++
		}
	}
	slices.SortFunc(st.Rows, func(a, b RowResult) int { return a.Row - b.Row })
	return st, nil
}

// Cells returns the original cells of every row created with the upload.
func (s *Store) Cells(ctx context.Context, uploadID string) (map[int][]string, error) {
	m, err := s.rdb.HGetAll(ctx, key(uploadID, "cells")).Result()
	if err != nil {
		return nil, fmt.Errorf("read the cells of upload %s from Redis: %w", uploadID, redisfail.Wrap(err))
	}
	out := make(map[int][]string, len(m))
	if blob, ok := m[cellsField]; ok {
		if err := readCellsBlob(blob, out); err != nil {
			return nil, fmt.Errorf("read the cells of upload %s: %w", uploadID, err)
		}
	}
	// A field named by a row number holds that row's cells alone, as JSON:
	// records kept in that form are read as well.
	for k, v := range m {
		row, err := strconv.Atoi(k)
		if err != nil {
			continue
		}
		var cells []string
		if json.Unmarshal([]byte(v), &cells) == nil {
			out[row] = cells
		}
	}
	return out, nil
}

func parseMeta(m map[string]string) Upload {
	u := Upload{
		ID: m["id"], SellerID: m["seller_id"], FileName: m["file_name"], SHA256: m["sha256"],
		State: m["state"], StateReason: m["state_reason"],
	}
	u.Total, _ = strconv.Atoi(m["total"])
	u.Valid, _ = strconv.Atoi(m["valid"])
	u.Invalid, _ = strconv.Atoi(m["invalid"])
	_ = json.Unmarshal([]byte(m["header"]), &u.Header)
	u.CreatedAt, _ = time.Parse(time.RFC3339Nano, m["created_at"])
	return u
}
