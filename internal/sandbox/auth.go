package sandbox

import (
	"bytes"
	"crypto/subtle"
	"encoding/base64"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Request is one request as the server received it, kept whole so that a
// test can check exactly what a client sent (where a credential went).
type Request struct {
	Method string      `json:"method"`
	Target string      `json:"target"` // the request line's target, as sent
	Host   string      `json:"host"`
	Header http.Header `json:"header"`
	Body   string      `json:"body"`
}

// received is the log of requests kept whole (Options.KeepRequests).
type received struct {
	mu   sync.Mutex
	keep int
	reqs []Request
}

// keep logs r whole while the log has room, putting its body back for the
// handler.
func (s *Server) keep(r *http.Request) {
	s.received.mu.Lock()
	room := len(s.received.reqs) < s.received.keep
	s.received.mu.Unlock()
	if !room {
		return
	}
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(r.Body, s.maxBody+1))
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	}
	req := Request{Method: r.Method, Target: r.RequestURI, Host: r.Host, Header: r.Header.Clone(), Body: string(body)}
	s.received.mu.Lock()
	defer s.received.mu.Unlock()
	if len(s.received.reqs) < s.received.keep {
		s.received.reqs = append(s.received.reqs, req)
	}
}

// Requests returns the requests kept whole (Options.KeepRequests), in the
// order they arrived. The slice is a copy.
func (s *Server) Requests() []Request {
	s.received.mu.Lock()
	defer s.received.mu.Unlock()
	return slices.Clone(s.received.reqs)
}

// refuseCredentials answers 401 to a registration without the Basic auth
// Options.BasicAuth asks for, and reports whether it did.
func (s *Server) refuseCredentials(w http.ResponseWriter, r *http.Request) bool {
	if s.basic == "" {
		return false
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(s.basic))
	got := r.Header.Get("Authorization")
	// The scheme is case-insensitive (RFC 9110 §11.1); the credentials are not.
	if scheme, cred, ok := strings.Cut(got, " "); ok && strings.EqualFold(scheme, "Basic") {
		got = "Basic " + strings.TrimSpace(cred)
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1 {
		return false
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="registration API", charset="UTF-8"`)
	s.write(w, errorAnswer(http.StatusUnauthorized, &apiError{Code: "unauthorized", Message: "the registration API needs HTTP Basic auth with the client's user and password"}))
	return true
}
