package registryclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rawServer answers its first request with answer, written byte for byte,
// then every further one with a plain 201; closeAfter ends the connection
// after the first answer. It counts the
// connections it accepts.
func rawServer(t *testing.T, answer string, closeAfter bool) (url string, opened *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	opened = new(atomic.Int64)
	var served atomic.Int64
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			opened.Add(1)
			go func() {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if served.Add(1) > 1 {
						_, _ = io.WriteString(nc, "HTTP/1.1 201 Created\r\nContent-Length: 19\r\n\r\n{\"product_id\":\"p2\"}")
						continue
					}
					_, _ = io.WriteString(nc, answer)
					if closeAfter {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), opened
}

// Every shape an HTTP/1.x server may give an answer in, written by hand so
// that what net/http's server would never send is covered too: each is read
// as net/http would, and the connection is kept only when the answer's end
// is certain.
func TestDirectCallReadsEveryAnswerShape(t *testing.T) {
	long := `{"product_id":"p1","pad":"` + strings.Repeat("x", 70<<10) + `"}`
	tests := []struct {
		name       string
		answer     string
		closeAfter bool
		class      Class
		status     int
		product    string
		errHas     string
		reused     bool
		retryAfter time.Duration
	}{
		{name: "content length", answer: "HTTP/1.1 201 Created\r\nContent-Length: 19\r\n\r\n{\"product_id\":\"p1\"}",
			class: Registered, status: 201, product: "p1", reused: true},
		{name: "bare LF line ends", answer: "HTTP/1.1 200 OK\nContent-Length: 19\n\n{\"product_id\":\"p1\"}",
			class: Replayed, status: 200, product: "p1", reused: true},
		{name: "chunked with a trailer", answer: "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"pro\r\ne\r\nduct_id\":\"p1\"}\r\n0\r\nX-Trailer: 1\r\n\r\n",
			class: Registered, status: 201, product: "p1", reused: true},
		{name: "chunked beside a length", answer: "HTTP/1.1 201 Created\r\nContent-Length: 3\r\nTransfer-Encoding: Chunked\r\n\r\n13\r\n{\"product_id\":\"p1\"}\r\n0\r\n\r\n",
			class: Registered, status: 201, product: "p1", reused: true},
		{name: "the same length twice", answer: "HTTP/1.1 201 Created\r\nContent-Length: 19\r\ncontent-length: 19\r\n\r\n{\"product_id\":\"p1\"}",
			class: Registered, status: 201, product: "p1", reused: true},
		{name: "HTTP/1.0 to its close", answer: "HTTP/1.0 201 Created\r\n\r\n{\"product_id\":\"p1\"}", closeAfter: true,
			class: Registered, status: 201, product: "p1", reused: false},
		{name: "HTTP/1.0 keep-alive", answer: "HTTP/1.0 201 Created\r\nConnection: Keep-Alive\r\nContent-Length: 19\r\n\r\n{\"product_id\":\"p1\"}",
			class: Registered, status: 201, product: "p1", reused: true},
		{name: "Connection: close among tokens", answer: "HTTP/1.1 201 Created\r\nConnection: upgrade, CLOSE\r\nContent-Length: 19\r\n\r\n{\"product_id\":\"p1\"}",
			class: Registered, status: 201, product: "p1", reused: false},
		{name: "two informational answers first", answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 19\r\n\r\n{\"product_id\":\"p1\"}",
			class: Registered, status: 201, product: "p1", reused: true},
		{name: "a header line longer than the read buffer", answer: "HTTP/1.1 201 Created\r\nSet-Cookie: " + strings.Repeat("c", 10<<10) + "\r\nContent-Length: 19\r\n\r\n{\"product_id\":\"p1\"}",
			class: Registered, status: 201, product: "p1", reused: true},
		{name: "a 429 whose Retry-After is folded", answer: "HTTP/1.1 429 Too Many Requests\r\nretry-after:\r\n 7\r\nX-RateLimit-Scope: seller\r\nContent-Length: 2\r\n\r\n{}",
			class: RateLimited, status: 429, reused: true, retryAfter: 7 * time.Second},
		{name: "no body and no length on 1.1", answer: "HTTP/1.1 503 Service Unavailable\r\n\r\nlater", closeAfter: true,
			class: Transient, status: 503, reused: false},
		{name: "longer than 64 KB", answer: "HTTP/1.1 201 Created\r\nContent-Length: " + itoa(len(long)) + "\r\n\r\n" + long,
			class: Transient, status: 201, reused: false},
		{name: "chunked longer than 64 KB", answer: "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n" + hexLen(len(long)) + "\r\n" + long + "\r\n0\r\n\r\n",
			class: Transient, status: 201, reused: false},
		{name: "204", answer: "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
			class: Transient, status: 204, reused: true},
		{name: "two different lengths", answer: "HTTP/1.1 201 Created\r\nContent-Length: 19\r\nContent-Length: 20\r\n\r\n{\"product_id\":\"p1\"}",
			class: Transient, errHas: "two different Content-Lengths", reused: false},
		{name: "a coding it cannot read", answer: "HTTP/1.1 201 Created\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
			class: Transient, errHas: "transfer coding", reused: false},
		{name: "a signed length", answer: "HTTP/1.1 201 Created\r\nContent-Length: +19\r\n\r\n{\"product_id\":\"p1\"}",
			class: Transient, errHas: "bad Content-Length", reused: false},
		{name: "bytes past the answer", answer: "HTTP/1.1 201 Created\r\nContent-Length: 19\r\n\r\n{\"product_id\":\"p1\"}HTTP/1.1 201 Created\r\n",
			class: Registered, status: 201, product: "p1", reused: false},
		{name: "not HTTP/1", answer: "HTTP/2 201 Created\r\n\r\n", closeAfter: true,
			class: Transient, errHas: "answered in a form bulkreg cannot read as HTTP/1.1: Post", reused: false},
		{name: "not HTTP at all", answer: "SSH-2.0-OpenSSH_9.6\r\n", closeAfter: true,
			class: Transient, errHas: "cannot read as HTTP/1.1", reused: false},
		{name: "a status of two digits", answer: "HTTP/1.1 20 Created\r\n\r\n", closeAfter: true,
			class: Transient, errHas: "malformed status line", reused: false},
		{name: "a field name with a space", answer: "HTTP/1.1 201 Created\r\nContent Length: 19\r\n\r\n", closeAfter: true,
			class: Transient, errHas: "malformed header line", reused: false},
		{name: "six informational answers", answer: strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 6) + "HTTP/1.1 201 Created\r\nContent-Length: 19\r\n\r\n{\"product_id\":\"p1\"}",
			class: Transient, errHas: "unexpected 100", reused: false},
		{name: "101", answer: "HTTP/1.1 101 Switching Protocols\r\n\r\n", closeAfter: true,
			class: Transient, errHas: "unexpected 101", reused: false},
		{name: "a header larger than 1 MiB", answer: "HTTP/1.1 201 Created\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("p", 1000)+"\r\n", 1100) + "\r\n", closeAfter: true,
			class: Transient, errHas: "larger than 1 MiB", reused: false},
		{name: "cut in the header", answer: "HTTP/1.1 201 Created\r\nContent-Le", closeAfter: true,
			class: Transient, errHas: "closed the connection before answering", reused: false},
		{name: "cut in the chunks", answer: "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n13\r\n{\"product", closeAfter: true,
			class: Transient, status: 201, errHas: "could not be read", reused: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, opened := rawServer(t, tt.answer, tt.closeAfter)
			c := mustNew(t, Options{BaseURL: url})
			st := syncTransportOf(t, c)
			if c.direct != st {
				t.Fatal("the client does not call through its synchronous transport directly")
			}
			res := c.Register(context.Background(), "s1", "k1", product)
			if res.Class != tt.class || res.Status != tt.status || res.ProductID != tt.product {
				t.Fatalf("%v %d %q (%v), want %v %d %q", res.Class, res.Status, res.ProductID, res.Err, tt.class, tt.status, tt.product)
			}
			if tt.errHas != "" && (res.Err == nil || !strings.Contains(res.Err.Error(), tt.errHas)) {
				t.Errorf("error %v, want it to say %q", res.Err, tt.errHas)
			}
			if tt.retryAfter != 0 && res.RetryAfter != tt.retryAfter {
				t.Errorf("Retry-After %v, want %v", res.RetryAfter, tt.retryAfter)
			}
			if open, idle := st.pool(); tt.reused != (open == 1 && idle == 1) || open != idle {
				t.Errorf("after the call: %d open, %d idle (reused: %v)", open, idle, tt.reused)
			}
			if res := c.Register(context.Background(), "s1", "k2", product); res.Class != Registered || res.ProductID != "p2" {
				t.Fatalf("the next call: %v %q %v", res.Class, res.ProductID, res.Err)
			}
			want := int64(2)
			if tt.reused {
				want = 1
			}
			if n := opened.Load(); n != want {
				t.Errorf("%d connections for two calls, want %d", n, want)
			}
		})
	}
}

