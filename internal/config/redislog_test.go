package config

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
)

func TestRedisLoggerWritesStructuredWarnings(t *testing.T) {
	var buf bytes.Buffer
	l := redisLogger{slog.New(slog.NewJSONHandler(&buf, nil)).With("component", "go-redis")}
	l.Printf(context.Background(), "redis: %s:%d: connection pool timeout\n", "10.0.0.1", 6379)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q (%v)", buf.String(), err)
	}
	if line["level"] != "WARN" || line["component"] != "go-redis" || line["msg"] != "redis: 10.0.0.1:6379: connection pool timeout" {
		t.Fatalf("line = %v", line)
	}
}
