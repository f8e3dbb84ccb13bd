package httpapi

import (
	"io"
	"net/http"
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

// pageDo sends a request as a browser reading lang would (lang and
// contentType are left out when empty) and returns the answer with its
// body, read and closed.
func pageDo(t testing.TB, c *http.Client, method, url, lang, contentType string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if lang != "" {
		req.Header.Set("Accept-Language", lang)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, url, err)
	}
	return resp, b
}
