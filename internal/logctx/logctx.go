// Package logctx carries log attributes in a context, so every line logged
// while serving one request names it (request_id) whichever package logs
// it, without handing a logger down every call.
package logctx

import (
	"context"
	"log/slog"
)

type key struct{}

// With returns ctx carrying attrs in addition to those it carries already.
func With(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev := Attrs(ctx)
	all := make([]slog.Attr, 0, len(prev)+len(attrs))
	all = append(append(all, prev...), attrs...)
	return context.WithValue(ctx, key{}, all)
}

// Attrs returns the attributes ctx carries.
func Attrs(ctx context.Context) []slog.Attr {
	if ctx == nil {
		return nil
	}
	a, _ := ctx.Value(key{}).([]slog.Attr)
	return a
}

// Logger returns base with the attributes ctx carries.
func Logger(ctx context.Context, base *slog.Logger) *slog.Logger {
	attrs := Attrs(ctx)
	if len(attrs) == 0 {
		return base
	}
	args := make([]any, len(attrs))
	for i, a := range attrs {
		args[i] = a
	}
	return base.With(args...)
}
