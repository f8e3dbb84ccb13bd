package upload

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// keysOnTopic counts the messages on the rows topic by idempotency key.
func keysOnTopic(t *testing.T, brokers []string) (map[string]int, int) {
	t.Helper()
	keys := map[string]int{}
	msgs := consume(t, brokers)
	for _, m := range msgs {
		msg, err := bulkreg.DecodeMessage([]byte(m.Payload))
		if err != nil {
			t.Fatalf("message %q: %v", m.Payload, err)
		}
		keys[msg.IdempotencyKey]++
	}
	return keys, len(msgs)
}

// TestPublishedUploadStaysADuplicateAfterTheStaleTime: the
// same file sent again after the stale time is a duplicate, not a resumed
// upload that queues its rows again.
func TestPublishedUploadStaysADuplicateAfterTheStaleTime(t *testing.T) {
	e := newEnv(t, nil, WriterOptions{})
	e.up.StaleAfter = 200 * time.Millisecond
	ctx := context.Background()
	data := xlsx(t, "stale-dup", validRows(500)...)
	first, err := e.up.Upload(ctx, Request{SellerID: "s", Data: data})
	if err != nil || first.Published != 500 {
		t.Fatalf("first upload: %+v %v", first, err)
	}
	time.Sleep(2 * e.up.StaleAfter) // the published state is now older than the stale time
	again, err := e.up.Upload(ctx, Request{SellerID: "s", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Resumed || again.Published != 0 {
		t.Errorf("the same file after the stale time: duplicate %v, resumed %v, published %d; want a duplicate, nothing published",
			again.Duplicate, again.Resumed, again.Published)
	}
	if _, n := keysOnTopic(t, e.brokers); n != 500 {
		t.Errorf("the topic holds %d messages, want the first upload's 500 and none more", n)
	}
	if st, _ := e.store.Get(ctx, first.UploadID); st.State != uploadstatus.Published {
		t.Errorf("state %q, want published", st.State)
	}
}

// dyingWriter hands the first `alive` messages to the real writer; then it
// ends its goroutine on the spot, as a producer killed mid-publish: nothing
// after it runs, not even the code that marks the upload publish_failed.
type dyingWriter struct {
	w       MessageWriter
	alive   int
	written int
}

func (d *dyingWriter) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	n := min(len(msgs), d.alive-d.written)
	if n > 0 {
		if err := d.w.WriteMessages(ctx, msgs[:n]...); err != nil {
			return err
		}
		d.written += n
	}
	if n < len(msgs) {
		runtime.Goexit()
	}
	return nil
}

// TestUploadKilledMidPublishResumesTheMissingRows: a producer
// dies after Kafka acknowledged 2 of 5 batches of a 500-row upload. While its
// heartbeat is fresh the same file is "in progress"; once stale, it is
// resumed and exactly the 300 missing rows are published: every row once on
// the topic.
func TestUploadKilledMidPublishResumesTheMissingRows(t *testing.T) {
	e := newEnv(t, nil, WriterOptions{})
	e.up.PublishBatch = 100
	ctx := context.Background()
	data := xlsx(t, "killed", validRows(500)...)
	id := UploadID("s", sha(data))

	dying := *e.up
	dying.Writer = &dyingWriter{w: e.writer, alive: 200}
	done := make(chan struct{})
	go func() {
		defer close(done)
		dying.Upload(ctx, Request{SellerID: "s", Data: data})
		t.Error("the dying producer's Upload returned")
	}()
	<-done
	st, err := e.store.Get(ctx, id)
	if err != nil || st.State != uploadstatus.Publishing {
		t.Fatalf("after the kill: state %q (%v), want publishing", st.State, err)
	}
	if _, n := keysOnTopic(t, e.brokers); n != 200 {
		t.Fatalf("the killed producer left %d rows on the topic, want 200 (two batches)", n)
	}
	// Within the stale time the upload is a producer at work.
	e.up.StaleAfter = time.Hour
	if _, err := e.up.Upload(ctx, Request{SellerID: "s", Data: data}); !errors.Is(err, ErrInProgress) {
		t.Errorf("the same file while the heartbeat is fresh: %v, want ErrInProgress", err)
	}
	e.up.StaleAfter = 300 * time.Millisecond
	var res Result
	testwait.For(t, 5*time.Second, "the dead producer's upload resumed", func() bool {
		res, err = e.up.Upload(ctx, Request{SellerID: "s", Data: data})
		if err != nil && !errors.Is(err, ErrInProgress) {
			t.Fatalf("resume: %v", err)
		}
		return err == nil
	})
	if !res.Resumed || res.Duplicate || res.Published != 300 {
		t.Errorf("resume: resumed %v, duplicate %v, published %d; want resumed with the 300 missing rows", res.Resumed, res.Duplicate, res.Published)
	}
	keys, n := keysOnTopic(t, e.brokers)
	if n != 500 || len(keys) != 500 {
		t.Errorf("the topic holds %d messages with %d distinct keys, want each of the 500 rows once", n, len(keys))
	}
	for r := 2; r <= 501; r++ {
		if c := keys[bulkreg.IdempotencyKey(id, r)]; c != 1 {
			t.Errorf("row %d on the topic %d times, want 1", r, c)
		}
	}
	if st, _ := e.store.Get(ctx, id); st.State != uploadstatus.Published {
		t.Errorf("state after the resume %q, want published", st.State)
	}
}
