package kafkagroup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// offsets tracks one partition's rows between reading and finishing, and
// answers the one question committing needs: up to where is everything done?
//
// Kafka's committed offset is the next offset to read, so the commit point is
// the lowest offset not yet finished, or, when every row read is finished, the
// offset after the last one read. Rows finish in any order (sellers wait for
// their own windows), so a finished row above an unfinished one is not
// committed until the lower one finishes: a crash redelivers it, and its
// Idempotency-Key makes the second call a replay.
type offsets struct {
	mu      sync.Mutex
	pending []pendingRow // in read (offset) order; finished rows at the front are dropped
	next    int64        // offset after the last row read; -1 before the first
	// ahead are rows finished before this assignment (by this member in an
	// earlier generation, or by the member whose commit named them) and not
	// read again yet: read reports them finished.
	ahead map[int64]bool
}

type pendingRow struct {
	offset int64
	since  time.Time // when the row was produced (or read, when the broker gives no time)
	done   bool
}

// newOffsets starts at the assignment's offset: a committed offset, or a
// negative "first/last offset" marker when the group has none yet.
func newOffsets(start int64) *offsets {
	o := &offsets{next: -1}
	if start >= 0 {
		o.next = start
	}
	return o
}

// finishedBefore notes rows finished before this assignment, at or above
// from (where it starts): read passes over them.
func (o *offsets) finishedBefore(from int64, rows []int64) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, off := range rows {
		if off >= from {
			if o.ahead == nil {
				o.ahead = map[int64]bool{}
			}
			o.ahead[off] = true
		}
	}
	return len(o.ahead)
}

// read registers a row just read. Offsets arrive in increasing order, with
// gaps where the log has none (compaction, transaction markers). It reports
// true for a row finished before this assignment (finishedBefore): the row
// counts as finished at once and is not to be handled.
func (o *offsets) read(offset int64, since time.Time) (finished bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next = offset + 1
	if o.ahead[offset] {
		delete(o.ahead, offset)
		if len(o.pending) > 0 { // above an unfinished row: kept until that one finishes
			o.pending = append(o.pending, pendingRow{offset: offset, since: since, done: true})
		}
		return true
	}
	o.pending = append(o.pending, pendingRow{offset: offset, since: since})
	return false
}

// finish marks a row done. It reports false for an offset that was never
// read or is already finished, which is a bug in the caller.
func (o *offsets) finish(offset int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := sort.Search(len(o.pending), func(i int) bool { return o.pending[i].offset >= offset })
	if i == len(o.pending) || o.pending[i].offset != offset || o.pending[i].done {
		return false
	}
	o.pending[i].done = true
	n := 0
	for n < len(o.pending) && o.pending[n].done {
		n++
	}
	if n > 0 {
		// Copy down instead of reslicing so the backing array does not grow forever.
		o.pending = append(o.pending[:0], o.pending[n:]...)
	}
	return true
}

// commitPoint is the offset to commit, and false when nothing was read or
// assigned yet.
func (o *offsets) commitPoint() (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending) > 0 {
		return o.pending[0].offset, true
	}
	return o.next, o.next >= 0
}

// finishedAbove lists, in increasing order, the finished rows above the
// commit point: the rows a commit cannot cover yet, since a row below them
// is unfinished, and those finished before this assignment and not read
// again yet.
func (o *offsets) finishedAbove() []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []int64
	for _, p := range o.pending {
		if p.done {
			out = append(out, p.offset)
		}
	}
	for off := range o.ahead {
		out = append(out, off)
	}
	slices.Sort(out)
	return out
}

// readThrough is the offset after the last row read (-1 before the first).
func (o *offsets) readThrough() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.next
}

// oldest is when the oldest unfinished row was produced; zero when none.
func (o *offsets) oldest() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range o.pending {
		if !p.done {
			return p.since
		}
	}
	return time.Time{}
}

// unfinished counts rows read and not finished.
func (o *offsets) unfinished() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, p := range o.pending {
		if !p.done {
			n++
		}
	}
	return n
}

// A commit carries, in its metadata, the rows finished above its offset.
//
// The committed offset is the lowest unfinished row, so the rows finished
// above it (a seller's later rows, while one row waits out an outage) are
// read again by the partition's next owner. A row registered is a replay
// then; a row dead-lettered after its attempts would be called again, and
// once the API answered it would register, leaving the row both registered
// and in the dead-letter topic (when Redis has lost the upload's status and
// the ledger). The metadata is the one record of those rows that outlives
// the member and Redis: the next owner passes over them.

