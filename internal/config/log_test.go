package config

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// TestDurationsLogAsText: a duration reads in the log as the flags take it
// ("60s"), not as slog's nanoseconds, in groups and With attributes too.
func TestDurationsLogAsText(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, LogOptions(slog.LevelInfo))).With("window", time.Minute)
	log.Debug("not shown", "wait", time.Second)
	log.Info("paced", "wait", 250*time.Millisecond, slog.Group("hold", "for", 2*time.Second), "rows", 3)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("one JSON record, got %q: %v", buf.String(), err)
	}
	hold, _ := rec["hold"].(map[string]any)
	if rec["window"] != "1m0s" || rec["wait"] != "250ms" || hold["for"] != "2s" || rec["rows"] != float64(3) {
		t.Errorf("record %v, want window 1m0s, wait 250ms, hold.for 2s, rows 3", rec)
	}
}
