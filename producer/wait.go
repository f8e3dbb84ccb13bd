package producer

import (
	"context"
	"fmt"
	"time"

	"github.com/bulkreg/bulkreg/uploadstatus"
)

// StatusGetter reads an upload's status (*uploadstatus.Store).
type StatusGetter interface {
	Get(ctx context.Context, uploadID string) (uploadstatus.Status, error)
}

// WaitDone polls the upload's status every interval, calling progress with
// each reading, until every row is registered or failed or ctx ends. A
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
		} else {
			lastErr = err
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

// ProgressBar renders a status as one line: a bar of registered (#) and
// failed (x) rows out of the total, then the counts.
func ProgressBar(s uploadstatus.Status, width int) string {
	if width <= 0 {
		width = 40
	}
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = '.'
	}
	if s.Total > 0 {
		reg := s.Registered * width / s.Total
		failed := (s.Registered + s.Failed) * width / s.Total
		for i := 0; i < failed && i < width; i++ {
			bar[i] = 'x'
		}
		for i := 0; i < reg && i < width; i++ {
			bar[i] = '#'
		}
	}
	pct := 0
	if s.Total > 0 {
		pct = (s.Registered + s.Failed) * 100 / s.Total
	}
	return fmt.Sprintf("[%s] %3d%%  %d/%d registered, %d failed, %d waiting", bar, pct, s.Registered, s.Total, s.Failed, s.Waiting)
}
