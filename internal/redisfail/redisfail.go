// Package redisfail tells Redis not answering from every other Redis error,
// once, for every package that talks to Redis. Each of them (throttle,
// uploadstatus, compliance, ledger, circuit) wraps its Redis errors with
// Wrap, so a caller branches with errors.Is(err, redisfail.ErrUnavailable)
// and never needs go-redis or the error's text. A Gate keeps what callers
// learn of it: whether Redis answers, and a wait for it to answer again.
package redisfail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// ErrUnavailable is wrapped in every error of a Redis that did not answer,
// or answered that it cannot serve for now (loading its data, a Cluster or
// Sentinel failover in progress). Nothing was done; asking again later may
// succeed. Other errors (a script error, READONLY, OOM) are answers.
var ErrUnavailable = errors.New("no answer from Redis")

// Wrap returns err with ErrUnavailable wrapped in when err means Redis did
// not answer or cannot serve for now, and err unchanged otherwise (nil stays
// nil). The caller's own cancellation (context.Canceled) is not Redis's
// failure and stays as it is.
func Wrap(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || !unavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Is reports whether err is, or wraps, a Redis that did not answer (after
// Wrap, or straight from go-redis).
func Is(err error) bool { return errors.Is(err, ErrUnavailable) || (err != nil && unavailable(err)) }

func unavailable(err error) bool {
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	// Server states that pass: loading after a restart, a Cluster or
	// Sentinel failover. go-redis gives them as replies, and its failover
	// client reports a master it cannot find by text only.
	for _, prefix := range []string{"LOADING", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	msg := err.Error()
	for _, s := range []string{"connection refused", "i/o timeout", "sentinels specified in configuration are unreachable"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// Named returns a package's own unavailability error: it reads msg, and
// errors.Is finds both it and ErrUnavailable in what wraps it.
func Named(msg string) error { return named{msg} }

type named struct{ msg string }

func (n named) Error() string { return n.msg }
func (named) Unwrap() error   { return ErrUnavailable }
