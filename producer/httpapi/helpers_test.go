package httpapi

import (
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

// consume reads every message of the rows topic with kcat (testkafka.Consume).
func consume(t testing.TB, brokers []string) []testkafka.Message {
	t.Helper()
	return testkafka.Consume(t, brokers, topic)
}
