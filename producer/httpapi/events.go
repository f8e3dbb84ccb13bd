package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"time"

	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// ProgressEvent is the data of a "progress" event of GET
// /v1/uploads/{id}/events.
type ProgressEvent struct {
	ID                string     `json:"id"`
	State             string     `json:"state"`
	Total             int        `json:"total"`
	Registered        int        `json:"registered"`
	AlreadyRegistered int        `json:"already_registered"`
	Failed            int        `json:"failed"`
	RowsWaiting       int        `json:"rows_waiting"`
	Percent           int        `json:"percent"` // rows done (registered, already registered or failed) of the total
	ETA               *time.Time `json:"eta"`     // when the last row is expected to be registered; null when none waits or no estimate
	// ETAText is ETA as the pages say it: in the stream's language and
	// time zone (Server.zone), the zone named.
	ETAText string `json:"eta_text,omitempty"`
	Done    bool   `json:"done"`
	// FinishedAt is when the last row was done, once every row is;
	// FinishedText says it as ETAText says ETA.
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
	FinishedText string     `json:"finished_text,omitempty"`
	// RowsAhead is the waiting rows of the seller's earlier uploads, which
	// take their slots first (why an upload can sit at 0 %).
	RowsAhead int `json:"rows_ahead"`
	// Marketplace and Notice are the upload status's (upload.UploadView):
	// "not_answering", "failing" (this seller's calls alone fail) or "misconfigured" while rows wait on the
	// marketplace, so the page shows the outage as it starts and ends.
	Marketplace string `json:"marketplace,omitempty"`
	Notice      string `json:"notice,omitempty"`
	// FailedRows is every failed row, sent with the first event and again
	// whenever the failed count changed; absent otherwise. Rows whose SKU
	// is registered already with other content are not among them (nothing
	// in the file is wrong) but in OtherContentRows, sent with them.
	FailedRows []FailedRow `json:"failed_rows,omitzero"`
	// TwiceRows are the registered rows whose SKU the marketplace now holds
	// twice (RegisteredTwice counts them; they are counted in Registered
	// too), sent with FailedRows and whenever their count changed.
	TwiceRows       []FailedRow `json:"twice_rows,omitempty"`
	RegisteredTwice int         `json:"registered_twice"`
	// FailedRowsMore, OtherContentRowsMore and TwiceRowsMore count the rows
	// of each list left out (at most 200 are sent, and 320 KiB of text):
	// the fix file has every one.
	FailedRowsMore       int `json:"failed_rows_more,omitempty"`
	OtherContentRowsMore int `json:"other_content_rows_more,omitempty"`
	TwiceRowsMore        int `json:"twice_rows_more,omitempty"`
	// OtherContent counts those rows (they are counted in Failed too);
	// ToFix counts the failed rows that need a fix in the file.
	OtherContent     int         `json:"other_content"`
	ToFix            int         `json:"to_fix"`
	OtherContentRows []FailedRow `json:"other_content_rows,omitempty"`
	// End is the end state once the upload is done ("ok", "other",
	// "partial", "failed"; endState) and EndText says it in the stream's
	// language: the page shows them as they come, so the rule is the
	// server's alone.
	End     string `json:"end,omitempty"`
	EndText string `json:"end_text,omitempty"`
}

// FailedRow is a failed row and why.
type FailedRow struct {
	Row    int    `json:"row"`
	Field  string `json:"field,omitempty"`
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason"`
	// values are what Reason quotes of the seller's file (ReasonHTML).
	values []string
}

// ReasonHTML is Reason for a page, the values it quotes from the seller's
// file set apart (isolated).
func (r FailedRow) ReasonHTML() template.HTML { return isolated(r.Reason, textShownLen, r.values...) }

// FieldHTML is Field for a page, set apart: it is the seller's header.
func (r FailedRow) FieldHTML() template.HTML { return isolated(r.Field, headerShownLen, r.Field) }

func percent(st uploadstatus.Status) int {
	if st.Total == 0 {
		return 0
	}
	return (st.Registered + st.AlreadyRegistered + st.Failed) * 100 / st.Total
}

