package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/hostile"
	"github.com/bulkreg/bulkreg/internal/hostile/answers"
	"github.com/bulkreg/bulkreg/producer/httpapi"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// worstAnswer is the worst of one figure of one answer kind in one
// language over the corpus, and the file it came from.
type worstAnswer struct {
	Kind     string  `json:"kind"`
	Lang     string  `json:"lang,omitempty"`
	Bytes    int64   `json:"bytes"`
	BytesOf  string  `json:"bytes_file"`
	CPUms    float64 `json:"cpu_ms"`
	CPUOf    string  `json:"cpu_file"`
	RSSMiB   float64 `json:"rss_growth_mib"`
	RSSOf    string  `json:"rss_file"`
	Measured int     `json:"files"`
}

func worstAnswers(all []figures) []worstAnswer {
	by := map[string]*worstAnswer{}
	var keys []string
	for _, f := range all {
		for _, a := range f.Answers {
			if a.Status == 0 {
				continue // the file was refused: no upload to ask about
			}
			k := a.Kind + " " + a.Lang
			w, ok := by[k]
			if !ok {
				w = &worstAnswer{Kind: a.Kind, Lang: a.Lang, Bytes: -1, CPUms: -1, RSSMiB: -1}
				by[k] = w
				keys = append(keys, k)
			}
			w.Measured++
			if a.Bytes > w.Bytes {
				w.Bytes, w.BytesOf = a.Bytes, f.File
			}
			if c := ms(a.CPU); c > w.CPUms {
				w.CPUms, w.CPUOf = c, f.File
			}
			if r := float64(a.RSSGrowth) / (1 << 20); r > w.RSSMiB {
				w.RSSMiB, w.RSSOf = r, f.File
			}
		}
	}
	slices.Sort(keys)
	out := make([]worstAnswer, 0, len(keys))
	for _, k := range keys {
		out = append(out, *by[k])
	}
	return out
}

// newService is the upload service with the production defaults on the
// parent's Redis and Kafka.
func newService(redisAddr string, brokers []string) (*httpapi.Server, func(), error) {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	w, err := upload.NewWriter(upload.WriterOptions{Brokers: brokers, Topic: bulkreg.DefaultTopic, WriteTimeout: 10 * time.Second})
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	store := uploadstatus.New(rdb, 7*24*time.Hour)
	up := &upload.Uploader{Parser: excel.NewParser(excel.Options{}), Writer: w, Statuses: store, Index: store,
		PublishTimeout: 10 * time.Second, StaleAfter: time.Minute}
	return &httpapi.Server{Uploader: up, Auth: httpapi.Auth{Secret: []byte(benchSecret)}}, func() { w.Close(); rdb.Close() }, nil
}

