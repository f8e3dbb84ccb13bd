package uploadstatus

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/redisfail"
)

// Share bounds what one seller's uploads keep in Redis: the bytes of their
// keys and how many uploads are kept. Create refuses an upload past either
// bound with a *ShareFullError, before it writes anything, so a seller who
// sends file after file fills only their own share, and Redis keeps room
// for everyone else's uploads, the throttle and the ledger.
//
// A share is a bound, not a reservation: the operator sizes Redis for the
// sellers that use theirs at once (docs/redis-sizing.md).
type Share struct {
	// Bytes is the most bytes the seller's uploads may keep, as Create
	// counts them (UploadBytes); 0: no bound.
	Bytes int64
	// Uploads is the most uploads the seller may keep; 0: no bound.
	Uploads int
}

// Default share of one seller (the producer's --seller-share-bytes and
// --seller-share-uploads).
//
// A seller's normal week: a few dozen files of up to 500 rows a day, each
// kept 7 days (--status-retention). An upload of 500 registered rows with
// short texts is charged about 130 KB once its rows are in (1.1 MB while
// they are registered: each row the largest result a consumer records, so
// 256 MiB holds over 200 such uploads in flight); the report cells of longer texts
// add up to 4 MiB before compression (docs/redis-sizing.md has the
// measurements). 1,000 uploads is 140 a day for a week, and 256 MiB holds
// a thousand uploads of 256 KB, or 40 a day for a week of 900 KB each. A
// file of 500 bad rows is charged at most about 2.4 MB, so one seller
// sending such files is refused after about a hundred of them, and they
// leave after --check-only-retention (1 h), not 7 days, since nothing of
// them was published.
const (
	DefaultShareBytes   = 256 << 20
	DefaultShareUploads = 1000
)

// WithShare bounds each seller's share of Redis (see Share). Without it
// Create records each seller's usage and refuses nothing.
func WithShare(sh Share) Option { return func(o *options) { o.share = sh } }

// Share is the share each seller's uploads are bounded to (WithShare).
func (s *Store) Share() Share { return s.share }

// ErrShareFull is what a *ShareFullError wraps: the seller's uploads keep
// as much of Redis as their share allows.
var ErrShareFull = errors.New("the seller's share of the upload storage is full")

// ShareFullError refuses an upload that would take its seller past their
// share.
type ShareFullError struct {
	Seller string
	Share  Share
	// Uploads and Bytes are what the seller's other uploads keep now; Need
	// is what this upload would keep.
	Uploads int
	Bytes   int64
	Need    int64
	// RetryAfter is how long until enough of the seller's uploads expire for
	// this one to fit, as far as Redis knows now (a consumer still recording
	// rows of an upload moves its expiry later); 0 when it never fits
	// (the upload alone is larger than the share).
	RetryAfter time.Duration
}

func (e *ShareFullError) Error() string {
	what := "wait until older uploads expire"
	if e.RetryAfter > 0 {
		what = fmt.Sprintf("wait until older uploads expire (enough of them in %s)", e.RetryAfter.Round(time.Second))
	} else {
		what = "this file alone is larger than the share; split it"
	}
	return fmt.Sprintf("seller %q keeps %d uploads of %s in the upload storage; the share is %s; this upload needs %s more: %s, or ask the operator to delete old uploads or raise the share",
		e.Seller, e.Uploads, byteSize(e.Bytes), e.Share, byteSize(e.Need), what)
}

// Unwrap makes errors.Is(err, ErrShareFull) hold.
func (e *ShareFullError) Unwrap() error { return ErrShareFull }

func (sh Share) String() string {
	switch {
	case sh.Bytes > 0 && sh.Uploads > 0:
		return fmt.Sprintf("%d uploads or %s", sh.Uploads, byteSize(sh.Bytes))
	case sh.Bytes > 0:
		return byteSize(sh.Bytes)
	case sh.Uploads > 0:
		return fmt.Sprintf("%d uploads", sh.Uploads)
	}
	return "unbounded"
}

