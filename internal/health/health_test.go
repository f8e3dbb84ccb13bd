package health

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testwait"
)

// TestReadyNamesWhatIsNotReady: /readyz is 200 "ok" while every condition
// holds, else 503 with each failing one's message on one line.
func TestReadyNamesWhatIsNotReady(t *testing.T) {
	get := func(h http.Handler) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	ok := func() error { return nil }
	if code, body := get(Ready(ok, ok)); code != 200 || body != "ok\n" {
		t.Errorf("all ready: %d %q", code, body)
	}
	code, body := get(Ready(ok, func() error { return errors.New("kafka: no answer within 3s") }, func() error { return errors.New("redis: not checked yet") }))
	if code != 503 || body != "not ready: kafka: no answer within 3s; redis: not checked yet\n" {
		t.Errorf("two not ready: %d %q", code, body)
	}
	if code, body := get(Live(func() error { return errors.New("the consumer is not running") })); code != 503 || body != "not live: the consumer is not running\n" {
		t.Errorf("not live: %d %q", code, body)
	}
}

// TestMonitorDoesNotWaitForAHungProbe: a probe that ignores its context
// (a client that waits out its own read timeout) fails its check at the
// monitor's timeout, delays no other check, and is not started again
// while it hangs.
func TestMonitorDoesNotWaitForAHungProbe(t *testing.T) {
	release := make(chan struct{})
	var started, fast atomic.Int32
	m := &Monitor{Interval: 20 * time.Millisecond, Timeout: 100 * time.Millisecond, Checks: []Check{
		{Name: "hung", Probe: func(context.Context) error { started.Add(1); <-release; return nil }},
		{Name: "fast", Probe: func(context.Context) error { fast.Add(1); return nil }},
	}}
	if err := m.Err(); err == nil || !strings.Contains(err.Error(), "hung: not checked yet") {
		t.Fatalf("before the first probe: %v, want not checked yet", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	begin := time.Now()
	testwait.For(t, 5*time.Second, "the hung check to fail", func() bool {
		err := m.Err()
		return err != nil && strings.Contains(err.Error(), "hung: no answer within 100ms")
	})
	if d := time.Since(begin); d > time.Second {
		t.Errorf("the hung check failed after %s, want about its 100ms timeout", d)
	}
	testwait.For(t, 5*time.Second, "the fast check to go on being probed", func() bool { return fast.Load() >= 5 })
	if err := m.Err(); err == nil || strings.Contains(err.Error(), "fast") {
		t.Errorf("with one check hung: %v, want it alone named", err)
	}
	if n := started.Load(); n != 1 {
		t.Errorf("the hung probe was started %d times while it hung, want 1", n)
	}
	close(release)
	testwait.For(t, 5*time.Second, "every check to pass once the hung probe returns", func() bool { return m.Err() == nil })
}
