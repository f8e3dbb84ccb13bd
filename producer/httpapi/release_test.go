package httpapi

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/producer/upload"
)

// stuckParser holds the first parse after it is armed until the parse's
// context ends, as a parse that checks its context does; other parses go
// to the real parser.
type stuckParser struct {
	real    upload.Parser
	armed   atomic.Bool
	entered chan struct{}
	ended   chan error // the stuck parse's context error
}

func (p *stuckParser) Parse(ctx context.Context, r io.Reader) (*excel.Sheet, error) {
	if !p.armed.CompareAndSwap(true, false) {
		return p.real.Parse(ctx, r)
	}
	p.entered <- struct{}{}
	<-ctx.Done()
	p.ended <- ctx.Err()
	return nil, ctx.Err()
}

// TestSlotsComeBackWhenTheRequestEnds: every slot a handler takes comes
// back when its request ends.
// Seller A's upload, check or page check is stuck in its parse when A's
// client goes away; with a single upload slot, seller B's upload is served
// at once, and A's parse saw its context end.
func TestSlotsComeBackWhenTheRequestEnds(t *testing.T) {
	env := newEnv(t, nil, upload.WriterOptions{})
	s := &Server{Uploader: env.up, Auth: Auth{Secret: secret}, Sessions: NewRedisSessions(testredis.Start(t).Client()), MaxUploads: 1}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	e := &sessionEnv{httpEnv: &httpEnv{env: env, srv: srv}, s: s}
	p := &stuckParser{real: e.up.Parser, entered: make(chan struct{}, 1), ended: make(chan error, 1)}
	e.up.Parser = p
	page, csrf := e.signIn(t, "seller-a")
	for i, tc := range []struct {
		name, path string
		client     *http.Client
		bearer     bool
		fields     map[string]string
	}{
		{"API upload", "/v1/uploads", http.DefaultClient, true, nil},
		{"API check", "/v1/uploads?dry_run=true", http.DefaultClient, true, nil},
		{"page check", "/upload/check", page, false, map[string]string{"csrf_token": csrf}},
		{"page upload", "/upload", page, false, map[string]string{"csrf_token": csrf}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The previous case's upload gives its slot back when its
			// handler returns, which can be just after its client read the
			// answer: A tries again while the only slot is busy.
			var cancel context.CancelFunc
			var done chan error
			deadline := time.Now().Add(3 * time.Second)
			for entered := false; !entered; {
				var ctx context.Context
				ctx, cancel = context.WithCancel(context.Background())
				defer cancel()
				p.armed.Store(true)
				ct, body := multipartBody(t, "file", xlsx(t, fmt.Sprintf("a-%d", i), validRows(3)...), tc.fields)
				req, _ := http.NewRequestWithContext(ctx, "POST", e.srv.URL+tc.path, body)
				req.Header.Set("Content-Type", ct)
				if tc.bearer {
					req.Header.Set("Authorization", "Bearer "+token(t, "seller-a"))
				}
				done = make(chan error, 1)
				go func() {
					resp, err := tc.client.Do(req)
					if err == nil {
						resp.Body.Close()
						err = &answered{resp.StatusCode}
					}
					done <- err
				}()
				select {
				case <-p.entered:
					entered = true
				case err := <-done:
					var a *answered
					if errors.As(err, &a) && a.status == http.StatusServiceUnavailable && time.Now().Before(deadline) {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					t.Fatalf("A's request ended before its parse began: %v", err)
				case <-time.After(10 * time.Second):
					t.Fatal("A's parse did not begin within 10 s")
				}
			}
			cancel() // A's client goes away mid-parse
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("A's request: %v, want cancelled by the client", err)
			}
			select {
			case err := <-p.ended:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("A's parse ended with %v, want its context cancelled", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("A's parse was not cancelled within 5 s of A's client going away")
			}
			// A's parse has ended, but its handler may still be on its way
			// out: B's upload may find the slot busy for that moment, and
			// must be served within the bound below.
			start := time.Now()
			var resp *http.Response
			var b []byte
			for {
				ct, body := multipartBody(t, "file", xlsx(t, fmt.Sprintf("b-%d", i), validRows(2)...), nil)
				resp, b = e.do(t, "POST", "/v1/uploads", token(t, "seller-b"), ct, body)
				if resp.StatusCode != http.StatusServiceUnavailable || time.Since(start) > 3*time.Second {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("B's upload after A went away: %d %s, want 201 (the only upload slot is free)", resp.StatusCode, b)
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("B's upload took %s, want well under 3 s", took)
			}
		})
	}
}

// answered is a request that got an answer (when the test wanted none yet).
type answered struct{ status int }

func (a *answered) Error() string { return fmt.Sprintf("answered %d", a.status) }

// manyAttributes is a valid 5-row workbook whose docProps/app.xml holds one
// element with n distinct attributes: a parse that checks for duplicate
// attributes in quadratic time runs on far past its timeout on it.
func manyAttributes(t *testing.T, n int) []byte {
	t.Helper()
	src := xlsx(t, "attributes", validRows(5)...)
	zr, err := zip.NewReader(bytes.NewReader(src), int64(len(src)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		w, err := zw.Create(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name == "docProps/app.xml" {
			var b strings.Builder
			b.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` +
				`<Properties xmlns="http://schemas.openxmlformats.org/officeDocument/2006/extended-properties"><Application `)
			for i := range n {
				fmt.Fprintf(&b, `a%d="x" `, i)
			}
			b.WriteString(`>Microsoft Excel</Application></Properties>`)
			io.WriteString(w, b.String())
			continue
		}
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(w, r)
		r.Close()
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestAHostileParseDoesNotKeepTheParser: a file whose parse runs out of
// time gives back its parser as well as its HTTP slot (a parse that ran on
// would leave another seller's 5-row upload refused "waiting for a free
// parser"). With one parser and a parse
// timeout of 300 ms, A's hostile file is answered within about the timeout
// and B's upload right after it is served. (The parser's own part, in
// package excel, is that the parse stops or never takes that long.)
func TestAHostileParseDoesNotKeepTheParser(t *testing.T) {
	h, _ := limitedServer(t, &Server{MaxUploads: 2})
	h.up.Parser = excel.NewParser(excel.Options{ParseTimeout: 300 * time.Millisecond, MaxConcurrent: 1})
	start := time.Now()
	ct, body := multipartBody(t, "file", manyAttributes(t, 40000), nil)
	resp, _ := h.do(t, "POST", "/v1/uploads", token(t, "seller-a"), ct, body)
	t.Logf("A's file of 40,000 attributes: %d after %s", resp.StatusCode, time.Since(start).Round(time.Millisecond))
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("A's upload was answered after %s, want within about the parse timeout (300 ms)", took)
	}
	start = time.Now()
	ct, body = multipartBody(t, "file", xlsx(t, "b", validRows(5)...), nil)
	resp, b := h.do(t, "POST", "/v1/uploads", token(t, "seller-b"), ct, body)
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("B's 5-row upload right after A's: %d %s, want 201", resp.StatusCode, b)
	}
	t.Logf("B's upload: %d after %s", resp.StatusCode, time.Since(start).Round(time.Millisecond))
}

// An event stream's slot comes back when its client goes away: with one
// stream per seller, the seller's next stream opens at once.
func TestStreamSlotComesBackWhenTheClientGoes(t *testing.T) {
	h, _ := limitedServer(t, &Server{MaxStreamsPerSeller: 1})
	tok := token(t, "seller-a")
	ct, body := multipartBody(t, "file", xlsx(t, "stream", validRows(2)...), nil)
	resp, b := h.do(t, "POST", "/v1/uploads", tok, ct, body)
	var up UploadResponse
	if err := json.Unmarshal(b, &up); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	open := func(ctx context.Context) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, "GET", h.srv.URL+"/v1/uploads/"+up.UploadID+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := open(ctx)
	if first.StatusCode != http.StatusOK {
		t.Fatalf("first stream: %d", first.StatusCode)
	}
	if second := open(context.Background()); second.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second stream while the first is open: %d, want 429", second.StatusCode)
	} else {
		second.Body.Close()
	}
	cancel()
	first.Body.Close()
	start := time.Now()
	var next *http.Response
	testwait.For(t, 5*time.Second, "a new stream after the first one's client went away", func() bool {
		next = open(context.Background())
		if next.StatusCode != http.StatusOK {
			next.Body.Close()
			return false
		}
		return true
	})
	next.Body.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the stream slot came back %s after the client went away, want at once", took)
	}
}
