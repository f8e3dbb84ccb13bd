package kafkagroup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

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
