package httpapi

import (
	"errors"
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

// NewHTTPServer wraps h in an http.Server with timeouts, so a slow client
// cannot hold a connection (slowloris) and a stuck upload cannot hold a
// goroutine forever.
func NewHTTPServer(addr string, h http.Handler, readTimeout, writeTimeout time.Duration) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: min(10*time.Second, readTimeout),
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}
