package registryclient

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/redact"
)

// A proxy's page that is not the contract's JSON reaches Err through
// snippet, which cuts the body at 120 bytes and quotes it with %q: a
// credential cut by the 120-byte end, or one holding a character %q escapes
// (a quote, a backslash), is hidden all the same, so neither its start nor
// its escaped form goes to the logs and the dead-letter headers.
func TestEchoedCredentialsCutOrQuotedAreHidden(t *testing.T) {
	for _, tc := range []struct {
		name, password string
		pad            int // bytes of the page before the echoed header
		leak           func(password, basic string) string
	}{
		{"Basic credentials cut by the 120-byte snippet", "S3cr3tPw-long-enough", 120 - len("Authorization: Basic ") - 16,
			func(_, basic string) string { return basic[:16] }},
		{"password cut by the 120-byte snippet", "S3cr3tPw-long-enough", 120 - len("password=") - 12,
			func(p, _ string) string { return p[:12] }},
		{"password with a quote, escaped by %q", `S3cr"tPw`, 0,
			func(p, _ string) string { return strings.ReplaceAll(p, `"`, `\"`) }},
	} {
		for _, tr := range transports {
			t.Run(tr.name+"/"+tc.name, func(t *testing.T) {
				basic := base64.StdEncoding.EncodeToString([]byte(testUser + ":" + tc.password))
				s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/html")
					w.WriteHeader(http.StatusBadGateway)
					pad := strings.Repeat("x", tc.pad)
					if strings.HasPrefix(tc.name, "password") {
						_, p, _ := r.BasicAuth()
						fmt.Fprintf(w, "%spassword=%s", pad, p)
						return
					}
					fmt.Fprintf(w, "%s%s", pad, "Authorization: "+r.Header.Get("Authorization"))
				}))
				defer s.Close()
				u, _ := url.Parse(s.URL)
				u.User = url.UserPassword(testUser, tc.password)
				c, err := New(Options{BaseURL: u.String(), AllowInsecureAuth: true, HTTPClient: tr.http()})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				res := c.Register(context.Background(), "seller-1", "u:1", product)
				leak := tc.leak(tc.password, basic)
				if res.Err == nil {
					t.Fatal("a 502 without an error")
				}
				if strings.Contains(res.Err.Error(), leak) {
					t.Errorf("Err holds %q of the credential:\n%v", leak, res.Err)
				}
			})
		}
	}
}

// credential is one secret of a client's configuration, how the client is
// given it, and how a server that echoes it finds it in the request.
type credential struct {
	name       string
	password   string // of the URL, "" for none
	authHeader string
	marker     string                       // what an echo writes before the credential
	echo       func(r *http.Request) string // the credential as the server received it
}

func echoedPassword(r *http.Request) string { _, p, _ := r.BasicAuth(); return p }

