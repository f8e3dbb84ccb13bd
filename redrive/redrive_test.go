package redrive

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// deadRow is one row given up by the consumer.
type deadRow struct {
	upload, seller string
	row            int
	class          string
	first          time.Time
	status         string // what the upload status says of it now
}

type fixture struct {
	brokers []string
	rows    string // rows topic
	dlq     string
	status  *uploadstatus.Store
	letters []kafka.Message // written to the DLQ, in order
}

// newFixture creates two uploads and dead-letters rows of them the way the
// consumer does (original key and value, its headers), plus one bad message.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{rows: "rows", dlq: bulkreg.DLQTopic("rows")}
	f.brokers = testkafka.Start(t, 3, f.rows, f.dlq)
	f.status = uploadstatus.New(testredis.Start(t).Client(), time.Hour)
	ctx := context.Background()
	for _, u := range []uploadstatus.Upload{{ID: "u1", SellerID: "s1", Total: 5, Valid: 5}, {ID: "u2", SellerID: "s2", Total: 2, Valid: 2}} {
		if _, err := f.status.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	dead := []deadRow{
		{"u1", "s1", 1, "transient", t0.Add(1 * time.Minute), uploadstatus.Failed},
		{"u1", "s1", 2, "transient", t0.Add(2 * time.Minute), uploadstatus.Failed},
		{"u1", "s1", 3, "transient", t0.Add(3 * time.Minute), uploadstatus.Failed},
		{"u1", "s1", 4, "transient", t0.Add(4 * time.Minute), uploadstatus.Registered}, // a later attempt registered it
		{"u2", "s2", 1, "rate_limited", t0.Add(2 * time.Minute), uploadstatus.Failed},
		{"u1", "s1", 5, "transient", t0.Add(9 * time.Minute), uploadstatus.Failed},
	}
	for _, d := range dead {
		p := bulkreg.Product{SellerSKU: fmt.Sprintf("%s-%d", d.upload, d.row), Name: "상품", CategoryCode: "50000001", Price: 12000, Stock: 1}
		v, err := json.Marshal(bulkreg.NewMessage(d.upload, d.seller, d.row, p, t0))
		if err != nil {
			t.Fatal(err)
		}
		f.letters = append(f.letters, kafka.Message{Key: []byte(d.seller), Value: v, Headers: []kafka.Header{
			{Key: deadletter.HeaderErrorClass, Value: []byte(d.class)},
			{Key: deadletter.HeaderErrorMessage, Value: []byte("the registration API answered 503 Service Unavailable")},
			{Key: deadletter.HeaderAttempts, Value: []byte("8")},
			{Key: deadletter.HeaderFirstFailure, Value: []byte(d.first.Format(time.RFC3339Nano))},
		}})
		if err := f.status.RecordRow(ctx, d.upload, uploadstatus.RowResult{Row: d.row, State: d.status, Reason: "given up"}); err != nil {
			t.Fatal(err)
		}
	}
	f.letters = append(f.letters, kafka.Message{Key: []byte("s1"), Value: []byte("not json"), Headers: []kafka.Header{
		{Key: deadletter.HeaderErrorClass, Value: []byte(deadletter.ClassBadMessage)}}})
	testkafka.Produce(t, f.brokers, f.dlq, f.letters...)
	return f
}

