package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
)

// Session is a seller signed in to the pages.
type Session struct {
	Seller string
	// CSRF is the token every state-changing request of the session must
	// carry (a form field or the X-CSRF-Token header).
	CSRF string
}

// SessionStore keeps page sessions and spent sign-in links (*RedisSessions).
type SessionStore interface {
	// Create starts a session for seller lasting ttl and returns its id,
	// the cookie's value.
	Create(ctx context.Context, seller string, ttl time.Duration) (id string, s Session, err error)
	// Get returns the session of id, or ErrNoSession.
	Get(ctx context.Context, id string) (Session, error)
	// Delete ends the session of id.
	Delete(ctx context.Context, id string) error
	// SpendLink marks a sign-in link's token id (jti) used until until
	// (SignInLink.SpentUntil, past the last moment any verifier accepts
	// the token); false when it was used before.
	SpendLink(ctx context.Context, jti string, until time.Time) (bool, error)
	// LinkSpent tells whether a sign-in link's token id was used, without
	// using it.
	LinkSpent(ctx context.Context, jti string) (bool, error)
}

// ErrNoSession: the cookie names no live session (expired, signed out, made up).
var ErrNoSession = errors.New("no such session")

// RedisSessions keeps sessions in Redis, so every replica of the service
// knows them and signing out ends them everywhere. Keys hold a hash of the
// id, never the id, so reading Redis gives no usable cookie:
//
//	bulkreg:session:{<sha256 of id>}  HASH seller, csrf; expires with the session
//	bulkreg:signin:{<sha256 of jti>}  STRING, a spent sign-in link; expires after every verifier refuses the link (Auth.LinkSpentUntil)
type RedisSessions struct {
	rdb redis.UniversalClient
}

// NewRedisSessions returns a session store over rdb.
func NewRedisSessions(rdb redis.UniversalClient) *RedisSessions { return &RedisSessions{rdb: rdb} }

func hashed(prefix, id string) string {
	sum := sha256.Sum256([]byte(id))
	return prefix + "{" + hex.EncodeToString(sum[:16]) + "}"
}

// Create implements SessionStore.
func (s *RedisSessions) Create(ctx context.Context, seller string, ttl time.Duration) (string, Session, error) {
	id, csrf := rand.Text()+rand.Text(), rand.Text()
	k := hashed("bulkreg:session:", id)
	pipe := s.rdb.TxPipeline()
	pipe.HSet(ctx, k, "seller", seller, "csrf", csrf)
	pipe.PExpire(ctx, k, ttl)
	if _, err := pipe.Exec(ctx); err != nil {
		return "", Session{}, fmt.Errorf("start a session in Redis: %w", err)
	}
	return id, Session{Seller: seller, CSRF: csrf}, nil
}

// Get implements SessionStore.
func (s *RedisSessions) Get(ctx context.Context, id string) (Session, error) {
	m, err := s.rdb.HGetAll(ctx, hashed("bulkreg:session:", id)).Result()
	if err != nil {
		return Session{}, fmt.Errorf("read the session from Redis: %w", err)
	}
	if m["seller"] == "" || m["csrf"] == "" {
		return Session{}, ErrNoSession
	}
	return Session{Seller: m["seller"], CSRF: m["csrf"]}, nil
}

// Delete implements SessionStore.
func (s *RedisSessions) Delete(ctx context.Context, id string) error {
	if err := s.rdb.Del(ctx, hashed("bulkreg:session:", id)).Err(); err != nil {
		return fmt.Errorf("end the session in Redis: %w", err)
	}
	return nil
}

// SpendLink implements SessionStore.
func (s *RedisSessions) SpendLink(ctx context.Context, jti string, until time.Time) (bool, error) {
	ttl := max(time.Until(until), time.Second)
	ok, err := s.rdb.SetNX(ctx, hashed("bulkreg:signin:", jti), 1, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("record the sign-in link in Redis: %w", err)
	}
	return ok, nil
}

// LinkSpent implements SessionStore.
func (s *RedisSessions) LinkSpent(ctx context.Context, jti string) (bool, error) {
	n, err := s.rdb.Exists(ctx, hashed("bulkreg:signin:", jti)).Result()
	if err != nil {
		return false, fmt.Errorf("read the sign-in link's mark in Redis: %w", err)
	}
	return n == 1, nil
}

