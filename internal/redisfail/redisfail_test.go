package redisfail

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

// reply is a Redis error reply, as go-redis returns one.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

// TestWrap: Redis not answering, or answering that it cannot serve for now,
// becomes ErrUnavailable; an answer (a script error, a refusal) does not,
// and neither does the caller's own cancellation. Errors come from a real
// redis-server where one can make them.
func TestWrap(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	scriptErr := c.Eval(ctx, "return redis.call('nope')", nil).Err()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cancelErr := c.Ping(cancelled).Err()
	srv.Stop()
	refused := c.Ping(ctx).Err()
	closed := redis.NewClient(&redis.Options{Addr: srv.Addr})
	closed.Close()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"wrapped again", fmt.Errorf("record a row: %w", Wrap(refused)), true},
		{"closed client", closed.Ping(ctx).Err(), true},
		{"pool timeout", redis.ErrPoolTimeout, true},
		{"deadline", context.DeadlineExceeded, true},
		{"loading", reply("LOADING Redis is loading the dataset in memory"), true},
		{"cluster down", reply("CLUSTERDOWN The cluster is down"), true},
		{"script error", scriptErr, false},
		{"read-only replica", reply("READONLY You can't write against a read only replica."), false},
		{"our own cancellation", cancelErr, false},
		{"not Redis's", errors.New("upload u1 is unknown"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("the case produced no error")
			}
			got := Wrap(tc.err)
			if errors.Is(got, ErrUnavailable) != tc.want || Is(tc.err) != tc.want {
				t.Errorf("Wrap(%v) = %v, Is = %v; want unavailable %v", tc.err, got, Is(tc.err), tc.want)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("Wrap(%v) = %v lost the original error", tc.err, got)
			}
		})
	}
	if Wrap(nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
}

func TestNamed(t *testing.T) {
	a, b := Named("the throttle's Redis could not answer"), Named("the circuit's Redis could not answer")
	err := fmt.Errorf("reserve for seller s: %w", a)
	if !errors.Is(err, a) || !errors.Is(err, ErrUnavailable) || errors.Is(err, b) {
		t.Fatalf("errors.Is on %v: own %v, ErrUnavailable %v, another package's %v; want true, true, false",
			err, errors.Is(err, a), errors.Is(err, ErrUnavailable), errors.Is(err, b))
	}
	if a.Error() != "the throttle's Redis could not answer" {
		t.Fatalf("Error() = %q", a.Error())
	}
}
