package logctx

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
)

func TestLoggerAddsTheContextsAttributes(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewJSONHandler(&buf, nil))
	ctx := With(context.Background(), slog.String("request_id", "r1"))
	ctx = With(ctx, slog.String("seller", "s"))
	Logger(ctx, base).Info("one")
	Logger(context.Background(), base).Info("two")
	dec := json.NewDecoder(&buf)
	var one, two map[string]any
	if err := dec.Decode(&one); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&two); err != nil {
		t.Fatal(err)
	}
	if one["request_id"] != "r1" || one["seller"] != "s" {
		t.Errorf("line logged with the context: %v, want request_id r1 and seller s", one)
	}
	if _, ok := two["request_id"]; ok {
		t.Errorf("line logged without the context: %v, want no request_id", two)
	}
}