// Session cookies: HttpOnly, SameSite=Strict, Path=/. Behind TLS the
// cookie is Secure and named with the __Host- prefix, which the browser
// accepts only from a secure origin, for this host, without a Domain.
//
// Strict, not Lax: a request another site starts (a link, a form, a
// script), a GET included, carries no session, so nothing another site
// makes the browser ask acts as the seller. Signing in loses nothing by
// it: a sign-in link's GET only shows a page, and the POST that uses the
// link is sent by that page, same-origin, with the cookie, so the service
// sees who is signed in before it starts or switches a session
// (signin.go). Lax would let the link's GET see the session too (one
// click fewer when switching sellers) at the price of every page's GET
// acting as the seller when another site links to it.
const (
	cookiePlain  = "bulkreg_session"
	cookieSecure = "__Host-bulkreg_session"
)

func (s *Server) secure(r *http.Request) bool { return s.SecureCookies || r.TLS != nil }

func (s *Server) setSessionCookie(w http.ResponseWriter, r *http.Request, id string, ttl time.Duration) {
	name := cookiePlain
	if s.secure(r) {
		name = cookieSecure
	}
	http.SetCookie(w, &http.Cookie{Name: name, Value: id, Path: "/", MaxAge: int(ttl / time.Second),
		HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteStrictMode})
}

func (s *Server) clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	for _, name := range []string{cookiePlain, cookieSecure} {
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1,
			HttpOnly: true, Secure: name == cookieSecure || s.secure(r), SameSite: http.SameSiteStrictMode})
	}
}

func sessionID(r *http.Request) string {
	for _, name := range []string{cookieSecure, cookiePlain} {
		if c, err := r.Cookie(name); err == nil && c.Value != "" {
			return c.Value
		}
	}
	return ""
}

// caller is who sent a request: a bearer token's seller, or a session.
type caller struct {
	seller  string
	session *Session // nil for a bearer token
	id      string   // the session id
}

// Errors of authenticate.
var (
	errCrossOrigin = errors.New("a cross-origin request is refused")
	errCSRF        = errors.New("the request does not carry the page's CSRF token; reload the page and try again")
)

// authenticate finds the caller: an Authorization header is a bearer token
// (an API client; it is never sent by a browser on its own, so it needs no
// CSRF check), otherwise the session cookie. For a request that changes
// state (unsafe) with a cookie, a browser's cross-origin request is refused
// here (Sec-Fetch-Site, else Origin against Host); the caller must then
// check the CSRF token with csrfOK once it has read the form.
func (s *Server) authenticate(r *http.Request, unsafe bool) (caller, error) {
	if r.Header.Get("Authorization") != "" || s.Sessions == nil {
		seller, err := s.Auth.Seller(r)
		if err != nil {
			return caller{}, err
		}
		info(r).seller = seller
		markAuthenticated(r)
		return caller{seller: seller}, nil
	}
	id := sessionID(r)
	if id == "" {
		return caller{}, ErrNoToken
	}
	sess, err := s.Sessions.Get(r.Context(), id)
	if errors.Is(err, ErrNoSession) {
		return caller{}, ErrNoToken
	}
	if err != nil {
		return caller{}, err
	}
	info(r).seller = sess.Seller
	markAuthenticated(r)
	if unsafe {
		if err := s.cop.Check(r); err != nil {
			return caller{}, fmt.Errorf("%w: %w", errCrossOrigin, err)
		}
	}
	return caller{seller: sess.Seller, session: &sess, id: id}, nil
}

// csrfOK tells whether a cookie-authenticated request carries its session's
// CSRF token (header or form field); a bearer request needs none.
func (c caller) csrfOK(r *http.Request, field string) bool {
	if c.session == nil {
		return true
	}
	tok := r.Header.Get("X-CSRF-Token")
	if tok == "" {
		tok = field
	}
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(c.session.CSRF)) == 1
}

// isAuthError tells token and session refusals from a store that did not answer.
func isAuthError(err error) bool {
	return errors.Is(err, ErrNoToken) || errors.Is(err, ErrBadToken)
}
