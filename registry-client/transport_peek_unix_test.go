//go:build unix && !aix

package registryclient

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

func TestIdleAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	connect := func(t *testing.T) (client *net.TCPConn, raw syscall.RawConn, server net.Conn) {
		t.Helper()
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		server, err = ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { server.Close() })
		client = nc.(*net.TCPConn)
		raw, err = client.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		return client, raw, server
	}
	// becomes waits for what the peer did to reach this end.
	becomes := func(raw syscall.RawConn, want bool) bool {
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if idleAlive(raw) == want {
				return true
			}
		}
		return false
	}

	t.Run("idle", func(t *testing.T) {
		_, raw, _ := connect(t)
		start := time.Now()
		if !idleAlive(raw) {
			t.Error("an open idle connection is not alive")
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("the peek took %v: it must not wait", d)
		}
	})
	t.Run("closed by the server", func(t *testing.T) {
		_, raw, server := connect(t)
		server.Close()
		if !becomes(raw, false) {
			t.Error("a connection the server closed is still alive")
		}
	})
	t.Run("unsolicited bytes, left unread", func(t *testing.T) {
		client, raw, server := connect(t)
		if _, err := server.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if !becomes(raw, false) {
			t.Error("a connection with bytes nobody asked for is still alive")
		}
		b := make([]byte, 1)
		if _, err := io.ReadFull(client, b); err != nil || b[0] != 'x' {
			t.Errorf("the peek took the byte: read %q, %v", b, err)
		}
	})
}
