package registryclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"syscall"
	"time"
)

// syncTransport does every round trip to the registration API on the calling
// goroutine. net/http's Transport keeps a reader and a writer goroutine per
// connection and hands each request and answer across them; for one small
// POST per row, those hand-offs and the scheduling they cause are a large
// share of the CPU per row. The API is one host, spoken to in HTTP/1.1
// without a proxy, so of what the goroutines buy only one thing is needed:
// noticing that the server closed an idle connection, which a peek before
// reuse does instead.
//
// It never retries or re-sends a request: every POST took a throttle slot
// of its own, and one that failed after being written is the caller's to
// retry or not.
type syncTransport struct {
	scheme, host string // of the base URL, host as written there
	addr         string // host:port dialled, the port made explicit
	tls          *tls.Config
	dialer       net.Dialer
	maxConns     int
	idleTimeout  time.Duration

	mu   sync.Mutex
	open int // connections open or being dialled, idle ones included
	// idle is oldest first and reused from the end: the most recently used
	// connection is the one least likely to have been closed by the server,
	// and those left at the front age out, so the pool shrinks to the load.
	idle []*conn
	// waiters are callers that found maxConns open and none idle, first
	// come first served. Each gets a connection that another call has
	// finished with, or nil: a slot to dial in.
	waiters     []chan *conn
	pruneTimer  *time.Timer
	pruneActive bool
}

// conn is one connection with the buffers it keeps between calls.
type conn struct {
	nc     net.Conn        // *net.TCPConn, or *tls.Conn over it
	raw    syscall.RawConn // of the TCP connection, for the idle peek
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time
	// scratch formats a number for bw without an allocation.
	scratch [20]byte
}

// max1xx bounds the informational answers skipped before the final one, so
// that a server cannot keep a call busy with them.
const max1xx = 5

func newSyncTransport(base *url.URL, maxConns int, tlsConfig *tls.Config) *syncTransport {
	t := &syncTransport{
		scheme:      base.Scheme,
		host:        base.Host,
		addr:        canonicalAddr(base),
		dialer:      net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
		maxConns:    maxConns,
		idleTimeout: 90 * time.Second,
	}
	if base.Scheme == "https" {
		cfg := &tls.Config{}
		if tlsConfig != nil {
			cfg = tlsConfig.Clone()
		}
		// A ServerName set by the caller names the certificate to expect
		// when it is not the URL's host (a tunnel, an IP with a named cert).
		if cfg.ServerName == "" {
			cfg.ServerName = base.Hostname()
		}
		cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
		// This transport speaks HTTP/1.1 only: a server must not pick h2.
		cfg.NextProtos = []string{"http/1.1"}
		t.tls = cfg
	}
	return t
}

// RoundTrip sends req on a pooled or new connection and reads the answer's
// header. The connection stays with the answer's Body until it is read to
// its end or closed.
func (t *syncTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != t.scheme || (req.URL.Host != t.host && canonicalAddr(req.URL) != t.addr) {
		closeRequestBody(req)
		return nil, fmt.Errorf("the registry transport only talks to %s://%s, not %s://%s", t.scheme, t.host, req.URL.Scheme, req.URL.Host)
	}
	ctx := req.Context()
	c, err := t.get(ctx)
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	return t.exchange(ctx, c, req)
}

func (t *syncTransport) exchange(ctx context.Context, c *conn, req *http.Request) (*http.Response, error) {
	d, _ := ctx.Deadline() // zero without one, which also clears the last call's
	if err := c.nc.SetDeadline(d); err != nil {
		closeRequestBody(req)
		t.discard(c)
		return nil, err
	}
	// Cancellation has no deadline to set in advance: a deadline in the past
	// makes the blocked read or write return at once. The connection is
	// then in an unknown state and is closed, never reused.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		t.discard(c)
		return nil, endedError(ctx, err)
	}
	err := req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		return fail(err)
	}
	var resp *http.Response
	for n := 0; ; n++ {
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			return fail(err)
		}
		if resp.StatusCode >= 200 {
			break
		}
		if resp.StatusCode == http.StatusSwitchingProtocols || n == max1xx {
			return fail(fmt.Errorf("unexpected %s from the registration API", resp.Status))
		}
	}
	b := &body{t: t, ctx: ctx, stop: stop, src: resp.Body, c: c, keep: !req.Close && !resp.Close}
	if resp.Body == http.NoBody {
		// Nothing to read (a 204, a HEAD, a Content-Length of 0): the
		// round trip is over now.
		b.end(b.keep, io.EOF)
		return resp, nil
	}
	resp.Body = b
	return resp, nil
}

