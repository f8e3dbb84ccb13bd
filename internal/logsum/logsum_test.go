package logsum

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testwait"
)

// lines is a concurrency-safe sink of JSON log lines.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) all(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if s == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("not a JSON line: %q", s)
		}
		out = append(out, m)
	}
	return out
}

func newLogger(interval time.Duration) (*slog.Logger, *Handler, *lines) {
	out := &lines{}
	h := New(slog.NewJSONHandler(out, nil), interval)
	return slog.New(h), h, out
}

const rowWarning = "the row's upload has no record in Redis"

// 300 identical warnings in a burst are two lines: the first, and one
// summary with the 299 others when the interval ends.
func TestBurstIsTwoLines(t *testing.T) {
	log, h, out := newLogger(100 * time.Millisecond)
	defer h.Close()
	for i := range 300 {
		log.Warn(rowWarning, "row", i)
	}
	testwait.For(t, 5*time.Second, "the summary line", func() bool { return len(out.all(t)) >= 2 })
	time.Sleep(300 * time.Millisecond) // nothing else comes
	got := out.all(t)
	if len(got) != 2 {
		t.Fatalf("300 identical warnings logged %d lines, want 2: %v", len(got), got)
	}
	if got[0]["row"] != 0.0 || got[0]["repeated"] != nil {
		t.Errorf("the first line is %v, want the first warning as it was", got[0])
	}
	if got[1]["msg"] != rowWarning || got[1]["level"] != "WARN" || got[1]["repeated"] != 299.0 {
		t.Errorf("the summary is %v, want the message at WARN with repeated=299", got[1])
	}
}

// Close writes the pending count: nothing is lost at shutdown, even long
// before the interval ends.
func TestCloseFlushesTheCount(t *testing.T) {
	log, h, out := newLogger(time.Hour)
	for i := range 300 {
		log.Warn(rowWarning, "row", i)
	}
	if n := len(out.all(t)); n != 1 {
		t.Fatalf("before Close: %d lines, want 1 (the first)", n)
	}
	h.Close()
	got := out.all(t)
	if len(got) != 2 || got[1]["repeated"] != 299.0 {
		t.Fatalf("after Close: %v, want the first line and repeated=299", got)
	}
	log.Warn(rowWarning)
	if n := len(out.all(t)); n != 3 {
		t.Errorf("a line after Close: %d lines in all, want 3 (it passes)", n)
	}
}

// Other messages, and the same message at another level, are counted apart.
func TestDistinctMessagesNotMerged(t *testing.T) {
	log, h, out := newLogger(time.Hour)
	for range 100 {
		log.Warn("a")
		log.Warn("b")
		log.Error("a")
		log.With("component", "go-redis").Warn("a")
	}
	h.Close()
	counts := map[string]float64{}
	for _, m := range out.all(t) {
		k := fmt.Sprint(m["level"], " ", m["msg"])
		if r, ok := m["repeated"]; ok {
			counts[k] += r.(float64)
		} else {
			counts[k]++
		}
	}
	want := map[string]float64{"WARN a": 200, "WARN b": 100, "ERROR a": 100}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%s: %v records accounted for, want %v (all: %v)", k, counts[k], n, counts)
		}
	}
	if n := len(out.all(t)); n != 6 {
		t.Errorf("%d lines, want 6 (a first line and a summary per level and message)", n)
	}
}

// A message that stopped repeating is forgotten after an interval, and its
// next record passes at once.
func TestQuietMessagePassesAgain(t *testing.T) {
	log, h, out := newLogger(50 * time.Millisecond)
	defer h.Close()
	log.Warn("x")
	log.Warn("x")
	testwait.For(t, 5*time.Second, "the summary", func() bool { return len(out.all(t)) == 2 })
	time.Sleep(150 * time.Millisecond) // an interval with no record forgets it
	log.Warn("x")
	if got := out.all(t); len(got) != 3 || got[2]["repeated"] != nil {
		t.Errorf("the message after a quiet interval: %v, want it passed as a first line", got)
	}
}

// Memory is bounded: beyond MaxKeys messages, records pass unsummarised.
func TestKeysBounded(t *testing.T) {
	log, h, out := newLogger(time.Hour)
	for i := range MaxKeys + 100 {
		log.Info(fmt.Sprintf("message %d", i))
		log.Info(fmt.Sprintf("message %d", i))
	}
	h.s.mu.Lock()
	n := len(h.s.entries)
	h.s.mu.Unlock()
	if n > MaxKeys {
		t.Errorf("%d messages tracked, want at most %d", n, MaxKeys)
	}
	h.Close()
	if got, want := len(out.all(t)), 2*MaxKeys+2*100; got != want {
		t.Errorf("%d lines, want %d (a first line and a summary for each tracked message, every line of the others)", got, want)
	}
}

// Interval 0 passes every record.
func TestZeroIntervalPassesEverything(t *testing.T) {
	log, h, out := newLogger(0)
	for range 10 {
		log.Warn("x")
	}
	h.Close()
	if n := len(out.all(t)); n != 10 {
		t.Errorf("%d lines, want 10", n)
	}
}

// Many goroutines logging at once lose no record: each is on a line or in a
// count (run with -race).
func TestConcurrentNothingLost(t *testing.T) {
	log, h, out := newLogger(5 * time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				log.Warn(rowWarning, "g", g, "i", i)
			}
		}()
	}
	wg.Wait()
	h.Close()
	total := 0.0
	for _, m := range out.all(t) {
		if r, ok := m["repeated"]; ok {
			total += r.(float64)
		} else {
			total++
		}
	}
	if total != 4000 {
		t.Errorf("%v records accounted for, want 4000", total)
	}
}
