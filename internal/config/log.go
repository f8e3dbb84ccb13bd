package config

import (
	"log/slog"
	"strings"
)

// LogOptions are the slog handler options every command logs with: records
// at level and above, and durations as numbers of seconds under a key that
// says so ("wait": 250ms logs as "wait_seconds": 0.25), so a log pipeline
// can sum, compare and chart them as it does the metrics (which are in
// seconds too) instead of parsing "1m0s" or slog's nanoseconds.
func LogOptions(level slog.Leveler) *slog.HandlerOptions {
	return &slog.HandlerOptions{Level: level, ReplaceAttr: durationsAsSeconds}
}

func durationsAsSeconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	key := a.Key
	if !strings.HasSuffix(key, "_seconds") {
		key += "_seconds"
	}
	return slog.Float64(key, a.Value.Duration().Seconds())
}
