package testproxy

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
)

// Blackhole is a TCP proxy that forwards both ways until it is told to
// swallow: from then on every byte either side sends is read and dropped,
// and no connection is closed, as when a network path goes dark (a peer
// neither answers nor resets). It forwards again once told to.
type Blackhole struct {
	// Addr is where clients connect.
	Addr string
	on   atomic.Bool
}

// StartBlackhole proxies to target until the test ends.
func StartBlackhole(t testing.TB, target string) *Blackhole {
	t.Helper()
	b := &Blackhole{}
	b.Addr = Start(t, target, func(client, server net.Conn) {
		done := make(chan struct{}, 2)
		go func() { b.pump(server, client); done <- struct{}{} }()
		go func() { b.pump(client, server); done <- struct{}{} }()
		<-done
	})
	return b
}

// Swallow turns the black hole on (true) or off (false).
func (b *Blackhole) Swallow(on bool) { b.on.Store(on) }

// pump copies from src to dst, dropping what it reads while the black hole
// is on; it returns when either side fails.
func (b *Blackhole) pump(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !b.on.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
