//go:build unix && !aix

package registryclient

import (
	"errors"
	"syscall"
)

// idleAlive peeks at an idle connection without waiting and without taking
// anything off the socket. An idle HTTP/1.1 connection has nothing to read:
// "would block" means the server still keeps it. End of file (the server or
// a proxy closed it as idle), unsolicited bytes (a 408 or a close_notify
// before the close) and every error mean that a request written to it would
// most likely get no answer.
func idleAlive(raw syscall.RawConn) bool {
	alive := false
	err := raw.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK)
		// Done either way: returning false would park the goroutine until
		// the socket is readable, the very wait this check must not make.
		return true
	})
	return err == nil && alive
}
