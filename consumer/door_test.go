package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// TestBadMessagesAtTheDoor: on one partition, rows whose upload_id holds a
// tab or a newline, is too long or is wrongly shaped, a row of an upload no
// producer created and a row of another seller's upload, then good rows.
// Each bad one is dead-lettered as bad-message and registers nothing (the
// sandbox's audit); the good rows behind them are registered and the
// partition's committed offset reaches its end. A row of an upload whose
// record expired by retention, or that Redis may have lost, is registered
// all the same: an absent record alone does not make a row bad.
func TestBadMessagesAtTheDoor(t *testing.T) {
	s := newStack(t, stackOptions{partitions: 1, limit: 100, window: 2 * time.Second, margin: 50 * time.Millisecond})
	ctx := context.Background()
	// A Redis prepared as an operator does (producer redis-init), a day ago:
	// its hash slots have lost nothing since. The retention of 1 h lets a
	// row queued 2 h ago find its upload's record expired.
	if _, err := throttle.Initialize(ctx, s.rdb); err != nil {
		t.Fatal(err)
	}
	markers := throttle.NewMarkers()
	dayAgo := strconv.FormatInt(time.Now().Add(-24*time.Hour).UnixMicro(), 10)
	store := uploadstatus.New(s.rdb, time.Hour)
	const seller, many = "seller-d", 30
	for _, id := range []string{"up-good", "up-many", "up-none", "up-other", "up-expired", "up-lost"} {
		if err := s.rdb.HSet(ctx, markers.For(uploadstatus.MetaKey(id)), "since", dayAgo).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []uploadstatus.Upload{{ID: "up-good", SellerID: seller, Total: 2, Valid: 2}, {ID: "up-many", SellerID: seller, Total: many, Valid: many},
		{ID: "up-other", SellerID: "seller-x", Total: 1, Valid: 1}} {
		u.CreatedAt, u.State = time.Now(), uploadstatus.Publishing
		if _, err := store.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	// Redis lost up-lost's hash slot after its row was queued: the marker is gone.
	if err := s.rdb.Del(ctx, markers.For(uploadstatus.MetaKey("up-lost"))).Err(); err != nil {
		t.Fatal(err)
	}
	lookups := &countedUploads{Uploads: store, n: map[string]int{}}
	s.startConsumer(func(_ *Config, d *Deps) {
		d.Uploads = lookups
	})

	raw := func(upload string, row int, sku string) kafka.Message {
		p, _ := json.Marshal(ledgerProduct(sku))
		v := fmt.Sprintf(`{"v":1,"upload_id":%q,"seller_id":%q,"row":%d,"idempotency_key":%q,"product":%s,"enqueued_at":%q}`,
			upload, seller, row, bulkreg.IdempotencyKey(upload, row), p, time.Now().UTC().Format(time.RFC3339))
		return kafka.Message{Key: []byte(seller), Value: []byte(v)}
	}
	row := func(upload string, n int, sku string, at time.Time) kafka.Message {
		v, err := json.Marshal(bulkreg.NewMessage(upload, seller, n, ledgerProduct(sku), at))
		if err != nil {
			t.Fatal(err)
		}
		return kafka.Message{Key: []byte(seller), Value: v}
	}
	bad := []struct {
		name string
		msg  kafka.Message
		says string // in the dead letter's message
	}{
		{"tab in upload_id", raw("up\tgood", 1, "BAD-TAB"), "upload_id"},
		{"newline in upload_id", raw("up-good\n", 1, "BAD-NL"), "upload_id"},
		{"upload_id too long", raw(strings.Repeat("a", 65), 1, "BAD-LONG"), "65 characters"},
		{"upload_id with a hash tag", raw("up}{good", 1, "BAD-TAG"), "upload_id"},
		{"row number beyond any upload", raw("up-good", bulkreg.MaxRowNumber+1, "BAD-ROW"), "field row"},
		{"no seller_sku", raw("up-good", 4, ""), "seller_sku"},
		{"an upload no producer created", row("up-none", 1, "BAD-NONE", time.Now()), "does not exist"},
		{"another seller's upload", row("up-other", 1, "BAD-OTHER", time.Now()), "another seller"},
	}
	msgs := make([]kafka.Message, 0, len(bad)+4)
	for _, b := range bad {
		msgs = append(msgs, b.msg)
	}
	msgs = append(msgs,
		row("up-good", 2, "GOOD-2", time.Now()), row("up-good", 3, "GOOD-3", time.Now()),
		row("up-expired", 2, "OLD-2", time.Now().Add(-2*time.Hour)), // queued before the retention: its record may have expired
		row("up-lost", 2, "LOST-2", time.Now()))
	for i := range many { // rows of one upload cost one lookup between them
		msgs = append(msgs, row("up-many", i+2, fmt.Sprintf("MANY-%d", i), time.Now()))
	}
	testkafka.Produce(t, s.brokers, s.topic, msgs...)

	testwait.For(t, 20*time.Second, "the partition committed to its end", func() bool {
		return testkafka.Committed(t, s.brokers, "registrar", s.topic, 1)[0] == int64(len(msgs))
	})
	dl := readDLQ(t, s.brokers, s.topic, len(bad))
	byValue := map[string]kafka.Message{}
	for _, m := range dl {
		byValue[string(m.Value)] = m
	}
	for _, b := range bad {
		m, ok := byValue[string(b.msg.Value)]
		switch {
		case !ok:
			t.Errorf("%s: not dead-lettered", b.name)
		case header(m, deadletter.HeaderErrorClass) != deadletter.ClassBadMessage:
			t.Errorf("%s: dead-lettered as %q, want %q", b.name, header(m, deadletter.HeaderErrorClass), deadletter.ClassBadMessage)
		case !strings.Contains(header(m, deadletter.HeaderErrorMessage), b.says):
			t.Errorf("%s: dead letter says %q, want it to name %q", b.name, header(m, deadletter.HeaderErrorMessage), b.says)
		}
	}
	if len(dl) != len(bad) {
		t.Errorf("%d dead letters, want %d", len(dl), len(bad))
	}
	if a := s.audit(seller); a.Products != 4+many || a.Accepted != 4+many {
		t.Errorf("sandbox: %d products, %d accepted for %s; want %d each (the good, many, expired and lost uploads' rows, none of the bad ones)", a.Products, a.Accepted, seller, 4+many)
	}
	for id, n := range lookups.counts() {
		if n != 1 {
			t.Errorf("upload %s was looked up %d times, want once: its rows cost no round trip each", id, n)
		}
	}
	if st, err := store.Get(ctx, "up-good"); err != nil || st.Registered != 2 {
		t.Errorf("up-good: %+v, %v; want 2 registered", st, err)
	}
	for _, id := range []string{"up-expired", "up-lost"} {
		if st, err := store.Get(ctx, id); err != nil || st.Registered != 1 || !st.PartlyLost() {
			t.Errorf("%s: %+v, %v; want 1 registered and the status saying it was partly lost", id, st, err)
		}
	}
	for _, id := range []string{"up-none", "up-other"} {
		if n, err := s.rdb.Exists(ctx, uploadstatus.MetaKey(id)).Result(); err != nil || (id == "up-none" && n != 0) {
			t.Errorf("%s: a bad row left a record (%d, %v)", id, n, err)
		}
	}
}

// countedUploads counts the lookups of each upload.
type countedUploads struct {
	Uploads
	mu sync.Mutex
	n  map[string]int
}

func (c *countedUploads) Presence(ctx context.Context, q uploadstatus.PresenceQuery) (uploadstatus.Presence, error) {
	c.mu.Lock()
	c.n[q.UploadID]++
	c.mu.Unlock()
	return c.Uploads.Presence(ctx, q)
}

func (c *countedUploads) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps(c.n) // pipeline_test.go
}
