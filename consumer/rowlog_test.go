package consumer

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
)

// TestRowLoggerWritesWhatWithWould: the row's lazily formatted attributes
// come out exactly as Logger.With would write them, before the record's own,
// outside a group opened later, and with nothing written below the level.
func TestRowLoggerWritesWhatWithWould(t *testing.T) {
	r := &row{msg: kafka.Message{Partition: 3, Offset: 42}, m: bulkreg.Message{SellerID: "s-1", UploadID: "u-9", Row: 7}}
	for _, tc := range []struct {
		name string
		log  func(l *slog.Logger)
	}{
		{"a record", func(l *slog.Logger) { l.Warn("late", "by", "3ms") }},
		{"With after", func(l *slog.Logger) { l.With("attempt", 2).Error("failed", "err", "503") }},
		{"a group after", func(l *slog.Logger) { l.WithGroup("call").Info("answered", "status", 201) }},
		{"below the level", func(l *slog.Logger) { l.Debug("row done") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lazy, eager bytes.Buffer
			opts := &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}}
			tc.log(rowLogger(slog.New(slog.NewTextHandler(&lazy, opts)), r))
			tc.log(slog.New(slog.NewTextHandler(&eager, opts)).With("seller", "s-1", "upload_id", "u-9", "row", 7, "partition", 3, "offset", int64(42)))
			if lazy.String() != eager.String() {
				t.Errorf("row logger wrote\n%q\nLogger.With writes\n%q", lazy.String(), eager.String())
			}
			if tc.name != "below the level" && !strings.Contains(lazy.String(), "seller=s-1 upload_id=u-9 row=7 partition=3 offset=42") {
				t.Errorf("the row's attributes are missing: %q", lazy.String())
			}
		})
	}
}
