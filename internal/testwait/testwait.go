// Package testwait waits, in a test, for a condition that another goroutine
// or process makes true: a server up, a row registered, a write on the wire.
// Tests wait on the condition they mean, never on a fixed sleep, so a busy
// machine slows them down instead of failing them.
package testwait

import "time"

// TB is the part of testing.TB that For uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// maxPoll is the longest pause between two looks at the condition. The
// first looks come quicker (1 ms, then doubling): a condition that is
// nearly met is seen at once, and a slow one (a process to start, a window
// to pass) is not asked hundreds of times a second, which would load the
// machine the test is waiting on.
const maxPoll = 50 * time.Millisecond

// For returns once cond holds, and fails t, naming what it waited for, when
// it does not hold within `within`. cond runs on the caller's goroutine.
func For(t TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPoll)
	}
}
