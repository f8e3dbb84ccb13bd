package consumer

import (
	"context"
	"log/slog"
	"slices"
)

// rowLogger is the logger of one row: every record carries the row's
// seller, upload, row, partition and offset. The attributes are formatted
// only when a record is written (lazyAttrs): Logger.With formats them at
// once, in CPU and memory for every row in flight, though most rows write
// nothing above the debug level.
//
//go:noinline
func rowLogger(base *slog.Logger, r *row) *slog.Logger {
	return slog.New(&lazyAttrs{h: base.Handler(), attrs: []slog.Attr{
		slog.String("seller", r.m.SellerID), slog.String("upload_id", r.m.UploadID), slog.Int("row", r.m.Row),
		slog.Int("partition", r.msg.Partition), slog.Int64("offset", r.msg.Offset),
	}})
}

// lazyAttrs adds attrs to every record h handles, without formatting them
// before one is.
type lazyAttrs struct {
	h     slog.Handler
	attrs []slog.Attr
}

func (l *lazyAttrs) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l *lazyAttrs) Handle(ctx context.Context, rec slog.Record) error {
	return l.h.WithAttrs(l.attrs).Handle(ctx, rec)
}

func (l *lazyAttrs) WithAttrs(as []slog.Attr) slog.Handler {
	return &lazyAttrs{h: l.h, attrs: append(slices.Clip(l.attrs), as...)}
}

func (l *lazyAttrs) WithGroup(name string) slog.Handler {
	return l.h.WithAttrs(l.attrs).WithGroup(name)
}
