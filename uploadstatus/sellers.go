package uploadstatus

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// sellerKey lists a seller's uploads: a ZSET, member = upload id, score = its
// creation time in µs. It carries the seller's hash tag, like the throttle's
// keys, and expires a retention after the seller's last upload.
func sellerKey(seller string) string { return "bulkreg:{s:" + seller + "}:uploads" }

// AddToSeller lists an upload under its seller. Adding it again changes
// nothing; entries older than the retention (their uploads have expired) are
// dropped on the way.
func (s *Store) AddToSeller(ctx context.Context, seller, uploadID string, created time.Time) error {
	k := sellerKey(seller)
	now := time.Now()
	pipe := s.rdb.TxPipeline()
	pipe.ZAddNX(ctx, k, redis.Z{Score: float64(created.UnixMicro()), Member: uploadID})
	pipe.ZRemRangeByScore(ctx, k, "-inf", "("+strconv.FormatInt(now.Add(-s.retention).UnixMicro(), 10))
	pipe.PExpire(ctx, k, s.retention)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("list upload %s under seller %q in Redis: %w", uploadID, seller, err)
	}
	return nil
}

// SellerUploads returns up to n of the seller's upload ids created before
// `before` (zero: any time), newest first.
func (s *Store) SellerUploads(ctx context.Context, seller string, before time.Time, n int) ([]string, error) {
	max := "+inf"
	if !before.IsZero() {
		max = "(" + strconv.FormatInt(before.UnixMicro(), 10)
	}
	ids, err := s.rdb.ZRevRangeByScore(ctx, sellerKey(seller), &redis.ZRangeBy{Max: max, Min: "-inf", Count: int64(n)}).Result()
	if err != nil {
		return nil, fmt.Errorf("list the uploads of seller %q from Redis: %w", seller, err)
	}
	return ids, nil
}

// Summaries reads the fields and counts of many uploads in one round trip,
// without their rows, in the order given. Uploads that no longer exist
// (expired) are left out.
func (s *Store) Summaries(ctx context.Context, ids []string) ([]Status, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, key(id, "meta"))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read %d uploads from Redis: %w", len(ids), err)
	}
	out := make([]Status, 0, len(ids))
	for i, c := range cmds {
		m := c.Val()
		if len(m) == 0 {
			continue
		}
		st := Status{Upload: parseMeta(m)}
		if st.ID == "" {
			st.ID = ids[i]
		}
		st.Registered, _ = strconv.Atoi(m[Registered])
		st.AlreadyRegistered, _ = strconv.Atoi(m[AlreadyRegistered])
		st.Failed, _ = strconv.Atoi(m[Failed])
		st.OtherContent, _ = strconv.Atoi(m["other_content"]) // upload_record.lua
		st.Twice, _ = strconv.Atoi(m["registered_twice"])
		st.Waiting = max(0, st.Total-st.Registered-st.AlreadyRegistered-st.Failed)
		out = append(out, st)
	}
	return out, nil
}
