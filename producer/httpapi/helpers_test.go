package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testsheet"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

type sheetRow = testsheet.Row

func xlsx(t testing.TB, salt string, rows ...sheetRow) []byte {
	return testsheet.XLSX(t, salt, rows...)
}

func validRows(n int) []sheetRow { return testsheet.Valid(n) }

type env struct {
	brokers []string
	store   *uploadstatus.Store
	up      *upload.Uploader
	writer  *kafka.Writer
}

const topic = bulkreg.DefaultTopic

func newEnv(t testing.TB, brokers []string, wo upload.WriterOptions) *env {
	t.Helper()
	if brokers == nil {
		brokers = testkafka.Start(t, 3, topic)
	}
	wo.Brokers, wo.Topic = brokers, topic
	if wo.WriteTimeout == 0 {
		wo.WriteTimeout = 2 * time.Second
	}
	w, err := upload.NewWriter(wo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	store := uploadstatus.New(testredis.Start(t).Client(), time.Hour)
	return &env{brokers: brokers, store: store, writer: w, up: &upload.Uploader{
		Parser: excel.NewParser(excel.Options{}), Writer: w, Statuses: store, Index: store,
		PublishTimeout: 10 * time.Second, StaleAfter: time.Minute,
	}}
}

// kcatMessage is one line of `kcat -J`.
type kcatMessage struct {
	Topic     string  `json:"topic"`
	Partition int     `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Payload   string  `json:"payload"`
}

// consume reads every message of the topic with kcat, an independent Kafka
// client: -e exits once the end of every partition is reached.
func consume(t testing.TB, brokers []string) []kcatMessage {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed; run `make deps` (Debian package kcat)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", "-C", "-b", strings.Join(brokers, ","), "-t", topic, "-o", "beginning", "-e", "-J", "-q")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v: %s", err, stderr.String())
	}
	var msgs []kcatMessage
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m kcatMessage
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("kcat line %q: %v", line, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}
