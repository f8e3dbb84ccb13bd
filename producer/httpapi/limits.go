package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// sellerSlots counts each seller's uploads in progress.
type sellerSlots struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func newSellerSlots(max int) *sellerSlots { return &sellerSlots{max: max, n: map[string]int{}} }

func (s *sellerSlots) take(seller string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[seller] >= s.max {
		return false
	}
	s.n[seller]++
	return true
}

func (s *sellerSlots) give(seller string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[seller]--; s.n[seller] <= 0 {
		delete(s.n, seller)
	}
}

// rateReader cuts off a body that arrives slower than a minimum average
// rate: before each read it moves the connection's read deadline to the
// moment the bytes received so far, plus one, would fall below the rate
// (after a grace period). A client that trickles a byte a second is cut off
// after the grace, however long the server's ReadTimeout.
type rateReader struct {
	r        io.Reader
	rc       *http.ResponseController
	start    time.Time
	grace    time.Duration
	rate     int64
	limit    time.Time // the server's own deadline; zero: none
	n        int64
	timedOut bool
}

func (b *rateReader) deadline() time.Time {
	d := b.start.Add(b.grace + time.Duration(float64(b.n+1)/float64(b.rate)*float64(time.Second)))
	if !b.limit.IsZero() && d.After(b.limit) {
		return b.limit
	}
	return d
}

func (b *rateReader) Read(p []byte) (int, error) {
	if err := b.rc.SetReadDeadline(b.deadline()); err != nil {
		// Not a connection that supports deadlines (HTTP/2 without them):
		// the server's ReadTimeout still bounds the body.
		return b.r.Read(p)
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
		b.timedOut = true
	}
	if err == io.EOF {
		// The body is in: the connection's reads (net/http's background
		// read that notices a client going away) get the server's own
		// deadline back, or a rate deadline passing mid-publish would
		// cancel the request.
		b.rc.SetReadDeadline(b.limit)
	}
	return n, err
}

// rateWriter cuts off a client that reads an answer slower than a minimum
// average rate, so an answer written while a slot is held (a report, an
// upload's result) cannot keep the slot for the server's whole write
// timeout: before each chunk it moves the connection's write deadline to
// the moment the bytes written so far, plus the chunk, would fall below the
// rate (after a grace period that starts with the first byte). A client
// that never reads stalls once the socket buffers are full, and is dropped
// grace + chunk/rate later.
type rateWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	grace    time.Duration
	rate     int64
	limit    time.Time // the server's own deadline; zero: none
	start    time.Time // the first Write
	n        int64
	timedOut bool
}

// rateChunk is how much is written under one deadline: small enough that a
// stalled client is noticed soon, large enough to pass net/http's 4 KiB
// buffer straight to the connection.
const rateChunk = 32 << 10

func (w *rateWriter) deadline(next int) time.Time {
	d := w.start.Add(w.grace + time.Duration(float64(w.n+int64(next))/float64(w.rate)*float64(time.Second)))
	if !w.limit.IsZero() && d.After(w.limit) {
		return w.limit
	}
	return d
}

func (w *rateWriter) Write(p []byte) (int, error) {
	if w.start.IsZero() {
		w.start = time.Now()
	}
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), rateChunk)]
		if err := w.rc.SetWriteDeadline(w.deadline(len(chunk))); err != nil {
			// No deadlines on this connection (HTTP/2 without them): the
			// server's WriteTimeout still bounds the answer.
			n, err := w.ResponseWriter.Write(p)
			w.n += int64(n)
			return written + n, err
		}
		n, err := w.ResponseWriter.Write(chunk)
		w.n += int64(n)
		written += n
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
				w.timedOut = true
			}
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// Unwrap lets http.ResponseController reach the connection.
func (w *rateWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// NewHTTPServer wraps h in an http.Server with timeouts, so a slow client
// cannot hold a connection (slowloris) and a stuck upload cannot hold a
// goroutine forever. Served on a ConnGuard's listener, a connection that
// has not authenticated a request is held for the guard's AnonymousIdle
// only, not IdleTimeout.
func NewHTTPServer(addr string, h http.Handler, readTimeout, writeTimeout time.Duration) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: min(10*time.Second, readTimeout),
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ConnContext:       connContext,
	}
}

// sellerWork lets each seller's checks and uploads parse and answer one at
// a time, after their bodies are in: a seller may have two uploads in
// progress (MaxUploadsPerSeller), but their work takes one core, not every
// core of a small machine, so another seller's requests meanwhile are
// answered at their usual speed (another seller's p99 at most 100 ms
// during the worst check: go run ./bench/hostile).
type sellerWork struct {
	mu   sync.Mutex
	lock map[string]*workLock
}

type workLock struct {
	turn  chan struct{} // holds a token while the seller's work runs
	users int           // requests holding or waiting for turn
}

func newSellerWork() *sellerWork { return &sellerWork{lock: map[string]*workLock{}} }

// take waits for the seller's turn (or ctx's end) and returns the function
// that gives it back.
func (w *sellerWork) take(ctx context.Context, seller string) (func(), error) {
	w.mu.Lock()
	l, ok := w.lock[seller]
	if !ok {
		l = &workLock{turn: make(chan struct{}, 1)}
		w.lock[seller] = l
	}
	l.users++
	w.mu.Unlock()
	done := func() {
		w.mu.Lock()
		if l.users--; l.users == 0 {
			delete(w.lock, seller)
		}
		w.mu.Unlock()
	}
	select {
	case l.turn <- struct{}{}:
		return func() { <-l.turn; done() }, nil
	case <-ctx.Done():
		done()
		return nil, fmt.Errorf("waiting for the seller's earlier upload to be handled: %w", ctx.Err())
	}
}