// get answers an idle connection that looks alive, a new one, or, at
// maxConns, the first that another call finishes with.
func (t *syncTransport) get(ctx context.Context) (*conn, error) {
	// A call whose context has ended would only spoil a good connection.
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	for {
		if c := t.idleConn(); c != nil {
			return c, nil
		}
		t.mu.Lock()
		expired := t.takeExpiredLocked(time.Now())
		if len(t.idle) > 0 { // put back since idleConn looked
			t.mu.Unlock()
			t.closeConns(expired)
			continue
		}
		if t.open < t.maxConns {
			t.open++
			t.mu.Unlock()
			t.closeConns(expired)
			return t.dialInSlot(ctx)
		}
		w := make(chan *conn, 1)
		t.waiters = append(t.waiters, w)
		t.mu.Unlock()
		t.closeConns(expired)
		return t.wait(ctx, w)
	}
}

// idleConn answers the most recently used idle connection that looks
// alive, or nil when none is idle.
func (t *syncTransport) idleConn() *conn {
	for {
		t.mu.Lock()
		expired := t.takeExpiredLocked(time.Now())
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			t.closeConns(expired)
			return nil
		}
		c := t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		t.closeConns(expired)
		if idleAlive(c.raw) {
			return c
		}
		t.discard(c)
	}
}

func (t *syncTransport) wait(ctx context.Context, w chan *conn) (*conn, error) {
	select {
	case c := <-w:
		if c == nil {
			return t.dialInSlot(ctx)
		}
		// Handed over by a call that has just read its answer on it: it was
		// alive an instant ago, so no peek.
		if ctx.Err() != nil {
			t.put(c)
			return nil, context.Cause(ctx)
		}
		return c, nil
	case <-ctx.Done():
		t.mu.Lock()
		for i, x := range t.waiters {
			if x == w {
				t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
				t.mu.Unlock()
				return nil, context.Cause(ctx)
			}
		}
		t.mu.Unlock()
		// Served while giving up: pass on what was handed over.
		if c := <-w; c != nil {
			t.put(c)
		} else {
			t.freeSlots(1)
		}
		return nil, context.Cause(ctx)
	}
}

// dialInSlot dials in a slot already counted in open, and gives the slot
// up if the dial fails.
func (t *syncTransport) dialInSlot(ctx context.Context) (*conn, error) {
	c, err := t.dial(ctx)
	if err != nil {
		t.freeSlots(1)
		return nil, endedError(ctx, err)
	}
	return c, nil
}

func (t *syncTransport) dial(ctx context.Context) (*conn, error) {
	nc, err := t.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	tcp, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("dialing %s gave a %T, not a TCP connection", t.addr, nc)
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		nc.Close()
		return nil, err
	}
	if t.tls != nil {
		tc := tls.Client(nc, t.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	return &conn{nc: nc, raw: raw, br: bufio.NewReader(nc), bw: bufio.NewWriter(nc)}, nil
}

// put gives a connection whose last answer was read to its end to the first
// waiter, or keeps it idle.
func (t *syncTransport) put(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.waiters) > 0 {
		w := t.waiters[0]
		t.waiters = t.waiters[1:]
		w <- c
		return
	}
	c.idleAt = time.Now()
	t.idle = append(t.idle, c)
	if !t.pruneActive {
		t.pruneActive = true
		if t.pruneTimer == nil {
			t.pruneTimer = time.AfterFunc(t.idleTimeout, t.prune)
		} else {
			t.pruneTimer.Reset(t.idleTimeout)
		}
	}
}

// prune closes the connections idle for longer than idleTimeout, as
// net/http does, so that a pool left alone after a burst does not hold the
// sockets that the server has long closed.
func (t *syncTransport) prune() {
	now := time.Now()
	t.mu.Lock()
	expired := t.takeExpiredLocked(now)
	if len(t.idle) > 0 {
		t.pruneTimer.Reset(t.idle[0].idleAt.Add(t.idleTimeout).Sub(now))
	} else {
		t.pruneActive = false
	}
	t.mu.Unlock()
	t.closeConns(expired)
}