// The request is the contract's, byte for byte what a server parses, and a
// key that would break the header makes no call.
func TestDirectCallRequest(t *testing.T) {
	got := make(chan *http.Request, 2)
	bodies := make(chan string, 2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		br := bufio.NewReader(nc)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			b, _ := io.ReadAll(req.Body)
			got <- req
			bodies <- string(b)
			_, _ = io.WriteString(nc, "HTTP/1.1 201 Created\r\nContent-Length: 19\r\n\r\n{\"product_id\":\"p1\"}")
		}
	}()
	c := mustNew(t, Options{BaseURL: "http://" + ln.Addr().String() + "/api%20v/", AuthHeader: "X-Api-Key: secret", AllowInsecureAuth: true})
	if res := c.Register(context.Background(), "Seller_1-a", "up:17", product); res.Class != Registered {
		t.Fatalf("%v %v", res.Class, res.Err)
	}
	req := <-got
	if req.Method != http.MethodPost || req.URL.EscapedPath() != "/api%20v/v1/sellers/Seller_1-a/products" || req.Host != ln.Addr().String() || req.ProtoMinor != 1 {
		t.Errorf("request %s %s host %q proto %s", req.Method, req.URL.EscapedPath(), req.Host, req.Proto)
	}
	for h, want := range map[string]string{"Content-Type": "application/json", "Accept": "application/json", "Idempotency-Key": "up:17", "X-Api-Key": "secret", "Content-Length": itoa(len(<-bodies))} {
		if req.Header.Get(h) != want {
			t.Errorf("header %s = %q, want %q", h, req.Header.Get(h), want)
		}
	}
	for _, key := range []string{"up:1\r\nX-Evil: 1", "up:\x00", "up:\x7f"} {
		res := c.Register(context.Background(), "s", key, product)
		if res.Class != Permanent || res.Err == nil || !strings.Contains(res.Err.Error(), "no call made") {
			t.Errorf("key %q: %v %v, want a permanent refusal with no call", key, res.Class, res.Err)
		}
	}
	select {
	case req := <-got:
		t.Errorf("a refused key made a call: %v", req.Header)
	case <-time.After(50 * time.Millisecond):
	}
}

