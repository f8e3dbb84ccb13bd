// Package testproxy puts a TCP proxy between a test's client and a real
// server (Redis), so a test can delay, drop or withhold what passes: the
// network faults real parts cannot be asked to make.
package testproxy

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Start listens on a free loopback port until the test ends and returns its
// address. For each connection it dials target and hands both ends to serve,
// which pumps bytes as the test wants; both are closed when serve returns.
func Start(t testing.TB, target string, serve func(client, server net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer client.Close()
				server, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer server.Close()
				serve(client, server)
			}()
		}
	}()
	return ln.Addr().String()
}

// Link is a proxy to one target whose faults a test switches while it runs,
// as a network does to one client: every byte late by a delay, or a
// blackhole that accepts connections and holds what either side sends,
// forwarding and answering nothing. When the blackhole ends, what it held
// goes on, in order, as TCP delivers after a partition heals; what a side
// sent before closing its connection inside the blackhole is dropped with
// the connection (the client gave up: the server never sees the request).
type Link struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	delay     time.Duration
	blackhole bool
	changed   chan struct{} // closed and replaced when the faults change
	conns     map[net.Conn]bool
	sent      int64 // chunks read from clients
	closed    bool
}

// NewLink listens on a free loopback port until Close (or the test's end,
// when t is not nil) and forwards every connection to target.
func NewLink(t testing.TB, target string) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{ln: ln, target: target, changed: make(chan struct{}), conns: map[net.Conn]bool{}}
	if t != nil {
		t.Cleanup(l.Close)
	}
	go l.accept()
	return l, nil
}

// Addr is the address clients dial.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Close stops listening and closes every connection.
func (l *Link) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	conns := l.conns
	l.conns = map[net.Conn]bool{}
	l.mu.Unlock()
	_ = l.ln.Close()
	for c := range conns {
		_ = c.Close()
	}
}

// SetDelay makes every byte sent either way from now on arrive d late (0: none).
func (l *Link) SetDelay(d time.Duration) {
	l.mu.Lock()
	l.delay = d
	l.notify()
	l.mu.Unlock()
}

// SetBlackhole starts (true) or ends (false) the blackhole.
func (l *Link) SetBlackhole(on bool) {
	l.mu.Lock()
	l.blackhole = on
	l.notify()
	l.mu.Unlock()
}

// Sent counts the chunks clients have sent through the link (forwarded or
// held): a test waits for it to grow to see a client's next request.
func (l *Link) Sent() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent
}

func (l *Link) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *Link) track(c net.Conn, on bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on && l.closed {
		return false
	}
	if on {
		l.conns[c] = true
	} else {
		delete(l.conns, c)
	}
	return true
}

func (l *Link) accept() {
	for {
		client, err := l.ln.Accept()
		if err != nil {
			return
		}
		go l.serve(client)
	}
}

func (l *Link) serve(client net.Conn) {
	if !l.track(client, true) {
		_ = client.Close()
		return
	}
	defer l.track(client, false)
	defer client.Close()
	server, err := net.Dial("tcp", l.target)
	if err != nil {
		return
	}
	if !l.track(server, true) {
		_ = server.Close()
		return
	}
	defer l.track(server, false)
	defer server.Close()
	done := make(chan struct{}, 2)
	go func() { l.pump(server, client, true); done <- struct{}{} }()
	go func() { l.pump(client, server, false); done <- struct{}{} }()
	<-done // one side ended: end both
}

type chunk struct {
	b  []byte
	at time.Time
}

// pump copies src to dst through the link's faults.
func (l *Link) pump(dst, src net.Conn, fromClient bool) {
	queue := make(chan chunk, 1024)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if fromClient {
					l.mu.Lock()
					l.sent++
					l.mu.Unlock()
				}
				queue <- chunk{append([]byte(nil), buf[:n]...), time.Now()}
			}
			if err != nil {
				close(queue)
				return
			}
		}
	}()
	for c := range queue {
		for {
			l.mu.Lock()
			delay, hole, changed := l.delay, l.blackhole, l.changed
			l.mu.Unlock()
			if hole {
				select {
				case <-readDone:
					// The sender closed while its bytes were held: the
					// connection is gone with them.
					if l.holding() {
						return
					}
				case <-changed:
				}
				continue
			}
			if wait := time.Until(c.at.Add(delay)); wait > 0 {
				select {
				case <-time.After(wait):
				case <-changed:
					continue
				}
			}
			break
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}

func (l *Link) holding() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.blackhole
}
