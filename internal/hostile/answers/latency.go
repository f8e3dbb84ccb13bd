package answers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Request builds one request anew (a body can be read once).
type Request func(ctx context.Context) (*http.Request, error)

// Post is a request posting data as the form field "file" to url, as a
// seller's bearer token; header are more header names and values.
func Post(url, token, fileName string, data []byte, header ...string) Request {
	return func(ctx context.Context) (*http.Request, error) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		fw, err := mw.CreateFormFile("file", fileName)
		if err != nil {
			return nil, err
		}
		fw.Write(data)
		mw.Close()
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &body)
		if err != nil {
			return nil, err
		}
		r.Header.Set("Content-Type", mw.FormDataContentType())
		r.Header.Set("Authorization", "Bearer "+token)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		return r, nil
	}
}

// Get is a GET of url as a seller's bearer token.
func Get(url, token string, header ...string) Request {
	return func(ctx context.Context) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		r.Header.Set("Authorization", "Bearer "+token)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		return r, nil
	}
}

// Latency is what the other seller saw.
type Latency struct {
	Requests int           `json:"requests"`
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
	Max      time.Duration `json:"max_ns"`
	// Hostile counts the hostile requests answered meanwhile.
	Hostile int `json:"hostile_requests"`
	// Failed counts the other seller's requests not answered 2xx/3xx.
	Failed int `json:"failed"`
}

// OtherSeller sends hostile from `at` clients at once, each again as soon
// as it is answered, and meanwhile the other seller's normal requests one
// after another, in turn, every pause, for d: the other seller's
// latencies are what a seller sees while another's worst file is checked
// (with at 0, what the seller sees alone).
func OtherSeller(ctx context.Context, c *http.Client, hostile Request, at int, normal []Request, pause, d time.Duration) (Latency, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var res Latency
	send := func(req Request) (int, error) {
		r, err := req(ctx)
		if err != nil {
			return 0, err
		}
		resp, err := c.Do(r)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	for range at {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := send(hostile); err == nil {
					mu.Lock()
					res.Hostile++
					mu.Unlock()
				}
			}
		}()
	}
	// The hostile requests start first: the other seller's come into
	// their work.
	time.Sleep(pause)
	var lat []time.Duration
	var firstErr error
	for i := 0; ctx.Err() == nil; i++ {
		t0 := time.Now()
		code, err := send(normal[i%len(normal)])
		if ctx.Err() != nil {
			break // cut off by the end, not slow
		}
		lat = append(lat, time.Since(t0))
		if err != nil || code >= 400 {
			res.Failed++
			if firstErr == nil {
				firstErr = fmt.Errorf("the other seller's request %d: %d %v", i%len(normal), code, err)
			}
		}
		time.Sleep(pause)
	}
	cancel()
	wg.Wait()
	if len(lat) == 0 {
		return res, fmt.Errorf("the other seller sent no request in %v", d)
	}
	slices.Sort(lat)
	res.Requests = len(lat)
	res.P50 = lat[len(lat)/2]
	res.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	res.Max = lat[len(lat)-1]
	return res, firstErr
}
