package upload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// TestFixtures sends the checked-in fixtures through the uploader: a file
// refused whole publishes nothing and records nothing.
func TestFixtures(t *testing.T) {
	e := newEnv(t, nil, WriterOptions{})
	ctx := context.Background()
	cases := []struct {
		file      string
		published int
		refused   string // FileError code
	}{
		{"valid-500.xlsx", 500, ""},
		{"korean-headers.xlsx", -1, ""},
		{"rows-501.xlsx", 0, "too_many_rows"},
		{"missing-column.xlsx", 0, "missing_column"},
		{"zip-bomb.xlsx", 0, "too_large"},
		{"truncated.xlsx", 0, "damaged"},
		{"not-xlsx.xlsx", 0, "not_xlsx"},
	}
	total := 0
	for _, c := range cases {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.up.Upload(ctx, Request{SellerID: "fixtures", FileName: c.file, Data: data})
		if c.refused != "" {
			var fe *excel.FileError
			if !errors.Is(err, ErrRefused) || !errors.As(err, &fe) {
				t.Errorf("%s: err = %v, want the file refused", c.file, err)
				continue
			}
			if fe.Code != c.refused {
				t.Errorf("%s: refused as %q, want %q", c.file, fe.Code, c.refused)
			}
			if _, err := e.store.Get(ctx, res.UploadID); !errors.Is(err, uploadstatus.ErrNotFound) {
				t.Errorf("%s: a refused file was recorded (%v)", c.file, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if c.published >= 0 && res.Published != c.published {
			t.Errorf("%s: %d published, want %d", c.file, res.Published, c.published)
		}
		if res.Published == 0 {
			t.Errorf("%s: nothing published", c.file)
		}
		total += res.Published
	}
	if n := len(consume(t, e.brokers)); n != total {
		t.Errorf("topic holds %d messages, want %d", n, total)
	}
}

// TestMissingTopicIsNotCreated: the writer never creates the topic; an
// upload to a topic that does not exist fails and can be sent again.
func TestMissingTopicIsNotCreated(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "other-topic"), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := newEnv(t, c.ListenAddrs(), WriterOptions{MaxAttempts: 1, WriteTimeout: 500 * time.Millisecond})
	e.up.PublishTimeout = 3 * time.Second
	_, err = e.up.Upload(context.Background(), Request{SellerID: "s", Data: xlsx(t, "missing-topic", validRows(2)...)})
	if !errors.Is(err, ErrPublish) {
		t.Fatalf("upload to a missing topic: %v, want ErrPublish", err)
	}
	t.Logf("answer: %v", err)
	conn, err := kafka.Dial("tcp", c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if p.Topic == topic {
			t.Errorf("the upload created topic %s", topic)
		}
	}
}
