//go:build !unix || aix

package registryclient

import "syscall"

// idleAlive has no non-blocking peek here (no MSG_DONTWAIT), so every idle
// connection counts as alive: where a server closed one, the next call on it
// fails as Transient and the caller retries it.
func idleAlive(syscall.RawConn) bool { return true }
