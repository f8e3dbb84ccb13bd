// Package testproxy puts a TCP proxy between a test's client and a real
// server (Redis), so a test can delay, drop or withhold what passes: the
// network faults real parts cannot be asked to make.
package testproxy

import (
	"net"
	"testing"
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