func credentials() []credential {
	basic := func(r *http.Request) string { return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ") }
	return []credential{
		{name: "password", password: "S3cr3tPw-long-enough", marker: "password=", echo: echoedPassword},
		{name: "password with a quote, a backslash, a ' and <&>", password: `S3"cr\tPw'<&>`, marker: "password=", echo: echoedPassword},
		{name: "password in Korean and with umlauts", password: "비밀번호-Pässwörd", marker: "password=", echo: echoedPassword},
		{name: "password with a joiner and a space", password: "Pw\u200dzero width", marker: "password=", echo: echoedPassword},
		{name: "Basic credentials", password: `S3"cr\tPw'<&>`, marker: "Authorization: Basic ", echo: basic},
		{name: "auth header value", authHeader: "X-Api-Key: key-77d1c0e5-4b2a", marker: "X-Api-Key: ",
			echo: func(r *http.Request) string { return r.Header.Get("X-Api-Key") }},
		{name: "bearer token", authHeader: "Authorization: Bearer tok.9f3a+b/c=", marker: "token=",
			echo: func(r *http.Request) string { return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") }},
	}
}

func (cr credential) client(t *testing.T, raw string, hc *http.Client) *Client {
	t.Helper()
	u, _ := url.Parse(raw)
	if cr.password != "" {
		u.User = url.UserPassword(testUser, cr.password)
	}
	c, err := New(Options{BaseURL: u.String(), AuthHeader: cr.authHeader, AllowInsecureAuth: true, HTTPClient: hc, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// forms is the credential as a message could show it: as is, escaped by %q
// (also ASCII-only) and by JSON.
func forms(secret string) []string {
	inner := func(q string) string { return q[1 : len(q)-1] }
	j, _ := json.Marshal(secret)
	return []string{secret, inner(strconv.Quote(secret)), inner(strconv.QuoteToASCII(secret)), inner(string(j))}
}

// afterMarker checks what msg shows after the marker an echo wrote before
// the credential: the mask, or the end of a cut ("…", or the quote that
// closes a cut line), never a byte of the credential. whole: the credential
// was in the part shown, so the mask must be there.
func afterMarker(t *testing.T, what, msg, marker string, whole bool) {
	t.Helper()
	i := strings.Index(msg, marker)
	if i < 0 {
		t.Errorf("%s: %q does not hold the echo's %q: the test did not cut where it meant to", what, msg, marker)
		return
	}
	rest := msg[i+len(marker):]
	switch {
	case strings.HasPrefix(rest, redact.Mask):
	case whole:
		t.Errorf("%s: after %q comes %.30q, want the mask", what, marker, rest)
	case !strings.HasPrefix(rest, "…"):
		t.Errorf("%s: after %q comes %.30q, want the mask or the end of the cut", what, marker, rest)
	}
}

// An echoed credential cut anywhere by snippet's 120 bytes, as a page
// shows it or escaped in a JSON body that is not the contract's error,
// shows neither whole nor in part: for every offset of the cut from just
// before the credential to just after it, for passwords with characters %q
// and JSON escape, non-ASCII and format characters, the Basic credentials,
// an auth header's value and a bearer token, on both transports.
func TestEchoedCredentialCutAtEveryOffsetIsHidden(t *testing.T) {
	type body struct {
		name       string
		lead, tail string
		form       func(string) string // the credential as the body writes it
	}
	bodies := []body{
		{"page", "<html><body>", " was refused</body></html>", func(s string) string { return s }},
		{"JSON not the contract's", `{"detail":"`, ` was refused"}`, func(s string) string { j, _ := json.Marshal(s); return string(j[1 : len(j)-1]) }},
	}
	for _, tr := range transports {
		for _, cr := range credentials() {
			for _, b := range bodies {
				t.Run(tr.name+"/"+cr.name+"/"+b.name, func(t *testing.T) {
					var at atomic.Int64 // bytes of the credential before snippet's cut
					var echoed atomic.Value
					s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						echoed.Store(cr.echo(r))
						sec := b.form(cr.echo(r))
						k := int(at.Load())
						pad := strings.Repeat("-", snippetLen-k-len(b.lead)-len(cr.marker))
						w.WriteHeader(http.StatusBadGateway)
						io.WriteString(w, b.lead+pad+cr.marker+sec+b.tail)
					}))
					defer s.Close()
					c := cr.client(t, s.URL, tr.http())
					raw := sent(t, c, &echoed)
					sec := b.form(raw)
					for k := 0; k <= len(sec)+1; k++ {
						at.Store(int64(k))
						res := c.Register(context.Background(), "seller-1", "u:1", product)
						if res.Class != Transient || res.Status != http.StatusBadGateway || res.Err == nil {
							t.Fatalf("cut %d: class %v status %d err %v, want a transient 502 with an error", k, res.Class, res.Status, res.Err)
						}
						msg := res.Err.Error()
						afterMarker(t, fmt.Sprintf("cut %d bytes into %q", k, sec), msg, cr.marker, k >= len(sec))
						for _, f := range append(forms(sec), forms(raw)...) {
							if strings.Contains(msg, f) {
								t.Errorf("cut %d: Err holds %q: %s", k, f, msg)
							}
						}
					}
				})
			}
		}
	}
}

// sent is the credential the client sends, as the server echoes it: a
// first call makes the server store it in echoed.
func sent(t *testing.T, c *Client, echoed *atomic.Value) string {
	t.Helper()
	c.Register(context.Background(), "seller-1", "u:0", product)
	sec, _ := echoed.Load().(string)
	if len(sec) < 8 {
		t.Fatalf("the server received the credential %q, want one of 8 bytes or more", sec)
	}
	return sec
}

// A line that is not HTTP, which the synchronous transport quotes cut to
// 64 bytes and net/http quotes whole, shows no part of a credential echoed
// in it, wherever the cut falls.
func TestEchoedCredentialInAMalformedLineIsHidden(t *testing.T) {
	// No space in the marker: net/http quotes the line's field up to one.
	const lead, marker = "BAD/1.0 ", "cred="
	for _, tr := range transports {
		for _, cr := range credentials() {
			t.Run(tr.name+"/"+cr.name, func(t *testing.T) {
				var at atomic.Int64
				var echoed atomic.Value
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				go func() {
					for {
						conn, err := ln.Accept()
						if err != nil {
							return
						}
						go func() {
							defer conn.Close()
							r, err := http.ReadRequest(bufio.NewReader(conn))
							if err != nil {
								return
							}
							_, _ = io.Copy(io.Discard, r.Body)
							echoed.Store(cr.echo(r))
							pad := strings.Repeat("-", max(0, maxLine-int(at.Load())-len(lead)-len(marker)))
							io.WriteString(conn, lead+pad+marker+cr.echo(r)+" refused\r\n\r\n")
						}()
					}
				}()
				c := cr.client(t, "http://"+ln.Addr().String(), tr.http())
				sec := sent(t, c, &echoed)
				for k := 0; k <= len(sec)+1; k++ {
					at.Store(int64(k))
					res := c.Register(context.Background(), "seller-1", "u:1", product)
					if res.Class != Transient || res.Failure != FailureUnreadable || res.Err == nil {
						t.Fatalf("cut %d: class %v failure %q err %v, want a transient unreadable answer", k, res.Class, res.Failure, res.Err)
					}
					msg := res.Err.Error()
					i := strings.Index(msg, marker)
					if i < 0 {
						t.Fatalf("cut %d: %q does not hold %q", k, msg, marker)
					}
					rest := msg[i+len(marker):]
					if !strings.HasPrefix(rest, redact.Mask) && !strings.HasPrefix(rest, "…") {
						t.Errorf("cut %d bytes into %q: after %q comes %.30q, want the mask or the end of the cut", k, sec, marker, rest)
					}
					for _, f := range forms(sec) {
						if strings.Contains(msg, f) {
							t.Errorf("cut %d: Err holds %q: %s", k, f, msg)
						}
					}
				}
			})
		}
	}
}

// The API's own error body, and a redirect, that echo a credential with
// characters JSON and URLs escape: neither the seller's message, the code,
// the field nor the operator's error holds it in any form, however the JSON
// escapes it.
func TestEchoedCredentialInTheAPIsWordsIsHidden(t *testing.T) {
	asciiEscaped := func(s string) string { // every character as \uXXXX, as some encoders write
		var b strings.Builder
		for _, r := range s {
			if r > 0xffff {
				r1, r2 := utf16Pair(r)
				fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
				continue
			}
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		return b.String()
	}
	goJSON := func(s string) string { j, _ := json.Marshal(s); return string(j[1 : len(j)-1]) }
	for _, tr := range transports {
		for _, cr := range credentials() {
			for _, status := range []int{401, 422, 503, 302} {
				for _, esc := range []struct {
					name string
					f    func(string) string
				}{{"Go's JSON", goJSON}, {"every character escaped", asciiEscaped}} {
					if status == 302 && esc.name != "Go's JSON" {
						continue
					}
					t.Run(fmt.Sprintf("%s/%s/%d/%s", tr.name, cr.name, status, esc.name), func(t *testing.T) {
						var echoed atomic.Value
						s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
							sec := cr.echo(r)
							echoed.Store(sec)
							if status == 302 {
								w.Header().Set("Location", "https://elsewhere.example/login/"+url.PathEscape(sec)+"/"+sec+"?k="+url.QueryEscape(sec))
								w.WriteHeader(status)
								return
							}
							w.WriteHeader(status)
							e := esc.f(sec)
							fmt.Fprintf(w, `{"error":{"code":"echo-%s","message":"refused %s%s, which is long enough to be worth cutting later","field":"f-%s"}}`, e, cr.marker, e, e)
						}))
						defer s.Close()
						c := cr.client(t, s.URL, tr.http())
						res := c.Register(context.Background(), "seller-1", "u:1", product)
						sec, _ := echoed.Load().(string)
						if len(sec) < 8 {
							t.Fatalf("the server received the credential %q", sec)
						}
						if res.Err == nil {
							t.Fatalf("%d without an error", status)
						}
						leaks := append(forms(sec), url.PathEscape(sec), url.QueryEscape(sec))
						for where, text := range map[string]string{"Err": res.Err.Error(), "Message": res.Message, "Code": res.Code, "Field": res.Field} {
							for _, f := range leaks {
								if strings.Contains(text, f) {
									t.Errorf("%s holds %q: %s", where, f, text)
								}
							}
						}
						if status != 302 && (!strings.HasPrefix(res.Message, "refused ") || !strings.HasSuffix(res.Message, redact.Mask+", which is long enough to be worth cutting later") || res.Code != "echo-"+redact.Mask) {
							t.Errorf("message %q, code %q: want the API's words kept, the credential masked", res.Message, res.Code)
						}
					})
				}
			}
		}
	}
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// cut never leaves the start of a secret at the end, nor half a character,
// and leaves a text that fits alone.
func TestCutDropsTheStartOfASecret(t *testing.T) {
	k := newSecrets(nil, []string{"S3cr3tPw", "비밀번호"})
	for _, tt := range []struct {
		in   string
		n    int
		want string
		cut  bool
	}{
		{"short", 10, "short", false},
		{"abcdefS3cr3tPw", 10, "abcdef", true},
		{"abcdefS3cr3tPw", 7, "abcdef", true},
		{"abcdefS3cr3tPw", 6, "abcdef", true},
		{"abcdefS3cr3", 9, "abcdef", true},
		{"abc비밀번호", 5, "abc", true},            // half of 비: dropped as a partial character
		{"abc비밀번호", 9, "abc", true},            // 비 and 밀: the start of a secret
		{"abc\xffdefgh", 6, "abc\xffde", true}, // an invalid byte inside stays for %q
	} {
		got, cut := k.cut(tt.in, tt.n)
		if got != tt.want || cut != tt.cut {
			t.Errorf("cut(%q, %d) = %q, %v; want %q, %v", tt.in, tt.n, got, cut, tt.want, tt.cut)
		}
	}
}
