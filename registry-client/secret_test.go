package registryclient

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/messages"
)

const (
	testUser     = "svc"
	testPassword = "S3cr3tPw"
)

// withCredentials is raw (http://host:port) with the user and password in it.
func withCredentials(raw string) string {
	u, _ := url.Parse(raw)
	u.User = url.UserPassword(testUser, testPassword)
	return u.String()
}

// transports are the two ways a call goes: the synchronous transport the
// client builds, and net/http's client (a proxy in the environment, or a
// caller's HTTPClient).
var transports = []struct {
	name string
	http func() *http.Client
}{
	{"direct", func() *http.Client { return nil }},
	{"net/http", func() *http.Client { return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()} }},
}

// Every kind of failure is told to operators without the URL's password
// (and to sellers without any URL or address at all), on both transports.
// Only the timeout case has a short timeout: every other failure comes at
// once, and a generous timeout keeps a busy machine's slow handshake from
// reading as a timeout. The secrets are checked whatever the class.
func TestErrorsNeverHoldTheRegistryPassword(t *testing.T) {
	const (
		shortTimeout    = 300 * time.Millisecond // the timeout case's
		generousTimeout = 30 * time.Second       // every other case's
	)
	type server struct {
		url   string
		close func()
	}
	handler := func(h http.HandlerFunc) func() server {
		return func() server {
			s := httptest.NewServer(h)
			return server{s.URL, s.Close}
		}
	}
	cases := []struct {
		name    string
		start   func() server
		class   Class
		failure Failure
		status  int
	}{
		{"connection refused", func() server {
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			addr := ln.Addr().String()
			ln.Close()
			return server{"http://" + addr, func() {}}
		}, Transient, FailureUnreachable, 0},
		{"timeout", handler(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client leave
			select {
			case <-r.Context().Done():
			case <-time.After(2 * generousTimeout):
			}
		}), Transient, FailureTimeout, 0},
		{"connection closed", handler(func(w http.ResponseWriter, r *http.Request) {
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
		}), Transient, FailureClosed, 0},
		{"not HTTP", func() server {
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						defer c.Close()
						_, _ = bufio.NewReader(c).ReadString('\n')
						_, _ = io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n\r\n")
					}()
				}
			}()
			return server{"http://" + ln.Addr().String(), func() { ln.Close() }}
		}, Transient, FailureUnreadable, 0},
		{"TLS", func() server {
			s := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			s.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
			s.StartTLS()
			return server{s.URL, s.Close}
		}, Transient, FailureTLS, 0},
		{"503", handler(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(503)
			io.WriteString(w, `<html>upstream http://10.1.2.3:8081/v1 down</html>`)
		}), Transient, "", 503},
		{"401", handler(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"code":"unauthorized","message":"bad credentials"}}`)
		}), Misconfigured, "", 401},
		{"404 route", handler(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }), Misconfigured, "", 404},
		{"302", handler(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://svc:"+testPassword+"@elsewhere.example/?token="+testPassword, http.StatusFound)
		}), Misconfigured, "", 302},
		{"422", handler(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(422)
			io.WriteString(w, `{"error":{"code":"invalid_value","message":"price is too high","field":"price"}}`)
		}), Permanent, "", 422},
	}
	for _, tr := range transports {
		for _, tt := range cases {
			t.Run(tr.name+"/"+tt.name, func(t *testing.T) {
				s := tt.start()
				defer s.close()
				base := withCredentials(s.url)
				timeout := generousTimeout
				if tt.failure == FailureTimeout {
					timeout = shortTimeout
				}
				c, err := New(Options{BaseURL: base, Timeout: timeout, AllowInsecureAuth: true, HTTPClient: tr.http()})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				res := c.Register(context.Background(), "seller-1", "u:1", product)
				if res.Err == nil {
					t.Fatalf("class %v status %d failure %q: no error", res.Class, res.Status, res.Failure)
				}
				basic := base64.StdEncoding.EncodeToString([]byte(testUser + ":" + testPassword))
				for _, secret := range []string{testPassword, basic} {
					if msg := res.Err.Error(); strings.Contains(msg, secret) {
						t.Errorf("the operator's error holds %q: %s", secret, msg)
					}
				}
				if res.Class != tt.class || res.Status != tt.status || res.Failure != tt.failure {
					t.Errorf("class %v status %d failure %q err %v, want %v, %d, %q", res.Class, res.Status, res.Failure, res.Err, tt.class, tt.status, tt.failure)
				}
				host := strings.TrimPrefix(strings.TrimPrefix(s.url, "http://"), "https://")
				detail := res.SellerDetail()
				for _, internal := range []string{testPassword, testUser + ":", "http", host, "127.0.0.1", "10.1.2.3", "dial", "tcp"} {
					if strings.Contains(detail, internal) {
						t.Errorf("the seller's detail %q holds %q", detail, internal)
					}
				}
				if detail == "" {
					t.Error("no seller detail")
				}
				t.Logf("operator: %s\nseller: %s", res.Err, detail)
			})
		}
	}
}

// The URL's user and password go to the API as HTTP Basic auth, as net/http
// sends them, and nowhere else: not in the request line, the Host header or
// the body. Registrations and Warm's requests alike, on both transports.
func TestURLCredentialsAreSentAsBasicAuth(t *testing.T) {
	const user, password = "svc", "p@ss:w%rd" // escaped in the URL
	raw := "svc:p%40ss:w%25rd"
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			var mu sync.Mutex
			var auths, leaks []string
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				auths = append(auths, r.Header.Get("Authorization"))
				for _, where := range []string{r.RequestURI, r.Host, string(body)} {
					if strings.Contains(where, "p@ss") || strings.Contains(where, "p%40ss") || strings.Contains(where, "svc") {
						leaks = append(leaks, where)
					}
				}
				mu.Unlock()
				w.WriteHeader(201)
				io.WriteString(w, `{"product_id":"p-1"}`)
			}))
			defer s.Close()
			c, err := New(Options{BaseURL: strings.Replace(s.URL, "http://", "http://"+raw+"@", 1), AllowInsecureAuth: true, HTTPClient: tr.http()})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if n := c.Warm(context.Background(), 2); n != 2 {
				t.Errorf("warm: %d answers, want 2", n)
			}
			for i := range 3 {
				if res := c.Register(context.Background(), "seller-1", "u:"+string(rune('1'+i)), product); res.Class != Registered {
					t.Fatalf("register: %v %v", res.Class, res.Err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(auths) != 5 {
				t.Fatalf("%d requests, want 5", len(auths))
			}
			for i, a := range auths {
				if a != want {
					t.Errorf("request %d: Authorization %q, want %q", i, a, want)
				}
			}
			if len(leaks) > 0 {
				t.Errorf("the credentials are sent outside the Authorization header: %q", leaks)
			}
		})
	}
}

// Credentials in the URL are a credential like the auth header: they need
// https (loopback over plain http only when allowed), and they and an
// Authorization header are not both set. The refusal names the flag and
// never shows the password.
func TestURLCredentialsNeedHTTPS(t *testing.T) {
	for _, tt := range []struct {
		url, header string
		insecure    bool
		want        string // "" ok, else in the error
	}{
		{"https://svc:" + testPassword + "@registry.example.com", "", false, ""},
		{"https://svc@registry.example.com", "", false, ""},
		{"http://svc:" + testPassword + "@registry.example.com", "", false, "--registry-url"},
		{"http://svc:" + testPassword + "@registry.example.com", "", true, "loopback"},
		{"http://svc:" + testPassword + "@127.0.0.1:8081", "", false, "--registry-insecure-auth"},
		{"http://svc:" + testPassword + "@127.0.0.1:8081", "", true, ""},
		{"https://svc:" + testPassword + "@registry.example.com", "X-Api-Key: k-1", false, ""},
		{"https://svc:" + testPassword + "@registry.example.com", "Authorization: Bearer t-1", false, "--registry-auth-header"},
		{"https://registry.example.com/?api_key=" + testPassword, "", false, "query"},
		{"https://registry.example.com/#" + testPassword, "", false, "query"},
	} {
		_, err := New(Options{BaseURL: tt.url, AuthHeader: tt.header, AllowInsecureAuth: tt.insecure})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s (%q, insecure %v): %v", tt.url, tt.header, tt.insecure, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s (%q, insecure %v): err = %v, want one naming %q", tt.url, tt.header, tt.insecure, err, tt.want)
		case err != nil && strings.Contains(err.Error(), testPassword):
			t.Errorf("%s: the error shows the password: %v", tt.url, err)
		}
	}
}

// Every Failure has its own sentence in both languages (the message
// table's call_failed.<failure>), so none reads as the generic "no usable
// answer".
func TestEveryFailureHasItsSentence(t *testing.T) {
	generic := Result{}.SellerDetail()
	for _, f := range []Failure{FailureTimeout, FailureUnreachable, FailureClosed, FailureUnreadable, FailureTLS, FailureCancelled, FailureNotSent} {
		if !messages.Known("call_failed." + string(f)) {
			t.Errorf("the message table has no call_failed.%s", f)
		}
		if d := (Result{Failure: f}).SellerDetail(); d == generic || d == "" {
			t.Errorf("%s: seller detail %q", f, d)
		}
	}
	if got := (Result{Status: 503, Failure: FailureClosed}).SellerDetail(); got != "status 503" {
		t.Errorf("an answer whose body was cut: %q, want its status", got)
	}
}

// An answer that echoes the request's credentials (a debugging proxy's
// error page, an API that quotes the header it refused) does not carry them
// into the operator's error or the seller's message.
func TestEchoedCredentialsAreHidden(t *testing.T) {
	basic := base64.StdEncoding.EncodeToString([]byte(testUser + ":" + testPassword))
	for _, tr := range transports {
		for _, status := range []int{503, 401, 422} {
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status)
				fmt.Fprintf(w, `{"error":{"code":"echo","message":"got %s and X-Api-Key %s (%s)","field":"name"}}`,
					r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), testPassword)
			}))
			c, err := New(Options{BaseURL: withCredentials(s.URL), AuthHeader: "X-Api-Key: key-77d1c0e5", AllowInsecureAuth: true, HTTPClient: tr.http()})
			if err != nil {
				t.Fatal(err)
			}
			res := c.Register(context.Background(), "seller-1", "u:1", product)
			for _, leak := range []string{testPassword, basic, "key-77d1c0e5"} {
				if res.Err == nil || strings.Contains(res.Err.Error(), leak) || strings.Contains(res.Message, leak) {
					t.Errorf("%s %d: err %v, message %q: holds %q", tr.name, status, res.Err, res.Message, leak)
				}
			}
			if !strings.Contains(res.Message, "got Basic xxxxx") {
				t.Errorf("%s %d: message %q, want the rest of the API's words kept", tr.name, status, res.Message)
			}
			c.Close()
			s.Close()
		}
	}
}
