package consumer

import (
	"context"
	"log/slog"
	"slices"
)

// rowLogger is the logger of one row: every record carries the row's
// seller, upload, row, partition and offset. The attributes are made only
// when a record is written (rowAttrs): Logger.With formats them at once, in
// CPU and memory for every row in flight, though most rows write nothing
// above the debug level; even a slice of them made ahead would be a
// twentieth of a registered row's allocations.
//
//go:noinline
func rowLogger(base *slog.Logger, r *row) *slog.Logger {
	return slog.New(&rowAttrs{h: base.Handler(), r: r})
}

// rowAttrs adds the row's attributes, then extra, to every record h
// handles, made when one is.
type rowAttrs struct {
	h     slog.Handler
	r     *row
	extra []slog.Attr
}

func (l *rowAttrs) attrs() []slog.Attr {
	r := l.r
	return append([]slog.Attr{
		slog.String("seller", r.m.SellerID), slog.String("upload_id", r.m.UploadID), slog.Int("row", r.m.Row),
		slog.Int("partition", r.msg.Partition), slog.Int64("offset", r.msg.Offset),
	}, l.extra...)
}

func (l *rowAttrs) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l *rowAttrs) Handle(ctx context.Context, rec slog.Record) error {
	return l.h.WithAttrs(l.attrs()).Handle(ctx, rec)
}

func (l *rowAttrs) WithAttrs(as []slog.Attr) slog.Handler {
	return &rowAttrs{h: l.h, r: l.r, extra: append(slices.Clip(l.extra), as...)}
}

func (l *rowAttrs) WithGroup(name string) slog.Handler {
	return l.h.WithAttrs(l.attrs()).WithGroup(name)
}
