package uploadstatus

import (
	"context"
	"fmt"
	"math/bits"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/redisfail"
	"github.com/bulkreg/bulkreg/lua"
)

// The rows of an upload Kafka acknowledged, as a bitmap under
// bulkreg:upload:{<id>}:published (bit <row> set): a producer that resumes
// an upload whose publishing died part way publishes only the rows not in it,
// so no acknowledged row is queued (and registered, spending the seller's
// quota on a replay) twice.

func publishedKey(id string) string { return key(id, "published") }

// MarkPublished records rows as acknowledged by Kafka and, while the upload
// is Publishing, moves its state time to now: a heartbeat, so a producer
// still at work is not taken over as dead by BeginPublish's stale age. It
// returns how many rows are recorded as published so far.
func (s *Store) MarkPublished(ctx context.Context, id string, rows []int) (int, error) {
	args := make([]any, 0, 1+len(rows))
	args = append(args, s.ms())
	for _, r := range rows {
		if r < 0 {
			return 0, fmt.Errorf("mark rows of upload %s published: row %d is negative", id, r)
		}
		args = append(args, strconv.Itoa(r))
	}
	// The script is built here rather than in New: it is run once per batch
	// of rows, and Store's fields belong to the code that builds them.
	n, err := redis.NewScript(lua.Script("upload_published.lua")).Run(ctx, s.rdb, []string{key(id, "meta"), publishedKey(id)}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("mark rows of upload %s published in Redis: %w", id, redisfail.Wrap(err))
	}
	return n, nil
}

// PublishedRows returns the rows of the upload recorded as acknowledged by
// Kafka (MarkPublished), in increasing order; none when nothing is recorded.
func (s *Store) PublishedRows(ctx context.Context, id string) ([]int, error) {
	b, err := s.rdb.Get(ctx, publishedKey(id)).Bytes()
	if err == redis.Nil {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the published rows of upload %s from Redis: %w", id, redisfail.Wrap(err))
	}
	var rows []int
	for i, c := range b {
		for c != 0 {
			// Redis numbers a byte's bits from the most significant.
			j := bits.LeadingZeros8(c)
			rows = append(rows, i*8+j)
			c &^= 0x80 >> j
		}
	}
	return rows, nil
}