// byteSize says n bytes in the unit a person reads best.
func byteSize(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// Usage is what a seller's uploads keep in Redis.
type Usage struct {
	Uploads int
	Bytes   int64
}

// usageKey is a seller's usage record: a HASH, upload id → "<bytes>
// <expires ms>[ <flag>]" (lua/upload_share_charge.lua says the flags). It
// carries the seller's hash tag, like the seller's list of uploads.
func usageKey(seller string) string { return "bulkreg:{s:" + seller + "}:usage" }

// goneKey is an upload's tombstone: it was deleted, or it expired and its
// seller's share let it go. While it lives, a row recorded late does not
// bring the upload back (lua/upload_record.lua): such an upload would keep
// its rows a whole retention with nothing charged for them. Redis losing an
// upload's record (a restart without persistence, a failover) leaves no
// tombstone, so a row recorded then is kept as before (Status.LostAt); and
// its share entry, in the seller's slot, still charges it until it is due.
func goneKey(id string) string { return key(id, "gone") }

// tombstoneBytes is what Redis keeps of an upload's tombstone (a string key
// with an expiry), as MEMORY USAGE counts it: the share charges it while it
// lives, as an entry of flag "g" that counts no upload.
func tombstoneBytes(id string) int64 { return keyCost + allocSize(int64(len(goneKey(id))+4)) }

// entry is one upload's entry of a usage record, as read.
type entry struct{ id, value string }

// charge counts an upload of bytes, kept keep, against the seller's share,
// or refuses it with a *ShareFullError. The usage record lives in the
// seller's hash slot and the upload's keys in the upload's, and a script
// may touch one slot only: so the record keeps each upload's expiry as it
// was when charged. Before a refusal is final, the entries whose expiry has
// passed are looked up in their upload's slot (gone: a tombstone takes their
// place; still there, since a consumer recorded a row late: their expiry is
// corrected), and the provisional ones are measured there (each row not yet
// recorded was charged the largest result a row can take). The record never
// counts less than what is kept.
func (s *Store) charge(ctx context.Context, seller, id string, bytes int64, keep time.Duration, flag string) (Usage, error) {
	for settled := false; ; settled = true {
		res, err := s.shareCharge.Run(ctx, s.rdb, []string{usageKey(seller)}, id, bytes, keep.Milliseconds(), s.share.Bytes, s.share.Uploads, s.retention.Milliseconds(), flag).Slice()
		if err != nil {
			return Usage{}, fmt.Errorf("charge upload %s to seller %q's share in Redis: %w", id, seller, redisfail.Wrap(err))
		}
		if len(res) < 5 {
			return Usage{}, fmt.Errorf("charge upload %s to seller %q's share: unexpected reply %v", id, seller, res)
		}
		ok, _ := res[0].(int64)
		n, _ := res[1].(int64)
		used, _ := res[2].(int64)
		wait, _ := res[3].(int64)
		nd, _ := res[4].(int64)
		u := Usage{Uploads: int(n), Bytes: used}
		var due, prov []entry
		for i := 5; i+1 < len(res); i += 2 {
			e := entry{fmt.Sprint(res[i]), fmt.Sprint(res[i+1])}
			if int64(len(due)) < nd {
				due = append(due, e)
			} else {
				prov = append(prov, e)
			}
		}
		if ok == 1 {
			if len(due) > 0 {
				// Charged; the entries past their expiry are settled now so
				// the record does not grow with uploads long gone. Its
				// failure costs nothing but a later settle.
				_ = s.settleDue(ctx, seller, due)
			}
			return u, nil
		}
		if (len(due) > 0 || len(prov) > 0) && !settled {
			if err := s.settleDue(ctx, seller, due); err != nil {
				return u, err
			}
			if err := s.measure(ctx, seller, prov); err != nil {
				return u, err
			}
			continue
		}
		e := &ShareFullError{Seller: seller, Share: s.share, Uploads: u.Uploads, Bytes: u.Bytes, Need: bytes}
		if wait >= 0 {
			e.RetryAfter = max(time.Duration(wait)*time.Millisecond, time.Second)
		}
		return u, e
	}
}

// settleDue looks the uploads of due entries up in their own hash slots and
// corrects the seller's usage record: an upload gone leaves a tombstone,
// charged in its place; one still there gets its present expiry; a
// tombstone gone is removed. Each entry changes only if it still holds the
// value read (a fresh charge of the same upload in between is kept).
func (s *Store) settleDue(ctx context.Context, seller string, due []entry) error {
	if len(due) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(due))
	for i, d := range due {
		make := "1"
		if _, _, flag := parseEntry(d.value); flag == "g" {
			make = "0"
		}
		cmds[i] = s.shareLookup.Eval(ctx, pipe, []string{MetaKey(d.id), goneKey(d.id)}, s.tombstone.Milliseconds(), make)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("look up the expired uploads of seller %q in Redis: %w", seller, redisfail.Wrap(err))
	}
	args := make([]any, 0, 1+5*len(due))
	args = append(args, s.retention.Milliseconds())
	for i, d := range due {
		r, err := cmds[i].Slice()
		if err != nil || len(r) != 2 {
			continue // settled at the next charge
		}
		kind, _ := r[0].(string)
		ttl, _ := r[1].(int64)
		switch {
		case kind == "u" && ttl == -1: // no expiry: every upload key gets one, so count it a retention on
			args = append(args, d.id, d.value, s.retention.Milliseconds(), "", "")
		case kind == "u":
			args = append(args, d.id, d.value, ttl, "", "")
		case kind == "g" && ttl >= 0:
			args = append(args, d.id, d.value, ttl, tombstoneBytes(d.id), "g")
		case kind == "g": // a tombstone without expiry is not bulkreg's: count it a tombstone's life on
			args = append(args, d.id, d.value, s.tombstone.Milliseconds(), tombstoneBytes(d.id), "g")
		default:
			args = append(args, d.id, d.value, -2, "", "")
		}
	}
	return s.settle(ctx, seller, args)
}

