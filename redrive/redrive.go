// Package redrive sends dead-lettered rows back to the rows topic: after an
// outage of the registration API that outlasted a row's retries, or a fault
// that has since been fixed.
//
// Scan reads the dead-letter topic (bulkreg.DLQTopic of the rows topic) as a
// bounded scan: every partition from its first offset up to the high
// watermark it had when the scan started, with no consumer group, so nothing
// is committed and dead letters written meanwhile wait for the next redrive.
// It keeps the letters a Filter selects (upload, seller, error class, time).
//
// Run republishes the selected rows with their original key and value, so
// each keeps its Idempotency-Key: a row that did reach the API before it was
// given up is answered as a replay (200), not registered twice. Each
// republished message carries headers recording the redrive (HeaderTime,
// HeaderCount, HeaderFrom).
//
// A row is sent only when its upload's status says it failed, and Run moves
// it back to waiting (uploadstatus.Store.Requeue) before publishing it; if
// publishing fails, the row is failed again (Restore). So a second redrive of
// the same rows, or a dead letter listed twice, publishes nothing new: the
// row is waiting or registered by then. A row whose upload status has expired
// is skipped unless IgnoreStatus is set; sent anyway, it is a harmless replay
// at the API for a row that was registered.
package redrive

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Headers a redrive adds to each row it republishes. The consumer carries
// them into a dead letter, so a row redriven and given up again counts on.
const (
	HeaderTime  = deadletter.RedriveHeaderPrefix + "time"  // RFC 3339 with nanoseconds: when this redrive published the row
	HeaderCount = deadletter.RedriveHeaderPrefix + "count" // how many times the row has been redriven, this time included
	HeaderFrom  = deadletter.RedriveHeaderPrefix + "from"  // the dead letter it came from: <topic>/<partition>/<offset>
)

// Filter selects dead letters. Zero fields select everything.
type Filter struct {
	Upload  string    // upload id
	Seller  string    // seller id
	Classes []string  // error classes (the bulkreg-error-class header: transient, rate_limited, misconfigured, bad-message, …)
	Since   time.Time // the letter's time (Letter.At) is at or after Since
	Until   time.Time // the letter's time is before Until
}

// Match reports whether f selects l.
func (f Filter) Match(l Letter) bool {
	switch {
	case f.Upload != "" && l.Upload != f.Upload,
		f.Seller != "" && l.Seller != f.Seller,
		len(f.Classes) > 0 && !slices.Contains(f.Classes, l.Class),
		!f.Since.IsZero() && l.At().Before(f.Since),
		!f.Until.IsZero() && !l.At().Before(f.Until):
		return false
	}
	return true
}

// Letter is one dead letter as read from the topic.
type Letter struct {
	Topic     string
	Partition int
	Offset    int64
	Time      time.Time // the dead letter's message time (when it was given up)
	Key       []byte
	Value     []byte
	Headers   []kafka.Header

	// From the value (empty when BadValue is set).
	Upload string
	Seller string
	Row    int
	// BadValue explains why the value is not a row message; such a letter
	// is never sent again.
	BadValue error

	// From the dead letter's headers.
	Class        string
	Message      string
	Attempts     int
	FirstFailure time.Time // zero when the header is absent
	Redriven     int       // times the row was redriven before it was given up this time
}

// At is the letter's time for filters: its first failure, or when there is
// none, the time it was dead-lettered.
func (l Letter) At() time.Time {
	if !l.FirstFailure.IsZero() {
		return l.FirstFailure
	}
	return l.Time
}

// Where names the letter's place in the dead-letter topic.
func (l Letter) Where() string { return fmt.Sprintf("%s/%d/%d", l.Topic, l.Partition, l.Offset) }

// ScanOptions say where the dead letters are.
type ScanOptions struct {
	Brokers []string
	Topic   string // the dead-letter topic, bulkreg.DLQTopic of the rows topic
	// ReadTimeout bounds the wait for the next message of a partition below
	// its high watermark. Default 10 s.
	ReadTimeout time.Duration
}

// Scanned is what Scan read.
type Scanned struct {
	Letters []Letter // the letters the filter selected, by partition and offset
	Read    int      // letters read in all
}

