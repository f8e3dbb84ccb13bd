package httpapi

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of ConnGuard.
const (
	// DefaultMaxConnsPerIP is room for several sellers behind one office
	// NAT, each with a browser's six connections and a few progress streams.
	DefaultMaxConnsPerIP = 128
	// DefaultAnonymousIdle is how long a connection that has not yet sent a
	// valid token or session may wait for its next request's headers.
	DefaultAnonymousIdle = 10 * time.Second
)

// ConnGuard bounds what a client can hold without signing in: at most
// MaxPerIP connections per client IP address (more are closed as they
// arrive, logged and counted), and a connection that has not yet
// authenticated a request is closed after AnonymousIdle without a
// request's headers, instead of the server's IdleTimeout.
//
// Behind a reverse proxy every connection comes from the proxy's address:
// there MaxPerIP must cover the proxy's connections (or be 0, off), and the
// proxy limits its clients.
type ConnGuard struct {
	MaxPerIP      int           // 0: no cap
	AnonymousIdle time.Duration // 0: the server's own timeouts
	Metrics       *Metrics
	Logger        *slog.Logger
}

// Listener wraps ln. Serve it with a server from NewHTTPServer, whose
// handlers mark a connection authenticated.
func (g ConnGuard) Listener(ln net.Listener) net.Listener {
	log := g.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &guardedListener{Listener: ln, g: g, log: log, perIP: map[string]*ipConns{}}
}

type guardedListener struct {
	net.Listener
	g   ConnGuard
	log *slog.Logger

	mu    sync.Mutex
	perIP map[string]*ipConns
}

type ipConns struct {
	n      int
	logged bool // a refusal was logged since the count was last below the cap
}

func remoteIP(c net.Conn) string {
	addr := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

func (l *guardedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		if l.admit(ip) {
			return &guardedConn{Conn: c, l: l, ip: ip, idle: l.g.AnonymousIdle}, nil
		}
		// Closed before a byte is read: net/http never sees it, so a flood
		// from one address costs an accept and a close.
		c.Close()
	}
}

// admit counts a new connection of ip, or refuses it when ip holds the cap.
func (l *guardedListener) admit(ip string) bool {
	l.mu.Lock()
	e := l.perIP[ip]
	if e == nil {
		e = &ipConns{}
		l.perIP[ip] = e
	}
	if l.g.MaxPerIP <= 0 || e.n < l.g.MaxPerIP {
		e.n++
		l.mu.Unlock()
		return true
	}
	first := !e.logged
	e.logged = true
	l.mu.Unlock()
	l.g.Metrics.connRefused()
	if first {
		// Once per burst: an address that keeps trying is counted by the
		// metric, not logged for every connection.
		l.log.Warn("connection refused: this client address holds the most connections allowed; more are closed until some end",
			"remote_ip", ip, "max_conns_per_ip", l.g.MaxPerIP)
	}
	return false
}

func (l *guardedListener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.perIP[ip]
	if e == nil {
		return
	}
	if e.n--; e.n <= 0 {
		delete(l.perIP, ip)
	} else if e.n < l.g.MaxPerIP {
		e.logged = false
	}
}

// guardedConn is a connection the listener counts. Until a request on it
// authenticates, no read deadline net/http sets (the header timeout, the
// idle timeout between requests) reaches further than idle from now.
type guardedConn struct {
	net.Conn
	l      *guardedListener
	ip     string
	idle   time.Duration
	closed sync.Once

	mu     sync.Mutex
	authed atomic.Bool
	want   time.Time // the deadline net/http asked for last
}

func (c *guardedConn) Close() error {
	c.closed.Do(func() { c.l.release(c.ip) })
	return c.Conn.Close()
}

// CloseWrite passes net/http's half-close on: before closing a connection
// whose request body was left unread (a refusal), it closes the writing
// side and waits, so the client reads the answer instead of a reset.
func (c *guardedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *guardedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.want = t
	return c.Conn.SetReadDeadline(c.clamp(t))
}

func (c *guardedConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *guardedConn) clamp(t time.Time) time.Time {
	if c.idle <= 0 || c.authed.Load() {
		return t
	}
	if limit := time.Now().Add(c.idle); t.IsZero() || t.After(limit) {
		return limit
	}
	return t
}

// authenticate lifts the anonymous limit: the deadline net/http set for
// the request in progress applies as it asked.
func (c *guardedConn) authenticate() {
	if c.authed.Swap(true) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.Conn.SetReadDeadline(c.want)
}

type connKey struct{}

// connContext puts the guarded connection in every request's context, so
// a handler that authenticates the request can mark it.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if gc, ok := c.(*guardedConn); ok {
		return context.WithValue(ctx, connKey{}, gc)
	}
	return ctx
}

// markAuthenticated tells the request's connection (when a ConnGuard
// counts it) that a valid token or session came over it.
func markAuthenticated(r *http.Request) {
	if gc, ok := r.Context().Value(connKey{}).(*guardedConn); ok {
		gc.authenticate()
	}
}