// measure asks the uploads of provisional entries, in their own hash slots,
// the most they keep from now on (lua/upload_share_measure.lua), and
// charges that instead. An entry whose rows are all recorded is charged its
// bound for good; one not yet told (still publishing) stays as it is.
func (s *Store) measure(ctx context.Context, seller string, prov []entry) error {
	if len(prov) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(prov))
	for i, p := range prov {
		cmds[i] = s.shareMeasure.Eval(ctx, pipe, []string{MetaKey(p.id)})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("measure the uploads of seller %q in Redis: %w", seller, redisfail.Wrap(err))
	}
	args := []any{s.retention.Milliseconds()}
	for i, p := range prov {
		r, err := cmds[i].Int64Slice()
		if err != nil || len(r) != 3 || r[0] == -2 || r[1] < 0 {
			continue // gone (settled once due) or not told yet
		}
		ttl := r[0]
		if ttl == -1 {
			ttl = s.retention.Milliseconds()
		}
		flag := "p"
		if r[2] == 1 {
			flag = "-"
		}
		args = append(args, p.id, p.value, ttl, r[1], flag)
	}
	if len(args) == 1 {
		return nil
	}
	return s.settle(ctx, seller, args)
}

func (s *Store) settle(ctx context.Context, seller string, args []any) error {
	if len(args) <= 1 {
		return nil
	}
	if err := s.shareSettle.Run(ctx, s.rdb, []string{usageKey(seller)}, args...).Err(); err != nil {
		return fmt.Errorf("correct seller %q's share in Redis: %w", seller, redisfail.Wrap(err))
	}
	return nil
}

// parseEntry reads an entry of a usage record: "<bytes> <expires>[ <flag>]".
func parseEntry(v string) (bytes, expires int64, flag string) {
	f := strings.Fields(v)
	if len(f) < 2 {
		return -1, -1, ""
	}
	b, err1 := strconv.ParseInt(f[0], 10, 64)
	e, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return -1, -1, ""
	}
	if len(f) > 2 {
		flag = f[2]
	}
	return b, e, flag
}

// Usage tells what the seller's uploads keep in Redis, as their usage
// record counts it (entries whose expiry has passed are not counted). The
// provisional entries are measured first, so an upload whose rows are in is
// counted what they keep, not the most they could have kept. Tombstones
// count their bytes and no upload.
func (s *Store) Usage(ctx context.Context, seller string) (Usage, error) {
	m, err := s.rdb.HGetAll(ctx, usageKey(seller)).Result()
	if err != nil {
		return Usage{}, fmt.Errorf("read seller %q's share from Redis: %w", seller, redisfail.Wrap(err))
	}
	now := time.Now().UnixMilli()
	var prov []entry
	for id, v := range m {
		if _, e, flag := parseEntry(v); flag == "p" && e > now {
			prov = append(prov, entry{id, v})
		}
	}
	if len(prov) > 0 {
		if err := s.measure(ctx, seller, prov); err != nil {
			return Usage{}, err
		}
		if m, err = s.rdb.HGetAll(ctx, usageKey(seller)).Result(); err != nil {
			return Usage{}, fmt.Errorf("read seller %q's share from Redis: %w", seller, redisfail.Wrap(err))
		}
	}
	var u Usage
	for _, v := range m {
		b, e, flag := parseEntry(v)
		if b < 0 || e <= now {
			continue
		}
		if flag != "g" {
			u.Uploads++
		}
		u.Bytes += b
	}
	return u, nil
}

