package uploadstatus

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
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
// short texts is charged about 140 KB; the report cells of longer texts
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
// <expires ms>". It carries the seller's hash tag, like the seller's list of
// uploads.
func usageKey(seller string) string { return "bulkreg:{s:" + seller + "}:usage" }

// charge counts an upload of bytes, kept keep, against the seller's share,
// or refuses it with a *ShareFullError. The usage record lives in the
// seller's hash slot and the upload's keys in the upload's, and a script
// may touch one slot only: so the record keeps each upload's expiry as it
// was when charged. An entry whose expiry has passed is looked up in its
// upload's slot before a refusal is final: gone, it is removed; still there
// (a consumer recorded a row late, which moves the expiry), its expiry is
// corrected. The record never counts less than what is kept.
func (s *Store) charge(ctx context.Context, seller, id string, bytes int64, keep time.Duration) (Usage, error) {
	for settled := false; ; settled = true {
		res, err := s.shareCharge.Run(ctx, s.rdb, []string{usageKey(seller)}, id, bytes, keep.Milliseconds(), s.share.Bytes, s.share.Uploads, s.retention.Milliseconds()).Slice()
		if err != nil {
			return Usage{}, fmt.Errorf("charge upload %s to seller %q's share in Redis: %w", id, seller, redisfail.Wrap(err))
		}
		if len(res) < 3 {
			return Usage{}, fmt.Errorf("charge upload %s to seller %q's share: unexpected reply %v", id, seller, res)
		}
		ok, _ := res[0].(int64)
		n, _ := res[1].(int64)
		used, _ := res[2].(int64)
		u := Usage{Uploads: int(n), Bytes: used}
		var due []string
		for _, v := range res[min(4, len(res)):] {
			if d, ok := v.(string); ok {
				due = append(due, d)
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
		if len(due) > 0 && !settled {
			if err := s.settleDue(ctx, seller, due); err != nil {
				return u, err
			}
			continue
		}
		var wait int64 = -1
		if len(res) > 3 {
			wait, _ = res[3].(int64)
		}
		e := &ShareFullError{Seller: seller, Share: s.share, Uploads: u.Uploads, Bytes: u.Bytes, Need: bytes}
		if wait >= 0 {
			e.RetryAfter = max(time.Duration(wait)*time.Millisecond, time.Second)
		}
		return u, e
	}
}

// settleDue looks the uploads of ids up in their own hash slots and corrects
// the seller's usage record: an upload gone is removed, one still there
// gets its present expiry.
func (s *Store) settleDue(ctx context.Context, seller string, ids []string) error {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.DurationCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.PTTL(ctx, MetaKey(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("look up the expired uploads of seller %q in Redis: %w", seller, redisfail.Wrap(err))
	}
	args := make([]any, 0, 1+2*len(ids))
	args = append(args, s.retention.Milliseconds())
	for i, id := range ids {
		ttl := cmds[i].Val()
		switch {
		case ttl == -2: // go-redis answers -2 itself for a key that does not exist
			args = append(args, id, -2)
		case ttl < 0: // no expiry: every upload key gets one, so count it a retention on
			args = append(args, id, s.retention.Milliseconds())
		default:
			args = append(args, id, ttl.Milliseconds())
		}
	}
	return s.settle(ctx, seller, args)
}

func (s *Store) settle(ctx context.Context, seller string, args []any) error {
	if err := s.shareSettle.Run(ctx, s.rdb, []string{usageKey(seller)}, args...).Err(); err != nil {
		return fmt.Errorf("correct seller %q's share in Redis: %w", seller, redisfail.Wrap(err))
	}
	return nil
}

// Usage reads what the seller's uploads keep in Redis, as their usage
// record counts it (entries whose expiry has passed are not counted).
func (s *Store) Usage(ctx context.Context, seller string) (Usage, error) {
	m, err := s.rdb.HGetAll(ctx, usageKey(seller)).Result()
	if err != nil {
		return Usage{}, fmt.Errorf("read seller %q's share from Redis: %w", seller, redisfail.Wrap(err))
	}
	now := time.Now().UnixMilli()
	var u Usage
	for _, v := range m {
		var b, e int64
		if _, err := fmt.Sscanf(v, "%d %d", &b, &e); err != nil || e <= now {
			continue
		}
		u.Uploads++
		u.Bytes += b
	}
	return u, nil
}

// Delete removes an upload of the seller: its keys, its place in the
// seller's list and its part of the seller's share. An upload of another
// seller, or none, is ErrNotFound.
func (s *Store) Delete(ctx context.Context, seller, id string) error {
	owner, err := s.rdb.HGet(ctx, MetaKey(id), "seller_id").Result()
	switch {
	case errors.Is(err, redis.Nil) || err == nil && owner != seller:
		return fmt.Errorf("delete upload %s: %w", id, ErrNotFound)
	case err != nil:
		return fmt.Errorf("delete upload %s: %w", id, redisfail.Wrap(err))
	}
	if err := s.rdb.Del(ctx, key(id, "meta"), key(id, "states"), key(id, "rows"), key(id, "cells"), key(id, "published")).Err(); err != nil {
		return fmt.Errorf("delete upload %s from Redis: %w", id, redisfail.Wrap(err))
	}
	if err := s.settle(ctx, seller, []any{s.retention.Milliseconds(), id, -2}); err != nil {
		return err
	}
	if err := s.rdb.ZRem(ctx, sellerKey(seller), id).Err(); err != nil {
		return fmt.Errorf("delete upload %s from seller %q's list: %w", id, seller, redisfail.Wrap(err))
	}
	return nil
}

// UploadBytes is what Create counts against the seller's share for u: the
// bytes of its fields, its cells as stored, the results of u.Results, and
// for each other row a result a consumer records (rowAllowance), each entry
// with Redis's own cost of keeping it (entryCost).
func uploadBytes(metaArgs []any, cellsArgs []any, results [][]any, otherRows int) int64 {
	n := int64(4 * keyCost)
	for _, a := range metaArgs {
		n += argLen(a)
	}
	n += int64(len(metaArgs)/2) * entryCost
	for _, a := range cellsArgs {
		n += argLen(a)
	}
	n += int64(len(cellsArgs)/2) * entryCost
	for _, r := range results {
		for _, a := range r {
			n += argLen(a)
		}
		n += 2 * entryCost // the row's state and its result
	}
	n += int64(otherRows) * rowAllowance
	return n
}

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
// bytes: above 4 KiB its size classes are a quarter of a power of two
// apart, so a large value (the cells' blob) costs up to a quarter more than
// its length. Smaller values are covered by entryCost.
func allocSize(n int64) int64 {
	if n <= 4<<10 {
		return n
	}
	step := int64(1) << (bits.Len64(uint64(n-1)) - 3) // a quarter of the power of two below n
	return (n + step - 1) / step * step
}

// Redis's cost of keeping things, as MEMORY USAGE counts it
// (TestUploadBytesCoverWhatRedisKeeps holds the sum to it): a key with its
// expiry, an entry of a hash past its listpack size, and a row's result
// recorded by a consumer (a state, a result of about 110 bytes of JSON:
// registered, with its product id, attempts and time).
const (
	keyCost      = 96
	entryCost    = 48
	rowAllowance = 256
)