// rowLists are the rows a seller must see one by one, said in a language:
// the failed rows to fix in the file, and apart the rows with nothing to fix
// in it: those whose SKU is registered already with other content (Other)
// and those registered while the marketplace already held their SKU
// (Twice, a duplicate to delete). Each list holds its first maxRowsListed
// rows, the failed rows within rowsBudget bytes and Other and Twice within
// half of it each, each row's field and reason cut
// (bounds.go); the *More fields count the rows left out, which the fix
// file and the report have.
type rowLists struct {
	Failed, Other, Twice             []FailedRow
	FailedMore, OtherMore, TwiceMore int
}

func listRows(lang string, st uploadstatus.Status) rowLists {
	l := rowLists{Failed: []FailedRow{}}
	header := make([]string, len(st.Header))
	for i, h := range st.Header {
		header[i] = cutRunes(h, headerShownLen)
	}
	var usedFailed, usedOther, usedTwice int
	for _, r := range st.Rows {
		var list *[]FailedRow
		var used, more *int
		budget := rowsBudget / 2
		switch {
		case r.State == uploadstatus.Failed && r.Code == uploadstatus.OtherContent:
			list, used, more = &l.Other, &usedOther, &l.OtherMore
		case r.State == uploadstatus.Failed:
			list, used, more, budget = &l.Failed, &usedFailed, &l.FailedMore, rowsBudget
		case r.State == uploadstatus.Registered && r.Code == uploadstatus.RegisteredTwice:
			list, used, more = &l.Twice, &usedTwice, &l.TwiceMore
		default:
			continue
		}
		if len(*list) >= maxRowsListed || *used >= budget {
			*more++
			continue
		}
		var values []string
		r.Details = slices.Clone(r.Details) // st's rows stay as they are
		for i := range r.Details {
			r.Details[i].Params = cutParams(r.Details[i].Params)
			values = paramValues(r.Details[i].Params, values...)
		}
		r.Reason = cutRunes(r.Reason, textShownLen)
		fr := FailedRow{Row: r.Row, Field: cutRunes(upload.FieldIn(lang, header, r.Field), headerShownLen), Code: r.Code,
			Reason: cutRunes(upload.RowReasonBeside(lang, header, r), textShownLen)}
		fr.values = append(values, fr.Field, r.ProductID)
		*used += escapedLen(fr.Field) + escapedLen(fr.Reason) + len(fr.Code) + cellMarkup
		*list = append(*list, fr)
	}
	return l
}

// finishedAt is when the upload's last row result was recorded; zero
// before any was.
func finishedAt(st uploadstatus.Status) time.Time {
	var last time.Time
	for _, r := range st.Rows {
		if r.At.After(last) {
			last = r.At
		}
	}
	return last
}

func progressEvent(p upload.Progress) ProgressEvent {
	return ProgressEvent{ID: p.ID, State: p.State, Total: p.Total, Registered: p.Registered, AlreadyRegistered: p.AlreadyRegistered,
		Failed: p.Failed, OtherContent: p.OtherContent, RegisteredTwice: p.Twice, ToFix: p.ToFix(), RowsWaiting: p.RowsWaiting, Percent: percent(p.Status), ETA: p.ETA,
		Done: p.Done() || p.State == uploadstatus.PublishFailed, RowsAhead: p.RowsAhead, Marketplace: p.Marketplace, Notice: p.Notice}
}

// heartbeat keeps proxies from closing a quiet stream.
const heartbeat = 15 * time.Second

// sessionRecheck is how often a stream asks the store whether its session
// still lives: a signed-out session's streams end within it (the other
// tabs of the browser hear of the sign-out at once), and a stream costs
// the store one read per sessionRecheck, not one per tick.
const sessionRecheck = 2 * time.Second

