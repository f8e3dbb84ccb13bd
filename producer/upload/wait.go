package upload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bulkreg/bulkreg/uploadstatus"
)

// StatusGetter reads an upload's status (*uploadstatus.Store).
type StatusGetter interface {
	Get(ctx context.Context, uploadID string) (uploadstatus.Status, error)
}

// WaitDone polls the upload's status every interval, calling progress with
// each reading, until every row is registered, already registered or failed,
// or ctx ends, or Redis lost the upload's status (an error wrapping
// ErrStatusLost). A
// Redis error is reported to progress's caller only when ctx ends: the
// consumers keep working while Redis blips, so the wait does too.
func WaitDone(ctx context.Context, st StatusGetter, id string, interval time.Duration, progress func(uploadstatus.Status)) (uploadstatus.Status, error) {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last uploadstatus.Status
	var lastErr error
	for {
		s, err := st.Get(ctx, id)
		if err == nil {
			last, lastErr = s, nil
			if progress != nil {
				progress(s)
			}
			if s.Done() || s.State == uploadstatus.PublishFailed {
				return s, nil
			}
			if s.PartlyLost() {
				// Redis lost the upload's record: how many rows it had is
				// gone, so waiting could not tell when it is done.
				return s, fmt.Errorf("part of the status of upload %s was lost (Redis no longer held it at %s): %w", id, s.LostAt.Local().Format(time.DateTime), ErrStatusLost)
			}
		} else {
			lastErr = err
			if errors.Is(err, uploadstatus.ErrNotFound) && last.ID != "" {
				// It was there and is gone: lost with Redis's data (or expired).
				return last, fmt.Errorf("the status of upload %s is gone from Redis (lost with its data, or expired): %w", id, ErrStatusLost)
			}
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return last, fmt.Errorf("waiting for upload %s: %w (last error: %w)", id, ctx.Err(), lastErr)
			}
			return last, fmt.Errorf("waiting for upload %s: %w", id, ctx.Err())
		case <-t.C:
		}
	}
}

// ErrStatusLost is wrapped in WaitDone's error when Redis lost the upload's
// status while waiting: sending the same file again restores it (same
// upload id and Idempotency-Keys: registered rows are replays).
var ErrStatusLost = errors.New("send the same file again to see every row's result; rows registered before are not registered twice")
