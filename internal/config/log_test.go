package config

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestDurationsLogAsSeconds: a duration reads in the log as a number of
// seconds under a key ending _seconds, in groups and With attributes too,
// in the JSON and the text handler alike.
func TestDurationsLogAsSeconds(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, LogOptions(slog.LevelInfo))).With("window", time.Minute)
	log.Debug("not shown", "wait", time.Second)
	log.Info("paced", "wait", 250*time.Millisecond, slog.Group("hold", "for", 2*time.Second), "rows", 3, "took_seconds", 1500*time.Millisecond)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("one JSON record, got %q: %v", buf.String(), err)
	}
	hold, _ := rec["hold"].(map[string]any)
	for k, want := range map[string]any{"window_seconds": 60.0, "wait_seconds": 0.25, "rows": 3.0, "took_seconds": 1.5} {
		if rec[k] != want {
			t.Errorf("%s = %v (%T), want %v", k, rec[k], rec[k], want)
		}
	}
	if hold["for_seconds"] != 2.0 {
		t.Errorf("hold.for_seconds = %v, want 2", hold["for_seconds"])
	}
	for _, k := range []string{"window", "wait", "took_seconds_seconds"} {
		if _, ok := rec[k]; ok {
			t.Errorf("record %v still has %s", rec, k)
		}
	}
	buf.Reset()
	slog.New(slog.NewTextHandler(&buf, LogOptions(slog.LevelInfo))).Info("paced", "wait", 250*time.Millisecond)
	if !strings.Contains(buf.String(), "wait_seconds=0.25") {
		t.Errorf("text line %q, want wait_seconds=0.25", buf.String())
	}
}