// Delete removes an upload of the seller: its keys, its place in the
// seller's list and its part of the share, and leaves its tombstone (so a
// row of it still on its way is not recorded; the share charges the
// tombstone while it lives). An upload of another seller, or none, is
// ErrNotFound.
//
// The share entry is read before the keys go and replaced after, only if
// it still holds what was read: a re-upload of the same file in between
// keeps its fresh charge, and meanwhile the share counts too much, never
// too little.
func (s *Store) Delete(ctx context.Context, seller, id string) error {
	seen, err := s.rdb.HGet(ctx, usageKey(seller), id).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("delete upload %s: read seller %q's share: %w", id, seller, redisfail.Wrap(err))
	}
	n, err := s.shareDelete.Run(ctx, s.rdb, []string{key(id, "meta"), key(id, "states"), key(id, "rows"), key(id, "cells"), key(id, "published"), goneKey(id)},
		seller, s.tombstone.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("delete upload %s from Redis: %w", id, redisfail.Wrap(err))
	}
	if n == 0 {
		return fmt.Errorf("delete upload %s of seller %q: %w", id, seller, ErrNotFound)
	}
	args := []any{s.retention.Milliseconds(), id, seen, -2, "", ""}
	if s.tombstone > 0 {
		args = []any{s.retention.Milliseconds(), id, seen, s.tombstone.Milliseconds(), tombstoneBytes(id), "g"}
	}
	if err := s.settle(ctx, seller, args); err != nil {
		return err
	}
	if err := s.rdb.ZRem(ctx, sellerKey(seller), id).Err(); err != nil {
		return fmt.Errorf("delete upload %s from seller %q's list: %w", id, seller, redisfail.Wrap(err))
	}
	return nil
}

// uploadBytes is what Create counts against the seller's share for an
// upload: base, the bytes of its fields (metaArgs), its cells as stored
// (cellsArgs), its published rows' bitmap for total rows and the fields the
// upload gains later (counts, states); and need, base with the rows'
// results: those of results (the rows the producer records at once) as they
// are, and for each of the open rows not among them the largest result a
// consumer records (rowAllowance). Each entry counts Redis's own cost of
// keeping it (entryCost), each value its allocation (allocSize).
func uploadBytes(metaArgs []any, cellsArgs []any, results [][]any, open, total int) (base, need int64) {
	n := int64(5*keyCost) + metaLater
	for _, a := range metaArgs {
		n += argLen(a)
	}
	n += int64(len(metaArgs)/2) * entryCost
	for _, a := range cellsArgs {
		n += argLen(a)
	}
	n += int64(len(cellsArgs)/2) * entryCost
	n += allocSize(int64(total/8 + 1 + 4)) // the published rows: a bit each, by row number (rows start after the header)
	base = n
	for _, r := range results {
		if len(r) == 3 {
			n += rowCost(len(fmt.Sprint(r[2])))
		}
	}
	n += int64(open) * rowAllowance
	return base, n
}

// rowCost is what Redis keeps of a row's result of n bytes of JSON: the
// result (a string with its 4-byte header), two hash entries, the row's
// number twice and its state. lua/upload_record.lua counts the same (its
// "rows_bytes").
func rowCost(n int) int64 { return allocSize(int64(n+4)) + 2*entryCost + 32 }

func argLen(a any) int64 {
	switch v := a.(type) {
	case string:
		return allocSize(int64(len(v)))
	case int:
		return int64(len(strconv.Itoa(v)))
	}
	return int64(len(fmt.Sprint(a)))
}

// allocSize is what Redis's allocator (jemalloc) takes for a value of n
// bytes: above 64 bytes its size classes are a quarter of a power of two
// apart, so a value costs up to a quarter more than its length (a reason of
// 1,030 bytes takes 1,280). lua/upload_record.lua rounds the same.
func allocSize(n int64) int64 {
	if n <= 64 {
		return (n + 15) / 16 * 16
	}
	step := int64(1) << (bits.Len64(uint64(n-1)) - 3) // a quarter of the power of two below n
	return (n + step - 1) / step * step
}

// Redis's cost of keeping things, as MEMORY USAGE counts it
// (TestShareChargesWhatRedisKeeps holds the sum to it): a key with its
// expiry, an entry of a hash past its listpack size, and the fields an
// upload's meta gains after Create (the counts, state_at, a state reason,
// lost_at, rows_bytes).
const (
	keyCost   = 96
	entryCost = 48
	metaLater = 10*(entryCost+32) + 256
)

// MaxResultJSON bounds the JSON of a row's result a consumer records
// (RecordRow): with Code, Field and ProductID cut (MaxCodeJSON, ...) and
// the reason cut to MaxReasonJSON, a result without details is at most
// about 1,500 bytes; details past the rest of the bound are left out (the
// reason says the same in English). Create charges each row not yet
// recorded a result of this size (rowAllowance), since a failed row's can
// be this large; once the rows are in, the share counts what they keep.
const MaxResultJSON = 2000

// Bounds of a row result's texts as Redis keeps them, in bytes of JSON (a
// text longer is cut at a character and marked with "…"): the API's code
// and field name its error in a word; a product id is an id.
const (
	MaxCodeJSON      = 64
	MaxFieldJSON     = 64
	MaxProductIDJSON = 128
)

// rowAllowance is what Create charges for a row not yet recorded: the
// largest result a consumer records, rowCost(MaxResultJSON) (a test holds
// it to that).
const rowAllowance = 2176
