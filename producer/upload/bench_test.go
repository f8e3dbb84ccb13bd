package upload

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/bulkreg/bulkreg/excel"
)

// BenchmarkUpload500 measures upload-to-acknowledged for a 500-row file on
// the embedded broker: parse and validate, record the upload in Redis,
// publish every row and wait for the acks from all replicas. Each iteration
// uploads a different file (a duplicate would publish nothing).
func BenchmarkUpload500(b *testing.B) {
	e := newEnv(b, nil, WriterOptions{})
	files := make([][]byte, b.N)
	for i := range files {
		files[i] = xlsx(b, "bench-"+strconv.Itoa(i), validRows(500)...)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := e.up.Upload(ctx, Request{SellerID: "seller-bench", Data: files[i]})
		if err != nil || res.Published != 500 {
			b.Fatalf("upload %d: %+v %v", i, res, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/upload")
}

// BenchmarkPublish500 is the Kafka part alone: 500 rows handed to the
// writer until all are acknowledged.
func BenchmarkPublish500(b *testing.B) {
	e := newEnv(b, nil, WriterOptions{})
	sheet, err := excel.NewParser(excel.Options{}).Parse(context.Background(), bytes.NewReader(xlsx(b, "p", validRows(500)...)))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.up.publish(ctx, "bench-"+strconv.Itoa(i), "seller-bench", sheet.Rows); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse500 parses and validates a 500-row file.
func BenchmarkParse500(b *testing.B) {
	data := xlsx(b, "parse", validRows(500)...)
	p := excel.NewParser(excel.Options{})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sheet, err := p.Parse(ctx, bytes.NewReader(data))
		if err != nil || len(sheet.Rows) != 500 {
			b.Fatal(err)
		}
	}
}