// Scan reads every partition of the dead-letter topic from its first offset
// up to the high watermark it had when Scan started, and returns the letters
// f selects.
func Scan(ctx context.Context, o ScanOptions, f Filter) (Scanned, error) {
	if len(o.Brokers) == 0 || o.Topic == "" {
		return Scanned{}, errors.New("redrive: scan: brokers and the dead-letter topic are required")
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 10 * time.Second
	}
	client := &kafka.Client{Addr: kafka.TCP(o.Brokers...), Timeout: o.ReadTimeout}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{o.Topic}})
	if err != nil {
		return Scanned{}, fmt.Errorf("redrive: read the partitions of %s: %w", o.Topic, err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) == 0 {
		why := "it does not exist"
		if len(md.Topics) == 1 && md.Topics[0].Error != nil {
			why = md.Topics[0].Error.Error()
		}
		return Scanned{}, fmt.Errorf("redrive: the dead-letter topic %s cannot be read: %s", o.Topic, why)
	}
	var reqs []kafka.OffsetRequest
	for _, p := range md.Topics[0].Partitions {
		reqs = append(reqs, kafka.FirstOffsetOf(p.ID), kafka.LastOffsetOf(p.ID))
	}
	offs, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{o.Topic: reqs}})
	if err != nil {
		return Scanned{}, fmt.Errorf("redrive: read the offsets of %s: %w", o.Topic, err)
	}
	parts := offs.Topics[o.Topic]
	slices.SortFunc(parts, func(a, b kafka.PartitionOffsets) int { return a.Partition - b.Partition })
	var out Scanned
	for _, p := range parts {
		if p.Error != nil {
			return out, fmt.Errorf("redrive: read the offsets of %s partition %d: %w", o.Topic, p.Partition, p.Error)
		}
		if p.LastOffset <= p.FirstOffset {
			continue
		}
		if err := scanPartition(ctx, o, p, f, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// scanPartition reads offsets [first, last) of one partition: last is the
// high watermark at the start, so letters written meanwhile are left for the
// next redrive and the scan ends.
func scanPartition(ctx context.Context, o ScanOptions, p kafka.PartitionOffsets, f Filter, out *Scanned) error {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: o.Brokers, Topic: o.Topic, Partition: p.Partition,
		MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 250 * time.Millisecond,
	})
	defer r.Close()
	if err := r.SetOffset(p.FirstOffset); err != nil {
		return fmt.Errorf("redrive: %s partition %d: start at offset %d: %w", o.Topic, p.Partition, p.FirstOffset, err)
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, o.ReadTimeout)
		m, err := r.ReadMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("redrive: %s partition %d: no message after offset %d within %s (the high watermark was %d): %w",
				o.Topic, p.Partition, r.Offset(), o.ReadTimeout, p.LastOffset, err)
		}
		if m.Offset >= p.LastOffset {
			return nil // written after the scan started
		}
		out.Read++
		if l := letterOf(m); f.Match(l) {
			out.Letters = append(out.Letters, l)
		}
		if m.Offset >= p.LastOffset-1 {
			return nil
		}
	}
}

func letterOf(m kafka.Message) Letter {
	l := Letter{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Time: m.Time, Key: m.Key, Value: m.Value, Headers: m.Headers}
	if msg, err := bulkreg.DecodeMessage(m.Value); err != nil {
		l.BadValue = err
	} else {
		l.Upload, l.Seller, l.Row = msg.UploadID, msg.SellerID, msg.Row
	}
	for _, h := range m.Headers {
		v := string(h.Value)
		switch h.Key {
		case deadletter.HeaderErrorClass:
			l.Class = v
		case deadletter.HeaderErrorMessage:
			l.Message = v
		case deadletter.HeaderAttempts:
			l.Attempts, _ = strconv.Atoi(v)
		case deadletter.HeaderFirstFailure:
			l.FirstFailure, _ = time.Parse(time.RFC3339Nano, v)
		case HeaderCount:
			l.Redriven, _ = strconv.Atoi(v)
		}
	}
	return l
}

// Status is the part of the upload status a redrive uses
// (*uploadstatus.Store).
type Status interface {
	Requeue(ctx context.Context, uploadID string, row int) (uploadstatus.Requeued, error)
	Restore(ctx context.Context, uploadID string, q uploadstatus.Requeued) error
	RowState(ctx context.Context, uploadID string, row int) (string, error)
}

// Publisher writes to the rows topic (a *kafka.Writer with its Topic set and
// acks from all in-sync replicas) and returns once the broker acknowledged.
type Publisher interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// Options of a Run.
type Options struct {
	// DryRun decides and lists what would be sent, and sends nothing and
	// changes no status.
	DryRun bool
	// IgnoreStatus sends the selected rows whatever their upload's status
	// says, and leaves the status alone: for dead letters whose upload
	// status has expired. A row that was registered is then a replay (200) at
	// the API, not a second product.
	IgnoreStatus bool
	// Now stamps HeaderTime; nil means time.Now.
	Now func() time.Time
	// Batch is the most rows published in one request. Default 500.
	Batch int
}

// Outcome is what Run did with one letter.
type Outcome struct {
	Letter Letter
	Sent   bool   // republished (with DryRun: would be)
	Reason string // why it was not sent
}

