package consumer

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(&tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type tlogWriter struct{ t testing.TB }

func (w *tlogWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func testConfig(brokers []string, topic string) Config {
	cfg := DefaultConfig()
	cfg.Brokers = brokers
	cfg.Topic = topic
	cfg.Group = "test-group"
	cfg.SessionTimeout = 2 * time.Second
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.RebalanceTimeout = 5 * time.Second
	cfg.CommitInterval = 100 * time.Millisecond
	cfg.DrainTimeout = MaxDrainTimeout(cfg.SessionTimeout, cfg.HeartbeatInterval) // 1.6 s
	return cfg
}

// timeOf is Deps.RedisTime over c.
func timeOf(c redis.Cmdable) func(context.Context) (time.Time, error) {
	return func(ctx context.Context) (time.Time, error) { return c.Time(ctx).Result() }
}
