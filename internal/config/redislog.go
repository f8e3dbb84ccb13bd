package config

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RouteRedisLogs sends go-redis's own log lines (pool and failover messages,
// which it prints with the standard logger by default) through log at warn
// level, so an operator's log pipeline sees one structured stream. go-redis
// keeps its logger in a process-wide variable: call this once, from main.
func RouteRedisLogs(log *slog.Logger) {
	redis.SetLogger(redisLogger{log.With("component", "go-redis")})
}

type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}