// readAnswer never accepts what net/http refuses, and reads what it accepts
// as net/http does: the same status, the same body, the same end.
func FuzzReadAnswer(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 201 Created\r\nContent-Length: 19\r\n\r\n{\"product_id\":\"p1\"}",
		"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nT: 1\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nrest",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many\r\nRetry-After:\r\n 3\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 201 x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, _, err := readAnswer(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return
		}
		if a.status < 200 || a.status > 599 || len(a.body) > maxAnswer {
			t.Fatalf("status %d, %d bytes of body", a.status, len(a.body))
		}
		br := bufio.NewReader(bytes.NewReader(raw))
		var resp *http.Response
		for n := 0; ; n++ {
			resp, err = http.ReadResponse(br, &http.Request{Method: http.MethodPost})
			if err != nil {
				t.Fatalf("read %d (%q), net/http refuses it: %v", a.status, a.body, err)
			}
			if resp.StatusCode >= 200 || n == max1xx {
				break
			}
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		if err != nil {
			t.Fatalf("read %d (%q), net/http cannot read its body: %v", a.status, a.body, err)
		}
		if resp.StatusCode != a.status || !bytes.Equal(body, a.body) {
			t.Fatalf("read %d %q, net/http %d %q", a.status, a.body, resp.StatusCode, body)
		}
		samePlainProductID(t, a.body)
	})
}

