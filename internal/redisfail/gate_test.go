package redisfail

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testwait"
)

// TestGateHoldsWaitersWhileRedisIsDown: a Down holds every Wait until the
// gate's own ping hears Redis again; onDown is called once per outage, and
// a Wait whose context ends first reports false.
func TestGateHoldsWaitersWhileRedisIsDown(t *testing.T) {
	var answers atomic.Bool // what the ping hears
	var downs atomic.Int64
	g := NewGate(func(context.Context) error {
		if answers.Load() {
			return nil
		}
		return errors.New("connection refused")
	}, 5*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)), func() { downs.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.Run(ctx)

	if !g.Healthy() || !g.Wait(ctx) {
		t.Fatal("a new gate holds its callers; want Redis taken as up until a call fails")
	}
	g.Down(errors.New("i/o timeout"))
	g.Down(errors.New("i/o timeout"))
	if g.Healthy() {
		t.Fatal("Healthy after Down")
	}
	if n := downs.Load(); n != 1 {
		t.Errorf("onDown called %d times for one outage, want 1", n)
	}
	short, cancelShort := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancelShort()
	if g.Wait(short) {
		t.Fatal("Wait returned true while Redis does not answer the ping")
	}

	released := make(chan bool, 1)
	go func() { released <- g.Wait(ctx) }()
	select {
	case <-released:
		t.Fatal("Wait returned before Redis answered")
	case <-time.After(20 * time.Millisecond):
	}
	answers.Store(true)
	select {
	case ok := <-released:
		if !ok {
			t.Fatal("Wait reported false once Redis answered")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait still held 5 s after Redis answered the ping")
	}
	testwait.For(t, time.Second, "the gate healthy again", g.Healthy)

	answers.Store(false)
	g.Down(errors.New("EOF"))
	if n := downs.Load(); n != 2 {
		t.Errorf("onDown called %d times over two outages, want 2", n)
	}
}