// doneMetadataPrefix opens the metadata bulkreg writes; any other metadata
// (another tool's commit) names no row.
const doneMetadataPrefix = "bulkreg-done:v1:"

// maxDoneMetadata keeps the metadata under the broker's default
// offset.metadata.max.bytes (4096); rows past it are read again, as rows
// without metadata are.
const maxDoneMetadata = 4000

// encodeDone writes offsets (increasing) as ranges: "22-27,31".
func encodeDone(offs []int64) string {
	if len(offs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(doneMetadataPrefix)
	for i := 0; i < len(offs); {
		j := i
		for j+1 < len(offs) && offs[j+1] == offs[j]+1 {
			j++
		}
		part := strconv.FormatInt(offs[i], 10)
		if j > i {
			part += "-" + strconv.FormatInt(offs[j], 10)
		}
		if b.Len()+len(part)+1 > maxDoneMetadata {
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(part)
		i = j + 1
	}
	return b.String()
}

// maxDoneRange bounds one range, and maxDoneRows the rows one metadata
// names, all its ranges together: a bound per range alone would let 4000
// bytes of "0-65536," name 33 million rows (262 MB). A range past its bound
// marks the metadata damaged; rows past the total are left out, like the
// rows past encodeDone's cut, and read again.
const (
	maxDoneRange = 1 << 16
	maxDoneRows  = 1 << 16
)

// decodeDone reads encodeDone's metadata: increasing, non-overlapping
// ranges, of which it names the first maxDoneRows rows. Anything else names
// no row (the rows are read again).
func decodeDone(meta string) []int64 {
	rest, ok := strings.CutPrefix(meta, doneMetadataPrefix)
	if !ok || rest == "" {
		return nil
	}
	type span struct{ lo, hi int64 }
	var spans []span
	for part := range strings.SplitSeq(rest, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		if err != nil || a < 0 || (len(spans) > 0 && a <= spans[len(spans)-1].hi) {
			return nil
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(hi, 10, 64); err != nil || b < a || b-a > maxDoneRange {
				return nil
			}
		}
		spans = append(spans, span{a, b})
	}
	var out []int64
	for _, s := range spans {
		for o := s.lo; o <= s.hi && len(out) < maxDoneRows; o++ {
			out = append(out, o)
		}
	}
	return out
}

// committedDone reads the rows finished above each partition's committed
// offset, as the last commit's metadata names them. On an error it names
// none: the rows are then read again.
func (g *Member) committedDone(ctx context.Context, partitions []int) map[int][]int64 {
	if len(partitions) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := g.kafka.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: g.cfg.Group, Topics: map[string][]int{g.cfg.Topic: partitions}})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		g.log.Warn("consumer: could not read the rows finished above the committed offsets; they are read and handled again", "err", err)
		return nil
	}
	out := map[int][]int64{}
	for _, p := range res.Topics[g.cfg.Topic] {
		if p.Error == nil {
			out[p.Partition] = decodeDone(p.Metadata)
		}
	}
	return out
}

// commitOffsets commits offsets for the generation, each with the rows
// finished above it (meta). It reports the partitions the broker took.
func (g *Member) commitOffsets(gen *kafka.Generation, offsets map[int]int64, meta map[int]string) (map[int]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	commits := make([]kafka.OffsetCommit, 0, len(offsets))
	for id, off := range offsets {
		commits = append(commits, kafka.OffsetCommit{Partition: id, Offset: off, Metadata: meta[id]})
	}
	res, err := g.kafka.OffsetCommit(ctx, &kafka.OffsetCommitRequest{GroupID: gen.GroupID, GenerationID: int(gen.ID), MemberID: gen.MemberID,
		Topics: map[string][]kafka.OffsetCommit{g.cfg.Topic: commits}})
	if err != nil {
		return nil, err
	}
	took := map[int]bool{}
	var errs []error
	for _, p := range res.Topics[g.cfg.Topic] {
		if p.Error != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", p.Partition, p.Error))
			continue
		}
		took[p.Partition] = true
	}
	return took, errors.Join(errs...)
}
