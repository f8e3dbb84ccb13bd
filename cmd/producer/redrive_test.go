package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/redrive"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

func TestRedriveCommand(t *testing.T) {
	topic := bulkreg.DefaultTopic
	brokers := testkafka.Start(t, 2, topic, bulkreg.DLQTopic(topic))
	rs := testredis.Start(t)
	env := map[string]string{"BULKREG_KAFKA_BROKERS": strings.Join(brokers, ","), "BULKREG_REDIS_ADDRS": rs.Addr}
	ctx := context.Background()
	store := uploadstatus.New(rs.Client(), time.Hour)
	if _, err := store.Create(ctx, uploadstatus.Upload{ID: "up-1", SellerID: "seller-1", Total: 3, Valid: 3}); err != nil {
		t.Fatal(err)
	}
	first := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var letters []kafka.Message
	for row := 1; row <= 3; row++ {
		v, _ := json.Marshal(bulkreg.NewMessage("up-1", "seller-1", row, bulkreg.Product{SellerSKU: "S", Name: "n", CategoryCode: "1", Price: 1, Stock: 1}, first))
		class := "transient"
		if row == 3 {
			class = "rate_limited"
		}
		letters = append(letters, kafka.Message{Key: []byte("seller-1"), Value: v, Headers: []kafka.Header{
			{Key: deadletter.HeaderErrorClass, Value: []byte(class)},
			{Key: deadletter.HeaderErrorMessage, Value: []byte("the registration API answered 503\nService Unavailable")},
			{Key: deadletter.HeaderFirstFailure, Value: []byte(first.Format(time.RFC3339Nano))},
		}})
		if err := store.RecordRow(ctx, "up-1", uploadstatus.RowResult{Row: row, State: uploadstatus.Failed}); err != nil {
			t.Fatal(err)
		}
	}
	// RequireAll: a literal Writer defaults to no acks, and WriteMessages
	// would return before the broker had stored the letters, which the scan
	// would then miss.
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: bulkreg.DLQTopic(topic), BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	if err := w.WriteMessages(ctx, letters...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rowsInTopic := func() int {
		s, err := redrive.Scan(ctx, redrive.ScanOptions{Brokers: brokers, Topic: topic, ReadTimeout: 5 * time.Second}, redrive.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Read
	}

	r := runCLI(env, "redrive", "--dry-run", "--upload", "up-1", "--class", "transient", "--since", "2026-11-23T09:00:00Z")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	field := func(line, i int) string {
		if line >= len(lines) || len(strings.Fields(lines[line])) <= i {
			return ""
		}
		return strings.Fields(lines[line])[i]
	}
	if r.code != exitOK || len(lines) != 3 || field(0, 0) != "UPLOAD" ||
		strings.Join(strings.Fields(lines[1])[:5], " ") != "up-1 1 seller-1 transient "+first.Local().Format(time.RFC3339) ||
		field(2, 1) != "2" || !strings.HasSuffix(lines[1], "the registration API answered 503 Service Unavailable") {
		t.Fatalf("dry run: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "2 rows of 3 dead letters") || !strings.Contains(r.stderr, "dry run: nothing sent") {
		t.Errorf("dry run summary: %s", r.stderr)
	}
	if n := rowsInTopic(); n != 0 {
		t.Fatalf("the dry run published %d rows", n)
	}

	r = runCLI(env, "redrive", "--upload", "up-1", "--class", "transient")
	if r.code != exitOK || strings.Count(r.stdout, "\nup-1") != 2 || !strings.Contains(r.stderr, "2 rows sent to "+topic) {
		t.Fatalf("redrive: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := rowsInTopic(); n != 2 {
		t.Errorf("the rows topic holds %d rows, want 2", n)
	}
	st, err := store.Get(ctx, "up-1")
	if err != nil || st.Failed != 1 || st.Waiting != 2 {
		t.Errorf("status after the redrive: %d failed, %d waiting (%v); want 1, 2", st.Failed, st.Waiting, err)
	}

	r = runCLI(env, "redrive", "--upload", "up-1", "--class", "transient")
	if r.code != exitOK || !strings.Contains(r.stderr, "0 rows sent") || !strings.Contains(r.stderr, "skipped row 1 of upload up-1: the row is waiting") {
		t.Errorf("second redrive: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if n := rowsInTopic(); n != 2 {
		t.Errorf("after the second redrive the rows topic holds %d rows, want still 2", n)
	}

	for _, tc := range []struct{ args, want string }{
		{"--since 2026-11-23", "--since: want a time in RFC 3339"},
		{"--since 1h --until 2h", "--since (" /* 1 h ago is after 2 h ago */},
		{"--scan-timeout 0s", "--scan-timeout must be greater than 0"},
		{"extra", `unexpected argument "extra"`},
	} {
		r := runCLI(env, append([]string{"redrive"}, strings.Fields(tc.args)...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("redrive %s: exit %d, stderr %q; want exit 2 naming %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if r := runCLI(nil, "redrive", "-h"); r.code != exitOK || !strings.Contains(r.stdout, "exit status: 0 ") || !strings.Contains(r.stdout, "-dry-run") {
		t.Errorf("redrive -h: exit %d, stdout %q", r.code, r.stdout)
	}
}