func (f *fixture) scan(t *testing.T, topic string, filter Filter) Scanned {
	t.Helper()
	s, err := Scan(context.Background(), ScanOptions{Brokers: f.brokers, Topic: topic, ReadTimeout: 5 * time.Second}, filter)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fixture) writer() *kafka.Writer {
	return &kafka.Writer{Addr: kafka.TCP(f.brokers...), Topic: f.rows, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
}

// rowsOf names the rows of the outcomes that were (or would be) sent.
func rowsOf(res Result) []string {
	var out []string
	for _, o := range res.Outcomes {
		if o.Sent {
			out = append(out, o.Letter.Upload+":"+strconv.Itoa(o.Letter.Row))
		}
	}
	slices.Sort(out)
	return out
}

func (f *fixture) counts(t *testing.T, upload string) (reg, failed, waiting int) {
	t.Helper()
	st, err := f.status.Get(context.Background(), upload)
	if err != nil {
		t.Fatal(err)
	}
	return st.Registered, st.Failed, st.Waiting
}

func TestFilters(t *testing.T) {
	f := newFixture(t)
	all := f.scan(t, f.dlq, Filter{})
	if all.Read != 7 || len(all.Letters) != 7 {
		t.Fatalf("scan of everything: read %d, selected %d; want 7, 7", all.Read, len(all.Letters))
	}
	for _, tc := range []struct {
		name   string
		filter Filter
		want   []string // upload:row, "bad" for the bad message
	}{
		{"upload", Filter{Upload: "u1"}, []string{"u1:1", "u1:2", "u1:3", "u1:4", "u1:5"}},
		{"seller", Filter{Seller: "s2"}, []string{"u2:1"}},
		{"class", Filter{Classes: []string{"rate_limited"}}, []string{"u2:1"}},
		{"two classes", Filter{Classes: []string{"rate_limited", "bad-message"}}, []string{"bad", "u2:1"}},
		{"since and until (first failure)", Filter{Since: t0.Add(2 * time.Minute), Until: t0.Add(4 * time.Minute)}, []string{"u1:2", "u1:3", "u2:1"}},
		{"everything of an upload since", Filter{Upload: "u1", Since: t0.Add(4 * time.Minute)}, []string{"u1:4", "u1:5"}},
		{"nothing", Filter{Upload: "u9"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, l := range all.Letters {
				if !tc.filter.Match(l) {
					continue
				}
				if l.BadValue != nil {
					got = append(got, "bad")
				} else {
					got = append(got, l.Upload+":"+strconv.Itoa(l.Row))
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("selected %v, want %v", got, tc.want)
			}
		})
	}
	// The bad message's letter falls back to its message time for --since.
	for _, l := range all.Letters {
		if l.BadValue != nil && (!l.At().Equal(l.Time) || l.Time.IsZero()) {
			t.Errorf("bad message At() = %s, want its message time %s", l.At(), l.Time)
		}
	}
}

func TestDryRunListsAndSendsNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	sc := f.scan(t, f.dlq, Filter{Upload: "u1", Until: t0.Add(5 * time.Minute)})
	w := f.writer()
	defer w.Close()
	res, err := Run(ctx, sc.Letters, f.status, w, Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rowsOf(res), []string{"u1:1", "u1:2", "u1:3"}; !slices.Equal(got, want) {
		t.Errorf("dry run would send %v, want %v", got, want)
	}
	for _, o := range res.Outcomes {
		if o.Letter.Row == 4 && (o.Sent || !strings.Contains(o.Reason, "registered already")) {
			t.Errorf("row 4 (registered): %+v, want skipped as registered", o)
		}
	}
	if n := f.scan(t, f.rows, Filter{}).Read; n != 0 {
		t.Errorf("a dry run published %d messages", n)
	}
	if reg, failed, waiting := f.counts(t, "u1"); reg != 1 || failed != 4 || waiting != 0 {
		t.Errorf("after a dry run u1 has %d registered, %d failed, %d waiting; want 1, 4, 0 (unchanged)", reg, failed, waiting)
	}
}

func TestRedriveRepublishesThemOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	w := f.writer()
	defer w.Close()
	now := t0.Add(time.Hour)
	sc := f.scan(t, f.dlq, Filter{Upload: "u1", Until: t0.Add(5 * time.Minute)})
	res, err := Run(ctx, sc.Letters, f.status, w, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"u1:1", "u1:2", "u1:3"}
	if got := rowsOf(res); !slices.Equal(got, want) || res.Sent != 3 {
		t.Fatalf("sent %v (%d), want %v", got, res.Sent, want)
	}
	// The rows topic holds exactly them, with the original key and value.
	orig := map[string]kafka.Message{}
	for i, m := range f.letters[:3] {
		orig[fmt.Sprintf("u1:%d", i+1)] = m
	}
	published := f.scan(t, f.rows, Filter{})
	if len(published.Letters) != 3 {
		t.Fatalf("the rows topic holds %d messages, want 3", len(published.Letters))
	}
	for _, p := range published.Letters {
		id := p.Upload + ":" + strconv.Itoa(p.Row)
		o, ok := orig[id]
		if !ok || string(p.Key) != string(o.Key) || string(p.Value) != string(o.Value) {
			t.Errorf("published %s key %q value %s; want the dead letter's key and value", id, p.Key, p.Value)
		}
		h := map[string]string{}
		for _, x := range p.Headers {
			h[x.Key] = string(x.Value)
		}
		if h[HeaderCount] != "1" || h[HeaderTime] != now.Format(time.RFC3339Nano) || !strings.HasPrefix(h[HeaderFrom], f.dlq+"/") {
			t.Errorf("published %s headers %v; want count 1, time %s, from %s/…", id, h, now.Format(time.RFC3339Nano), f.dlq)
		}
		delete(orig, id)
	}
	if reg, failed, waiting := f.counts(t, "u1"); reg != 1 || failed != 1 || waiting != 3 {
		t.Errorf("after the redrive u1 has %d registered, %d failed, %d waiting; want 1, 1 (row 5, not selected), 3", reg, failed, waiting)
	}

	// The same redrive again: the rows are waiting, nothing is published.
	res, err = Run(ctx, f.scan(t, f.dlq, Filter{Upload: "u1", Until: t0.Add(5 * time.Minute)}).Letters, f.status, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 0 {
		t.Errorf("a second redrive sent %v", rowsOf(res))
	}
	for _, o := range res.Outcomes {
		if o.Letter.Row <= 3 && !strings.Contains(o.Reason, "waiting") {
			t.Errorf("second redrive, row %d: %q, want skipped as waiting", o.Letter.Row, o.Reason)
		}
	}
	if n := f.scan(t, f.rows, Filter{}).Read; n != 3 {
		t.Errorf("after the second redrive the rows topic holds %d messages, want still 3", n)
	}
}

// A dead letter listed twice in the DLQ (a row redriven, then given up
// again before its first letter was redriven) is sent once.
func TestTheSameRowTwiceIsSentOnce(t *testing.T) {
	f := newFixture(t)
	testkafka.Produce(t, f.brokers, f.dlq, f.letters[0])
	w := f.writer()
	defer w.Close()
	for _, dry := range []bool{true, false} {
		res, err := Run(context.Background(), f.scan(t, f.dlq, Filter{Upload: "u1", Until: t0.Add(90 * time.Second)}).Letters, f.status, w, Options{DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		if got := rowsOf(res); !slices.Equal(got, []string{"u1:1"}) || len(res.Outcomes) != 2 {
			t.Errorf("dry run %v: sent %v of %d letters, want u1:1 once of 2", dry, got, len(res.Outcomes))
		}
	}
}

// Publishing fails (the rows topic does not exist): the rows are failed again.
func TestPublishFailureRestoresTheRows(t *testing.T) {
	f := newFixture(t)
	w := &kafka.Writer{Addr: kafka.TCP(f.brokers...), Topic: "no-such-topic", RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond, MaxAttempts: 1, WriteTimeout: 2 * time.Second}
	defer w.Close()
	res, err := Run(context.Background(), f.scan(t, f.dlq, Filter{Upload: "u1"}).Letters, f.status, w, Options{})
	if err == nil || !strings.Contains(err.Error(), "publish to the rows topic") {
		t.Fatalf("Run = %v, want a publish error", err)
	}
	if res.Sent != 0 {
		t.Errorf("sent %d", res.Sent)
	}
	if reg, failed, waiting := f.counts(t, "u1"); reg != 1 || failed != 4 || waiting != 0 {
		t.Errorf("after a failed publish u1 has %d registered, %d failed, %d waiting; want 1, 4, 0", reg, failed, waiting)
	}
}

func TestIgnoreStatus(t *testing.T) {
	f := newFixture(t)
	w := f.writer()
	defer w.Close()
	// an upload whose status expired
	p := bulkreg.Product{SellerSKU: "old", Name: "상품", CategoryCode: "50000001", Price: 1, Stock: 1}
	v, _ := json.Marshal(bulkreg.NewMessage("old", "s3", 1, p, t0))
	testkafka.Produce(t, f.brokers, f.dlq, kafka.Message{Key: []byte("s3"), Value: v, Headers: []kafka.Header{{Key: deadletter.HeaderErrorClass, Value: []byte("transient")}}})
	letters := f.scan(t, f.dlq, Filter{Upload: "old"}).Letters
	res, err := Run(context.Background(), letters, f.status, w, Options{})
	if err != nil || res.Sent != 0 || !strings.Contains(res.Outcomes[0].Reason, "--ignore-status") {
		t.Fatalf("expired status: %+v, %v; want skipped, naming --ignore-status", res, err)
	}
	res, err = Run(context.Background(), letters, f.status, w, Options{IgnoreStatus: true})
	if err != nil || res.Sent != 1 {
		t.Fatalf("with IgnoreStatus: %+v, %v; want sent", res, err)
	}
}

// The scan stops at the high watermark it saw at the start, even while dead
// letters keep arriving.
func TestScanIsBounded(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		w := &kafka.Writer{Addr: kafka.TCP(f.brokers...), Topic: f.dlq, Balancer: &kafka.RoundRobin{}, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll} // acked: no race with the reads that follow
		defer w.Close()
		for ctx.Err() == nil {
			_ = w.WriteMessages(ctx, f.letters[0])
		}
	})
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(200 * time.Millisecond)
	done := make(chan Scanned)
	go func() { done <- f.scan(t, f.dlq, Filter{}) }()
	select {
	case s := <-done:
		if s.Read < 7 {
			t.Errorf("read %d letters, want at least the 7 written before", s.Read)
		}
		t.Logf("read %d letters while more kept arriving", s.Read)
	case <-time.After(20 * time.Second):
		t.Fatal("the scan did not end while letters kept arriving")
	}
}

func TestScanOfAMissingTopic(t *testing.T) {
	brokers := testkafka.Start(t, 1, "rows")
	_, err := Scan(context.Background(), ScanOptions{Brokers: brokers, Topic: "rows.dlq", ReadTimeout: 2 * time.Second}, Filter{})
	if err == nil || !strings.Contains(err.Error(), "rows.dlq") {
		t.Errorf("Scan of a missing topic = %v, want an error naming it", err)
	}
}
