package config

import "log/slog"

// LogOptions are the slog handler options every command logs with: records
// at level and above, and durations as text ("60s", "250ms") rather than
// slog's nanoseconds, as operators read them and as the flags take them.
func LogOptions(level slog.Leveler) *slog.HandlerOptions {
	return &slog.HandlerOptions{Level: level, ReplaceAttr: durationsAsText}
}

func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}