// samePlainProductID fails when plainProductID reads a body differently
// from encoding/json.
func samePlainProductID(t *testing.T, raw []byte) {
	t.Helper()
	id, plain := plainProductID(raw)
	if !plain {
		return
	}
	var v struct {
		ProductID string `json:"product_id"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.ProductID != id {
		t.Fatalf("plainProductID(%q) = %q; encoding/json: %q, %v", raw, id, v.ProductID, err)
	}
}

// The plain shape of a success is read as encoding/json reads it, and
// every other shape is left to encoding/json.
func TestPlainProductID(t *testing.T) {
	for _, tc := range []struct {
		raw   string
		id    string
		plain bool
	}{
		{`{"product_id":"p-1"}`, "p-1", true},
		{`{"product_id":""}`, "", true},
		{`{"product_id":"a\"b"}`, "", false},
		{`{"product_id":"상품"}`, "", false},
		{`{"product_id": "p-1"}`, "", false},
		{`{"product_id":"p-1","x":1}`, "", false},
		{`{"product_id":"p-7","seller_sku":"SKU-1"}`, "p-7", true}, // the contract's answer
		{`{"seller_sku":"SKU-1","product_id":"p-7"}`, "p-7", true},
		{`{"product_id":"p-1","product_id":"p-2"}`, "p-2", true}, // encoding/json keeps the last
		{`{"seller_sku":"SKU-1"}`, "", true},
		{`{}`, "", true},
		{`{"Product_ID":"p-1"}`, "", false}, // encoding/json matches keys regardless of case
		{`{"product_id":"p-1","PRODUCT_ID":"p-2"}`, "", false},
		{`{"product_id":"p-1",}`, "", false},
		{`{"product_id":"p-1",,"a":"b"}`, "", false},
		{`{"product_id":"p-1""a":"b"}`, "", false},
		{`{"product_id":"p-1","a":{"b":"c"}}`, "", false},
		{`{"product_id":"p-1","a":"b\"c"}`, "", false},
		{`{"product_id""p-1"}`, "", false},
		{`{"product_id":}`, "", false},
		{`{,}`, "", false},
		{`{"product_id":"p"}"}`, "", false},
		{`{"product_id":"}`, "", false},
		{` {"product_id":"p-1"}`, "", false},
	} {
		id, plain := plainProductID([]byte(tc.raw))
		if id != tc.id || plain != tc.plain {
			t.Errorf("plainProductID(%s) = %q, %v; want %q, %v", tc.raw, id, plain, tc.id, tc.plain)
		}
		samePlainProductID(t, []byte(tc.raw))
	}
}

// FuzzPlainProductID: whatever plainProductID takes as plain, encoding/json
// reads to the same product id.
func FuzzPlainProductID(f *testing.F) {
	for _, seed := range []string{`{"product_id":"p-1","seller_sku":"S"}`, `{"product_id":"a","product_id":"b"}`, `{}`, `{"Product_id":"x"}`, `{"a":"b",}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { samePlainProductID(t, raw) })
}

func itoa(n int) string { return strconv.Itoa(n) }

func hexLen(n int) string { return strconv.FormatInt(int64(n), 16) }
