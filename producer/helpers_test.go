package producer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

var header = []string{"seller_sku", "name", "category_code", "price", "stock", "brand", "image_url", "description", "shipping_fee"}

// sheetRow is one data row; price is a string so a test can make it invalid.
type sheetRow struct {
	sku, price string
}

// xlsx builds a workbook with the English header and the given rows, the
// way a seller's file looks. salt goes into a description so files with the
// same rows can differ.
func xlsx(t testing.TB, salt string, rows ...sheetRow) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	sh := f.GetSheetName(0)
	h := make([]any, len(header))
	for i, c := range header {
		h[i] = c
	}
	if err := f.SetSheetRow(sh, "A1", &h); err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		vals := []any{r.sku, "상품 " + r.sku, "50000123", r.price, 10, "브랜드", "https://img.example.com/" + r.sku + ".jpg", "desc " + salt, 0}
		if n, err := strconv.Atoi(r.price); err == nil {
			vals[3] = n
		}
		if err := f.SetSheetRow(sh, "A"+strconv.Itoa(i+2), &vals); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func validRows(n int) []sheetRow {
	rows := make([]sheetRow, n)
	for i := range rows {
		rows[i] = sheetRow{sku: fmt.Sprintf("SKU-%03d", i+1), price: strconv.Itoa(1000 + i)}
	}
	return rows
}

type env struct {
	brokers []string
	store   *uploadstatus.Store
	up      *Uploader
	writer  *kafka.Writer
}

const topic = bulkreg.DefaultTopic

func newEnv(t testing.TB, brokers []string, wo WriterOptions) *env {
	t.Helper()
	if brokers == nil {
		brokers = testkafka.Start(t, 3, topic)
	}
	wo.Brokers, wo.Topic = brokers, topic
	if wo.WriteTimeout == 0 {
		wo.WriteTimeout = 2 * time.Second
	}
	w, err := NewWriter(wo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	store := uploadstatus.New(testredis.Start(t).Client(), time.Hour)
	return &env{brokers: brokers, store: store, writer: w, up: &Uploader{
		Parser: excel.NewParser(excel.Options{}), Writer: w, Status: store,
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

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func itoa(n int) string { return strconv.Itoa(n) }