// service measures the answers that do not depend on a file: the template
// download, a request at a time (CPU per request, and again with its
// ETag), and forms of 10 MiB of part headers.
func service(redisAddr string, brokers []string) (map[string]any, error) {
	s, stop, err := newService(redisAddr, brokers)
	if err != nil {
		return nil, err
	}
	defer stop()
	h := s.Handler()
	get := func(etag string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/v1/template.xlsx", nil)
		if etag != "" {
			r.Header.Set("If-None-Match", etag)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	etag := get("").Header().Get("ETag")
	const n = 1000
	perRequest := func(etag string) float64 {
		c0 := hostile.CPU()
		for range n {
			get(etag)
		}
		return float64((hostile.CPU() - c0).Nanoseconds()) / n / 1000
	}
	out := map[string]any{
		"template_cpu_us_per_request":     perRequest(""),
		"template_304_cpu_us_per_request": perRequest(etag),
	}
	tok, err := httpapi.MintToken([]byte(benchSecret), "bench-form", time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	const boundary = "b0undary"
	long := strings.Repeat("a", 1000)
	forms := map[string]func(*bytes.Buffer){
		"one_part_10mib_of_headers": func(b *bytes.Buffer) {
			b.WriteString("--" + boundary + "\r\nContent-Disposition: form-data; name=\"x\"\r\n")
			for b.Len() < 10<<20-2000 {
				b.WriteString("X-H: " + long + "\r\n")
			}
			b.WriteString("\r\nv\r\n")
		},
		"empty_fields_10mib": func(b *bytes.Buffer) {
			for b.Len() < 10<<20 {
				b.WriteString("--" + boundary + "\r\n\r\n\r\n")
			}
		},
	}
	for name, fill := range forms {
		var b bytes.Buffer
		fill(&b)
		b.WriteString("--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.csv\"\r\n\r\nx\r\n--" + boundary + "--\r\n")
		sent := b.Len()
		body := &countingReader{r: &b}
		r := httptest.NewRequest("POST", "/v1/uploads", body)
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
		w := httptest.NewRecorder()
		c0 := hostile.CPU()
		h.ServeHTTP(w, r)
		out["form_"+name] = map[string]any{"bytes_sent": sent, "bytes_read": body.n, "cpu_ms": ms(hostile.CPU() - c0), "status": w.Code}
	}
	return out, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// otherSellerLatency: seller A has the corpus's worst check
// (csv-long-headers-bad-cells.csv's Korean check page: the longest headers that still match, a problem in every field) answered again and again,
// as many at once as a seller may, for d; seller B meanwhile sends normal
// requests over HTTP. B's latencies.
func otherSellerLatency(dir, redisAddr string, brokers []string, d time.Duration) (map[string]any, error) {
	s, stop, err := newService(redisAddr, brokers)
	if err != nil {
		return nil, err
	}
	defer stop()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	worst, err := hostile.Load(dir, "csv-long-headers-bad-cells.csv")
	if err != nil {
		return nil, err
	}
	suffix := fmt.Sprint(time.Now().UnixNano())
	a, err := httpapi.MintToken([]byte(benchSecret), "bench-a-"+suffix, time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	b, err := httpapi.MintToken([]byte(benchSecret), "bench-b-"+suffix, time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	small := smallFile(20, suffix)
	ctx := context.Background()
	req, err := answers.Post(srv.URL+"/v1/uploads", b, "b.csv", small)(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("seller B's upload: %d", resp.StatusCode)
	}
	normal := []answers.Request{
		answers.Get(srv.URL+"/upload", b, "Accept-Language", "ko"),
		answers.Get(srv.URL+"/uploads", b, "Accept-Language", "ko"),
		answers.Get(srv.URL+resp.Header.Get("Location"), b),
		answers.Post(srv.URL+"/v1/uploads?dry_run=true", b, "b.csv", small),
		answers.Post(srv.URL+"/upload/check", b, "b.csv", small, "Accept-Language", "ko", "X-Fragment", "1"),
	}
	hostileCheck := answers.Post(srv.URL+"/upload/check", a, "worst.csv", worst, "Accept-Language", "ko")
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	lat, err := answers.OtherSeller(ctx, c, hostileCheck, httpapi.DefaultMaxUploadsPerSeller, normal, 20*time.Millisecond, d)
	if err != nil {
		return nil, err
	}
	return map[string]any{"seconds": d.Seconds(), "worst_checks_answered": lat.Hostile, "requests": lat.Requests,
		"p50_ms": ms(lat.P50), "p99_ms": ms(lat.P99), "max_ms": ms(lat.Max), "failed": lat.Failed}, nil
}

// smallFile is a seller's normal file: the template's header and n valid
// rows, salt making it a file of its own.
func smallFile(n int, salt string) []byte {
	var b strings.Builder
	b.WriteString(strings.Join(excel.TemplateHeader(), ",") + "\r\n")
	for i := range n {
		fmt.Fprintf(&b, "B-%s-%d,반팔 티셔츠 %d,50000803,%d,10,브랜드,https://img.example.com/b/%d.jpg,설명,0\r\n", salt, i+1, i+1, 9900+i, i+1)
	}
	return []byte(b.String())
}