// takeExpiredLocked removes the idle connections too old to reuse, all at
// the front since idle is oldest first, and answers them for closeConns.
func (t *syncTransport) takeExpiredLocked(now time.Time) []*conn {
	n := 0
	for n < len(t.idle) && now.Sub(t.idle[n].idleAt) >= t.idleTimeout {
		n++
	}
	if n == 0 {
		return nil
	}
	expired := append([]*conn(nil), t.idle[:n]...)
	rest := copy(t.idle, t.idle[n:])
	clear(t.idle[rest:])
	t.idle = t.idle[:rest]
	return expired
}

// discard closes a connection that must not be reused.
func (t *syncTransport) discard(c *conn) {
	c.nc.Close()
	t.freeSlots(1)
}

// closeConns closes connections taken out of the pool.
func (t *syncTransport) closeConns(cs []*conn) {
	if len(cs) == 0 {
		return
	}
	for _, c := range cs {
		c.nc.Close()
	}
	t.freeSlots(len(cs))
}

// freeSlots gives up n slots in open, each to the first waiter if any, as
// a slot to dial in.
func (t *syncTransport) freeSlots(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for range n {
		if len(t.waiters) > 0 {
			w := t.waiters[0]
			t.waiters = t.waiters[1:]
			w <- nil
			continue
		}
		t.open--
	}
}

// CloseIdleConnections closes the idle connections; those in use stay open
// and join the pool when their call ends. http.Client.CloseIdleConnections
// calls it.
func (t *syncTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	t.closeConns(idle)
}

// body is an answer's Body. It holds the connection until the answer is
// read to its end (the connection goes back to the pool, unless a side
// asked to close it) or closed before that (the connection is closed: the
// rest of the answer is still on it, and reading it may take as long as the
// server wants).
type body struct {
	t    *syncTransport
	ctx  context.Context
	stop func() bool
	src  io.ReadCloser // never closed: its Close reads the rest of the answer
	keep bool          // neither the request nor the answer asked to close

	mu      sync.Mutex
	c       *conn // nil once the round trip has ended
	err     error // why it ended: io.EOF, or what went wrong
	reading bool
	closed  bool
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return 0, http.ErrBodyReadAfterClose
	case b.c == nil:
		b.mu.Unlock()
		return 0, b.err
	}
	b.reading = true
	b.mu.Unlock()

	n, err := b.src.Read(p)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.reading = false
	switch {
	case b.closed:
		// Close came during the read and left the connection to it.
		b.end(false, http.ErrBodyReadAfterClose)
		if err != nil {
			err = http.ErrBodyReadAfterClose
		}
	case err == io.EOF:
		b.end(b.keep, io.EOF)
	case err != nil:
		err = endedError(b.ctx, err)
		b.end(false, err)
	}
	return n, err
}

// Close before the end of the answer closes the connection. A Read in
// progress returns at once and closes it.
func (b *body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	switch {
	case b.c == nil:
	case b.reading:
		_ = b.c.nc.SetDeadline(time.Unix(1, 0))
	default:
		b.end(false, http.ErrBodyReadAfterClose)
	}
	return nil
}

// end ends the round trip, with b.mu held or before b is shared; later
// Reads answer err.
func (b *body) end(reuse bool, err error) {
	c := b.c
	b.c, b.err = nil, err
	// stop is false when ctx ended: its deadline in the past is set or
	// about to be, on a connection that must then not serve another call.
	// Bytes already buffered past the answer are not an answer to the next
	// request.
	if b.stop() && reuse && c.br.Buffered() == 0 {
		b.t.put(c)
		return
	}
	b.t.discard(c)
}

// endedError reports an I/O error that the end of ctx caused as that end,
// as net/http does, so that the caller tells its own cancellation or
// timeout from the API's failure.
func endedError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			// The connection's deadline is ctx's and may pass an instant
			// before the timer that ends ctx fires. Waiting for it lets the
			// caller see which context ended: a deadline of its own caller
			// ends its context and only then the call's.
			t := time.NewTimer(100 * time.Millisecond)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-t.C:
				return context.DeadlineExceeded
			}
		}
	}
	return err
}

func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// closeRequestBody keeps the http.RoundTripper contract when req.Write
// does not get to close the body.
func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