// Result lists what Run did, letter by letter, in the scan's order.
type Result struct {
	Outcomes []Outcome
	Sent     int
}

// Run republishes the letters to the rows topic (see the package comment for
// which are sent). It stops at the first error of Redis or Kafka, with the
// outcomes so far: rows not published by then are failed again, as before.
func Run(ctx context.Context, letters []Letter, st Status, pub Publisher, o Options) (Result, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Batch <= 0 {
		o.Batch = bulkreg.MaxRows
	}
	var (
		res  Result
		seen = map[string]bool{}
		// rows of the batch being built: their message and their requeue
		batch []kafka.Message
		moved []uploadstatus.Requeued
		at    []int // index in res.Outcomes
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := pub.WriteMessages(ctx, batch...)
		var werrs kafka.WriteErrors
		partial := errors.As(err, &werrs) && len(werrs) == len(batch)
		var restoreErrs []error
		for i, idx := range at {
			failed := err != nil && (!partial || werrs[i] != nil)
			if !failed {
				res.Outcomes[idx].Sent = true
				res.Sent++
				continue
			}
			res.Outcomes[idx].Reason = "publishing failed; the row is failed again"
			if rerr := st.Restore(context.WithoutCancel(ctx), res.Outcomes[idx].Letter.Upload, moved[i]); rerr != nil {
				restoreErrs = append(restoreErrs, fmt.Errorf("row %d of upload %s is left waiting with nothing published; run the redrive again with --ignore-status for it: %w",
					res.Outcomes[idx].Letter.Row, res.Outcomes[idx].Letter.Upload, rerr))
			}
		}
		batch, moved, at = batch[:0], moved[:0], at[:0]
		if err != nil {
			return errors.Join(append([]error{fmt.Errorf("redrive: publish to the rows topic: %w", err)}, restoreErrs...)...)
		}
		return nil
	}
	for _, l := range letters {
		res.Outcomes = append(res.Outcomes, Outcome{Letter: l})
		idx := len(res.Outcomes) - 1
		skip := func(format string, args ...any) { res.Outcomes[idx].Reason = fmt.Sprintf(format, args...) }
		if l.BadValue != nil {
			skip("not a row message, it cannot be registered: %v", l.BadValue)
			continue
		}
		id := bulkreg.IdempotencyKey(l.Upload, l.Row)
		if seen[id] {
			skip("an earlier dead letter of the same row is sent in this redrive")
			continue
		}
		seen[id] = true
		var q uploadstatus.Requeued
		switch {
		case o.IgnoreStatus:
		case o.DryRun:
			state, err := st.RowState(ctx, l.Upload, l.Row)
			if reason, ok, err := decide(state, err); err != nil {
				return res, err
			} else if !ok {
				skip("%s", reason)
				continue
			}
		default:
			var err error
			q, err = st.Requeue(ctx, l.Upload, l.Row)
			if err != nil && !errors.Is(err, uploadstatus.ErrNotFound) {
				if ferr := flush(); ferr != nil {
					err = errors.Join(err, ferr)
				}
				return res, fmt.Errorf("redrive: move row %d of upload %s back to waiting: %w", l.Row, l.Upload, err)
			}
			if reason, ok, _ := decide(q.State, err); !ok {
				skip("%s", reason)
				continue
			}
		}
		if o.DryRun {
			res.Outcomes[idx].Sent = true
			res.Sent++
			continue
		}
		batch = append(batch, message(l, o.Now()))
		moved = append(moved, q)
		at = append(at, idx)
		if len(batch) >= o.Batch {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	return res, flush()
}

// decide says whether a row in this state is sent, and why not.
func decide(state string, err error) (reason string, send bool, _ error) {
	switch {
	case errors.Is(err, uploadstatus.ErrNotFound):
		return "the upload's status is gone (expired or never created); --ignore-status sends the row anyway", false, nil
	case err != nil:
		return "", false, fmt.Errorf("redrive: read a row's status: %w", err)
	case state == uploadstatus.Failed:
		return "", true, nil
	case state == "":
		return "the row is waiting: an earlier redrive sent it again, or it is being processed", false, nil
	default:
		return "the row is " + state + " already", false, nil
	}
}

// message is the row as it is published again: the same key and value, and
// headers recording the redrive.
func message(l Letter, now time.Time) kafka.Message {
	return kafka.Message{
		Key:   l.Key,
		Value: l.Value,
		Headers: []kafka.Header{
			{Key: HeaderTime, Value: []byte(now.UTC().Format(time.RFC3339Nano))},
			{Key: HeaderCount, Value: []byte(strconv.Itoa(l.Redriven + 1))},
			{Key: HeaderFrom, Value: []byte(l.Where())},
		},
	}
}
