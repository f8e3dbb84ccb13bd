// Package logsum summarises repeated log lines: a slog.Handler wrapper that
// passes the first record of each level and message, counts the records of
// the same level and message that follow, and writes one line with the
// count per interval. A fault that hits every row (hundreds of identical
// warnings in a fraction of a second) then costs two lines, not hundreds,
// and no count is lost: Close writes what is pending.
//
// Records are keyed by level and message only, so their attributes (a row's
// id, an upload's) are summarised away; the summary carries the attributes
// of the logger that wrote the last one (logger.With), the count
// ("repeated") and the span it covers ("within", in seconds with
// config.LogOptions). At most MaxKeys messages are tracked at once; records
// of further messages pass unsummarised until an interval frees a place.
package logsum

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultInterval is how often a summary of each repeated message is
// written: an operator sees a fault within it and reads at most one line
// per message per interval.
const DefaultInterval = 10 * time.Second

// MaxKeys bounds the messages tracked at once (the memory of a summarising
// handler): messages are constant strings in bulkreg, so a few hundred
// cover every one.
const MaxKeys = 1024

type key struct {
	level slog.Level
	msg   string
}

type entry struct {
	first   time.Time    // when the record that passed was written
	count   int          // records counted since the last summary
	handler slog.Handler // the wrapped handler of the last counted record's logger
}

// state is shared by a Handler and every handler derived from it (With,
// WithGroup), so the same message from loggers with other attributes is
// counted once.
type state struct {
	interval time.Duration
	mu       sync.Mutex
	entries  map[key]*entry
	timer    *time.Timer // armed while any message is tracked
	closed   bool
}

// Handler is the summarising wrapper; build it with New.
type Handler struct {
	next slog.Handler
	s    *state
}

// New wraps next. interval ≤ 0 passes every record unsummarised.
func New(next slog.Handler, interval time.Duration) *Handler {
	return &Handler{next: next, s: &state{interval: interval, entries: make(map[key]*entry)}}
}

// Enabled reports what the wrapped handler does.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// WithAttrs returns a handler that shares this one's counts.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(as), s: h.s}
}

// WithGroup returns a handler that shares this one's counts.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), s: h.s}
}

// Handle passes the first record of a level and message, and counts the
// ones that follow it until the next summary.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	s := h.s
	if s.interval <= 0 {
		return h.next.Handle(ctx, r)
	}
	k := key{r.Level, r.Message}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return h.next.Handle(ctx, r)
	}
	if e, ok := s.entries[k]; ok {
		e.count++
		e.handler = h.next
		s.mu.Unlock()
		return nil
	}
	if len(s.entries) < MaxKeys {
		s.entries[k] = &entry{first: r.Time}
		if s.timer == nil {
			s.timer = time.AfterFunc(s.interval, s.tick)
		}
	}
	s.mu.Unlock()
	return h.next.Handle(ctx, r)
}

// tick writes the summaries due and forgets the messages that did not
// repeat since the last tick, so their next record passes again and their
// place is free for another message.
func (s *state) tick() {
	s.mu.Lock()
	s.timer = nil
	if s.closed {
		s.mu.Unlock()
		return
	}
	due := s.takeLocked(false)
	if len(s.entries) > 0 {
		s.timer = time.AfterFunc(s.interval, s.tick)
	}
	s.mu.Unlock()
	write(due)
}

type summary struct {
	k key
	e entry
}

// takeLocked returns the entries with a count, resetting them; it deletes
// those without one, or every entry when all is set.
func (s *state) takeLocked(all bool) []summary {
	var due []summary
	now := time.Now()
	for k, e := range s.entries {
		if e.count == 0 || all {
			if e.count > 0 {
				due = append(due, summary{k, *e})
			}
			delete(s.entries, k)
			continue
		}
		due = append(due, summary{k, *e})
		e.count, e.first = 0, now
	}
	return due
}

func write(due []summary) {
	now := time.Now()
	for _, d := range due {
		r := slog.NewRecord(now, d.k.level, d.k.msg, 0)
		r.AddAttrs(slog.Int("repeated", d.e.count), slog.Duration("within", now.Sub(d.e.first).Round(time.Millisecond)))
		_ = d.e.handler.Handle(context.Background(), r)
	}
}

// Close writes the pending counts and passes every record after it
// unsummarised. Call it at shutdown, after the last line that may repeat.
func (h *Handler) Close() {
	s := h.s
	s.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.closed = true
	due := s.takeLocked(true)
	s.mu.Unlock()
	write(due)
}