// apiEvents streams the upload's progress as server-sent events: a
// "progress" event at once and whenever the counts or the estimate change
// (read every EventsInterval), then a "done" event when every row is done.
// The seller's own uploads only; an EventSource's cookie works like a
// bearer token.
func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request) {
	c, ok := s.apiCaller(w, r, false)
	if !ok {
		return
	}
	p, ok := s.ownUpload(w, r, c.seller)
	if !ok {
		return
	}
	if !s.streams.take(c.seller) {
		w.Header().Set("Retry-After", "10")
		writeProblem(w, r, problem{Status: http.StatusTooManyRequests, Code: "too_many_streams",
			Detail: fmt.Sprintf("you have %d progress streams open; close a page and try again", s.streams.max)})
		return
	}
	defer s.streams.give(c.seller)

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: pass events on as they come
	w.WriteHeader(http.StatusOK)
	interval := orDefault(s.EventsInterval, DefaultEventsInterval)
	// The server's write timeout is meant for uploads; a stream moves its
	// own deadline before each write.
	write := func(format string, args ...any) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(interval + heartbeat))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write("retry: %d\n\n", (3 * time.Second).Milliseconds()) {
		return
	}
	end := time.NewTimer(orDefault(s.MaxStreamTime, DefaultMaxStreamTime))
	defer end.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last ProgressEvent
	lastFailed, lastTwice, lastWrite, sessionSeen := -1, -1, time.Now(), time.Now()
	lang, zone := pickLang(r), s.streamZone(r)
	for first := true; ; first = false {
		ev := progressEvent(p)
		if ev.Done && p.State != uploadstatus.PublishFailed {
			ev.End, ev.EndText = endState(p.Status), endText(lang, p.Status)
		}
		if ev.ETA != nil {
			ev.ETAText = sayTime(lang, *ev.ETA, zone)
		}
		if at := finishedAt(p.Status); ev.Done && !at.IsZero() {
			ev.FinishedAt, ev.FinishedText = &at, msg(lang, "detail.finished", sayTime(lang, at, zone))
		}
		cmp := ev
		if cmp.ETA != nil { // the estimate moves by milliseconds as it is re-read: a second is news
			t := cmp.ETA.Round(time.Second)
			cmp.ETA = &t
		}
		if changed(cmp, last) || first {
			if ev.Failed != lastFailed || ev.RegisteredTwice != lastTwice {
				l := listRows(lang, p.Status)
				ev.FailedRows, ev.OtherContentRows, ev.TwiceRows = l.Failed, l.Other, l.Twice
				ev.FailedRowsMore, ev.OtherContentRowsMore, ev.TwiceRowsMore = l.FailedMore, l.OtherMore, l.TwiceMore
				lastFailed, lastTwice = ev.Failed, ev.RegisteredTwice
			}
			b, _ := json.Marshal(ev)
			if !write("event: progress\ndata: %s\n\n", b) {
				return
			}
			last, lastWrite = cmp, time.Now()
		}
		if ev.Done {
			write("event: done\ndata: {}\n\n")
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		case <-end.C:
			return
		case <-tick.C:
		}
		if time.Since(lastWrite) >= heartbeat {
			if !write(": keep-alive\n\n") {
				return
			}
			lastWrite = time.Now()
		}
		if c.session != nil && time.Since(sessionSeen) >= sessionRecheck {
			// A session's stream lasts as long as the session: signing out
			// (in any tab, on any replica) or its end stops it.
			sessionSeen = time.Now()
			if _, err := s.Sessions.Get(r.Context(), c.id); errors.Is(err, ErrNoSession) {
				write("event: signedout\ndata: {}\n\n")
				return
			}
		}
		next, err := s.Uploader.Progress(r.Context(), c.seller, p.ID)
		if err != nil {
			// Redis blinked, or the upload expired: keep the last state and
			// try again at the next tick; the browser shows what it had.
			s.logr(r).Warn("event stream: could not read the upload's progress", "upload_id", p.ID, "err", err)
			continue
		}
		p = next
	}
}

func changed(a, b ProgressEvent) bool {
	sameETA := (a.ETA == nil) == (b.ETA == nil) && (a.ETA == nil || a.ETA.Equal(*b.ETA))
	return !sameETA || a.State != b.State || a.Registered != b.Registered || a.AlreadyRegistered != b.AlreadyRegistered ||
		a.Failed != b.Failed || a.RowsWaiting != b.RowsWaiting || a.Total != b.Total || a.Done != b.Done ||
		a.RowsAhead != b.RowsAhead || a.Marketplace != b.Marketplace || a.Notice != b.Notice
}
