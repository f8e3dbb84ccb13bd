package httpapi

import (
	"bytes"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// parsePages parses each page's template with the layout. The templates
// are embedded; a parse error is a build mistake the first test catches.
func parsePages() map[string]*template.Template {
	pages := map[string][]string{
		"signin":  {"signin.html"},
		"message": {"message.html"},
		"upload":  {"upload.html", "check.html"},
		"check":   {"check.html"},
		"uploads": {"uploads.html"},
		"detail":  {"detail.html"},
	}
	out := make(map[string]*template.Template, len(pages))
	for name, files := range pages {
		paths := []string{"web/templates/layout.html"}
		for _, f := range files {
			paths = append(paths, "web/templates/"+f)
		}
		out[name] = template.Must(template.New(name).ParseFS(webFiles, paths...))
	}
	return out
}

// pageData is what every page template gets.
type pageData struct {
	Lang    string
	Zone    *time.Location // the zone the page says times in (Server.zone)
	Title   string
	Page    string // the nav entry to mark current
	Seller  string
	CSRF    string
	Refresh string // the page asks for this address again at once, from its own origin
	// SellerCenter is where a seller signs in to get a sign-in link
	// (Server.SellerCenterURL); empty: the sign-in pages say it in words.
	SellerCenter string

	Bad       bool   // sign-in: the link did not work
	SignedOut bool   // sign-in: the seller has just signed out
	Again     bool   // check without script: the file must be chosen again to register
	Duplicate bool   // detail: this file was uploaded before
	Body      string // message page
	Check     *checkView
	Uploads   []uploadRow
	Poll      int // history: how often, in ms, the page reads its uploads again while one is unfinished
	Next      string
	Detail    *detailView
	// JSMessages are the texts the page's script shows.
	JSMessages map[string]string
}

// T is the page text of key in the page's language.
func (d pageData) T(key string, args ...any) string { return msg(d.Lang, key, args...) }

func (s *Server) data(r *http.Request, c caller, page, titleKey string) pageData {
	d := pageData{Lang: pickLang(r), Zone: s.zone(r), Page: page, Seller: c.seller, SellerCenter: s.SellerCenterURL}
	d.Title = msg(d.Lang, titleKey)
	if c.session != nil {
		d.CSRF = c.session.CSRF
	}
	return d
}

// render writes a page. The "check" page is a fragment: the check's
// result, which the upload page's script puts in place. Any other page
// asked by that script (fromScript) is its fragment too, when it has one
// (the sign-in page's "sign in again", an error's notice): a page inside
// the page would repeat its header and landmarks.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, d pageData) {
	if l := r.URL.Query().Get("lang"); l == langKO || l == langEN {
		http.SetCookie(w, &http.Cookie{Name: langCookie, Value: l, Path: "/", MaxAge: 365 * 24 * 3600, SameSite: http.SameSiteLaxMode, Secure: s.secure(r)})
	}
	tmpl, entry := s.pages[name], "layout"
	switch {
	case name == "check":
		entry = "check"
	case fromScript(r) && tmpl.Lookup("fragment") != nil:
		entry = "fragment"
	}
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, entry, d); err != nil {
		s.logr(r).Error("render page", "page", name, "err", err)
		http.Error(w, "the page could not be shown", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Language", d.Lang)
	w.Header().Set("Vary", "Accept-Language, Cookie")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// fromScript reports whether a page's own script sent the request (it
// puts the answer inside the page) rather than the browser's navigation.
func fromScript(r *http.Request) bool { return r.Header.Get("X-Fragment") == "1" }

// renderMessage shows a message page to c: signed in, with the menu and
// the sign-out button; caller{} when no one is.
func (s *Server) renderMessage(w http.ResponseWriter, r *http.Request, c caller, status int, titleKey, bodyKey string) {
	d := s.data(r, c, "", titleKey)
	d.Body = msg(d.Lang, bodyKey)
	s.render(w, r, status, "message", d)
}

// pageCaller authenticates a page request by its session, or shows the
// sign-in page (401), the refusal of a cross-site request (403) or an
// error page (503) itself.
func (s *Server) pageCaller(w http.ResponseWriter, r *http.Request, unsafe bool) (caller, bool) {
	c, err := s.authenticate(r, unsafe)
	switch {
	case err == nil:
		return c, true
	case errors.Is(err, errCrossOrigin):
		s.logr(r).Info("cross-origin request refused", "path", r.URL.Path, "err", err)
		s.renderMessage(w, r, caller{}, http.StatusForbidden, "forbidden.title", "forbidden.body")
	case isAuthError(err):
		d := s.data(r, caller{}, "", "signin.title")
		if r.Method == http.MethodGet && r.Header.Get("Sec-Fetch-Site") == "cross-site" && sessionID(r) == "" {
			// Another site's link to a page carries no SameSite=Strict
			// session cookie: the page asks for itself again from here,
			// which carries it. Asked from here (same-origin), no session
			// is no session: this page, without asking again.
			d.Refresh = r.URL.RequestURI()
		}
		s.render(w, r, http.StatusUnauthorized, "signin", d)
	default:
		s.logr(r).Error("sign-in check failed", "err", err)
		s.renderMessage(w, r, caller{}, http.StatusServiceUnavailable, "error.title", "error.title")
	}
	return caller{}, false
}

// pageSession is who is signed in, for a page anyone may be shown (not
// found): the page keeps the seller's menu. caller{} when no one is, or
// when the session cannot be read now.
func (s *Server) pageSession(r *http.Request) caller {
	if s.Sessions == nil {
		return caller{}
	}
	c, err := s.currentSession(r)
	if err != nil || c == nil {
		return caller{}
	}
	return *c
}

func (s *Server) pageHome(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/uploads", http.StatusSeeOther)
}

func (s *Server) pageSignOut(w http.ResponseWriter, r *http.Request) {
	c, ok := s.pageCaller(w, r, true)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if !c.csrfOK(r, r.PostFormValue("csrf_token")) {
		s.renderMessage(w, r, c, http.StatusForbidden, "forbidden.title", "forbidden.body")
		return
	}
	if c.session != nil {
		if err := s.Sessions.Delete(r.Context(), c.id); err != nil {
			s.logr(r).Warn("sign-out: the session could not be ended in the store; the cookie is cleared", "err", err)
		}
	}
	s.clearSessionCookie(w, r)
	http.Redirect(w, r, "/signin?signed_out=1", http.StatusSeeOther)
}

func (s *Server) pageUpload(w http.ResponseWriter, r *http.Request) {
	c, ok := s.pageCaller(w, r, false)
	if !ok {
		return
	}
	s.render(w, r, http.StatusOK, "upload", s.data(r, c, "upload", "upload.title"))
}

// pageForm authenticates a posted upload form, takes the upload slots,
// reads the form and checks its CSRF token, or answers itself. release
// gives the slots back.
// The caller answers through the returned writer (takeSlot).
func (s *Server) pageForm(w http.ResponseWriter, r *http.Request, lim *limits) (http.ResponseWriter, caller, form, func(), bool) {
	c, ok := s.pageCaller(w, r, true)
	if !ok {
		return w, caller{}, form{}, nil, false
	}
	w, release, ok := s.takeUploadSlot(w, r, lim, c)
	if !ok {
		return w, caller{}, form{}, nil, false
	}
	f, ok := s.readUploadForm(w, r, c)
	if !ok {
		release()
		return w, caller{}, form{}, nil, false
	}
	if !c.csrfOK(r, f.csrf) {
		release()
		s.renderMessage(w, r, c, http.StatusForbidden, "forbidden.title", "forbidden.body")
		return w, caller{}, form{}, nil, false
	}
	done, err := s.work.take(r.Context(), c.seller)
	if err != nil {
		release() // the client went away while the seller's other upload was handled
		return w, caller{}, form{}, nil, false
	}
	return w, c, f, func() { done(); release() }, true
}

// pageCheck checks the posted file and shows every problem by cell next to
// a preview of the rows. The page's script asks for the result alone
// (X-Fragment) and puts it in place, so the chosen file stays chosen.
func (s *Server) pageCheck(lim *limits) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w, c, f, release, ok := s.pageForm(w, r, lim)
		if !ok {
			return
		}
		defer release()
		d := s.data(r, c, "upload", "upload.title")
		chk, err := s.Uploader.Check(r.Context(), c.seller, f.data)
		status := http.StatusOK
		switch ref, refused := upload.Refused(err); {
		case refused:
			d.Check = refusalView(d.Lang, ref)
			status = http.StatusUnprocessableEntity
		case err != nil:
			s.logr(r).Error("check failed", "seller", c.seller, "err", err)
			s.renderMessage(w, r, c, http.StatusServiceUnavailable, "error.title", "error.title")
			return
		default:
			d.Check = checkedView(d.Lang, d.Zone, chk)
		}
		if fromScript(r) {
			// The fragment replaces part of a page that shows the status
			// already; the script reads the text whatever the code.
			s.render(w, r, http.StatusOK, "check", d)
			return
		}
		d.Again = true
		s.render(w, r, status, "upload", d)
	}
}

// pageRegister uploads the posted file and goes on to its progress page.
func (s *Server) pageRegister(lim *limits) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w, c, f, release, ok := s.pageForm(w, r, lim)
		if !ok {
			return
		}
		defer release()
		if f.confirmed != "1" {
			// Register says what it will do first: when any row would be
			// skipped (a problem, registered already) or none would register,
			// the seller sees the plan and confirms. The page's script asks
			// the check itself and posts confirmed=1; this is the path
			// without it.
			chk, err := s.Uploader.Check(r.Context(), c.seller, f.data)
			if err == nil && (chk.Invalid > 0 || chk.AlreadyRegistered > 0 || chk.Valid == 0) {
				d := s.data(r, c, "upload", "upload.title")
				d.Check = checkedView(d.Lang, d.Zone, chk)
				d.Again, d.Check.Confirm = true, true
				s.render(w, r, http.StatusOK, "upload", d)
				return
			}
		}
		res, err := s.Uploader.Upload(r.Context(), upload.Request{SellerID: c.seller, FileName: f.name, Data: f.data})
		if ref, refused := upload.Refused(err); refused {
			d := s.data(r, c, "upload", "upload.title")
			d.Check = refusalView(d.Lang, ref)
			s.render(w, r, http.StatusUnprocessableEntity, "upload", d)
			return
		}
		if s.sharePage(w, r, c, err) {
			return
		}
		if err != nil {
			if !errors.Is(err, upload.ErrPublish) {
				s.logr(r).Error("upload failed", "upload_id", res.UploadID, "err", err)
			}
			s.renderMessage(w, r, c, http.StatusServiceUnavailable, "error.title", "detail.publishfail")
			return
		}
		to := "/uploads/" + res.UploadID
		if res.Duplicate {
			to += "?duplicate=true"
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
	}
}

// uploadRow is one line of the history page.
type uploadRow struct {
	ID, FileName, Created, CreatedISO, State                   string
	Total, Registered, Already, Failed, Waiting, Done, Percent int
	End                                                        string // endState once done, else ""
	Live                                                       bool   // the upload may still change: not done, not failed to publish
	// Failed counts the rows to fix in the file; OtherText, when not
	// empty, the failed rows apart whose SKU is registered already with
	// different content (nothing to fix in the file).
	OtherText string
	// TwiceText, when not empty, says how many of the registered rows the
	// marketplace holds twice.
	TwiceText string
	// FileNameAttr is FileName for an attribute, set apart (attrIsolated).
	FileNameAttr string
}

func (s *Server) pageUploads(w http.ResponseWriter, r *http.Request) {
	c, ok := s.pageCaller(w, r, false)
	if !ok {
		return
	}
	d := s.data(r, c, "uploads", "uploads.title")
	d.JSMessages, d.Poll = jsMessages(d.Lang), int(orDefault(s.EventsInterval, DefaultEventsInterval)/time.Millisecond)
	page, err := s.Uploader.List(r.Context(), c.seller, r.URL.Query().Get("cursor"), upload.DefaultPageSize)
	if errors.Is(err, upload.ErrBadCursor) {
		page, err = s.Uploader.List(r.Context(), c.seller, "", upload.DefaultPageSize)
	}
	if err != nil {
		s.logr(r).Error("list uploads", "seller", c.seller, "err", err)
		s.renderMessage(w, r, c, http.StatusServiceUnavailable, "error.title", "error.title")
		return
	}
	for _, st := range page.Uploads {
		row := uploadRow{ID: st.ID, FileName: orDash(st.FileName), Created: sayTime(d.Lang, st.CreatedAt, d.Zone),
			CreatedISO: st.CreatedAt.Format(time.RFC3339), State: stateText(d.Lang, st), Total: st.Total, Registered: st.Registered,
			Already: st.AlreadyRegistered, Failed: st.ToFix(), Waiting: st.Waiting,
			Done: st.Registered + st.AlreadyRegistered + st.Failed, Percent: percent(st), End: uploadEnd(st)}
		if st.OtherContent > 0 {
			row.OtherText = msg(d.Lang, "uploads.other", st.OtherContent)
		}
		if st.Twice > 0 {
			row.TwiceText = msg(d.Lang, "uploads.twice", st.Twice)
		}
		row.FileNameAttr = attrIsolated(row.FileName)
		row.Live = !st.Done() && st.State != uploadstatus.PublishFailed
		d.Uploads = append(d.Uploads, row)
	}
	if page.Next != "" {
		d.Next = url.QueryEscape(page.Next)
	}
	s.render(w, r, http.StatusOK, "uploads", d)
}

func stateText(lang string, st uploadstatus.Status) string {
	if st.Done() && st.State == uploadstatus.Published {
		return msg(lang, "state.done."+endState(st))
	}
	return msg(lang, "state."+st.State)
}

// endState is how a finished upload ended: "ok" (every row registered, now
// or before), "other" (nothing to fix, but some SKUs were registered
// already with different content, which bulk registration leaves as they
// are), "failed" (every row needs fixing) or "partial". Rows registered
// already with other content count as Failed but need no fix in the file,
// so they alone never make an upload look failed. The event stream sends
// the page this decision (ProgressEvent.End), so app.js does not repeat it.
func endState(st uploadstatus.Status) string {
	switch fix := st.ToFix(); {
	case fix <= 0 && st.OtherContent > 0:
		return "other"
	case fix <= 0:
		return "ok"
	case fix >= st.Total:
		return "failed"
	}
	return "partial"
}

// uploadEnd is endState for a finished, published upload, else "".
func uploadEnd(st uploadstatus.Status) string {
	if st.Done() && st.State == uploadstatus.Published {
		return endState(st)
	}
	return ""
}

// pacer is the throttle's policy where the uploader's Slots has one
// (*throttle.Throttle): the pages say the marketplace's limit from it.
type pacer interface{ Policy() throttle.Policy }

// windowText says a limit's window: "minute", "30 seconds".
func windowText(lang string, w time.Duration) string {
	switch {
	case w == time.Minute:
		return msg(lang, "win.min1")
	case w%time.Minute == 0:
		return msg(lang, "win.min", int(w/time.Minute))
	}
	return msg(lang, "win.sec", int((w+time.Second/2)/time.Second))
}

// detailView is the progress page of one upload.
type detailView struct {
	ID, FileName, Created, State                               string
	Total, Registered, Already, Failed, Waiting, Done, Percent int
	IsDone                                                     bool
	ETAISO, ETAText                                            string
	FailedRows                                                 []FailedRow
	Fix                                                        int // failed rows to fix: Failed without the other-content rows
	// FailedMore says how many failed rows are not shown (listRows bounds
	// them), empty when every one is.
	FailedMore string
	// OtherGroup and TwiceGroup are the rows with nothing to fix in the
	// file, apart: registered already with other content; registered while
	// the marketplace held the SKU already (a duplicate for the seller to
	// delete).
	OtherGroup, TwiceGroup rowGroup
	// FileLine names the uploaded file and when, the name set apart.
	FileLine template.HTML
	// Failed above counts the rows to fix too: the rows registered already
	// with other content have their own count (OtherGroup).
	// Marketplace is "not_answering", "failing" or "misconfigured" while rows wait
	// on it (the notice shows), else "".
	Marketplace string
	// End is the end state ("ok", "other", "partial", "failed") once done; EndText
	// says it in words.
	End, EndText string
	// AheadText explains a wait behind the seller's earlier uploads (empty
	// when none is ahead); AheadFormat is it with %d for the row count,
	// for the script. PaceText is the marketplace's limit.
	Ahead                            int
	AheadText, AheadFormat, PaceText string
	// ETAAt is the finish estimate (ETAISO) as the page says it, inside
	// ETAText; FinishedText says when the last row was done, once every row
	// is. Zone names the zone the page says times in, for its stream.
	ETAAt, FinishedText, Zone string
}

// rowGroup is a list of rows the detail page shows apart from the failed
// ones, under Key (its section's id; app.js fills it by the same key).
type rowGroup struct {
	Key, Title, Why, RowHead, ReasonHead string
	Rows                                 []FailedRow
	Count                                int    // the list's rows, shown or not
	More                                 string // how many are not shown, empty when every one is
}

// apartGroup is the rowGroup of rows (and more not shown) said by the
// messages title and why.
func apartGroup(lang, key, title, why string, rows []FailedRow, more int) rowGroup {
	g := rowGroup{Key: key, Title: msg(lang, title), Why: msg(lang, why), RowHead: msg(lang, "check.row"), ReasonHead: msg(lang, "detail.reason"),
		Rows: rows, Count: len(rows) + more}
	if more > 0 {
		// The fix file holds the failed rows only: the full report has these.
		g.More = msg(lang, "detail.rows.more.report", more)
	}
	return g
}

// ETAHTML and FinishedHTML are ETAText and FinishedText with their times
// kept on one line (keepTimes).
func (v detailView) ETAHTML() template.HTML      { return keepTimesIn(v.ETAText) }
func (v detailView) FinishedHTML() template.HTML { return keepTimesIn(v.FinishedText) }

// CreatedHTML is Created kept on one line past its date (keepTimes).
func (u uploadRow) CreatedHTML() template.HTML { return keepTimesIn(u.Created) }

func (s *Server) pageDetail(w http.ResponseWriter, r *http.Request) {
	c, ok := s.pageCaller(w, r, false)
	if !ok {
		return
	}
	duplicate, err := parseBool(r.URL.Query(), "duplicate")
	if err != nil {
		s.renderMessage(w, r, c, http.StatusBadRequest, "badparam.title", "badparam.body")
		return
	}
	var p upload.Progress
	err = s.checkOwner(r.Context(), c.seller, r.PathValue("id"))
	if err == nil {
		p, err = s.Uploader.Progress(r.Context(), c.seller, r.PathValue("id"))
	}
	if errors.Is(err, upload.ErrNotFound) {
		s.renderMessage(w, r, c, http.StatusNotFound, "notfound.title", "notfound.body")
		return
	}
	if err != nil {
		s.logr(r).Error("read upload status", "upload_id", r.PathValue("id"), "err", err)
		s.renderMessage(w, r, c, http.StatusServiceUnavailable, "error.title", "error.title")
		return
	}
	d := s.data(r, c, "uploads", "detail.title")
	d.Duplicate = duplicate
	d.JSMessages = jsMessages(d.Lang)
	ev := progressEvent(p)
	v := &detailView{ID: p.ID, FileName: orDash(p.FileName), Created: sayTime(d.Lang, p.CreatedAt, d.Zone), Zone: d.Zone.String(),
		State: stateText(d.Lang, p.Status), Total: p.Total, Registered: p.Registered, Already: p.AlreadyRegistered,
		Failed: p.ToFix(), Waiting: p.RowsWaiting, Done: p.Registered + p.AlreadyRegistered + p.Failed,
		Percent: ev.Percent, IsDone: ev.Done, Ahead: p.RowsAhead}
	l := listRows(d.Lang, p.Status)
	v.FailedRows, v.Fix = l.Failed, len(l.Failed)+l.FailedMore
	if l.FailedMore > 0 {
		v.FailedMore = msg(d.Lang, "detail.rows.more", l.FailedMore)
	}
	v.OtherGroup = apartGroup(d.Lang, "other", "detail.othercontent", "detail.othercontent.why", l.Other, l.OtherMore)
	v.TwiceGroup = apartGroup(d.Lang, "twice", "detail.twice", "detail.twice.why", l.Twice, l.TwiceMore)
	v.FileLine = keepTimes(isolated(msg(d.Lang, "detail.file", v.FileName, v.Created), textShownLen+maxFileNameLen, v.FileName))
	if !ev.Done && (p.Marketplace == upload.MarketplaceNotAnswering || p.Marketplace == upload.MarketplaceMisconfigured || p.Marketplace == upload.MarketplaceFailing) {
		v.Marketplace = p.Marketplace
	}
	if pol, ok := s.Uploader.Slots.(pacer); ok {
		pp := pol.Policy()
		win := windowText(d.Lang, pp.Window)
		v.PaceText = msg(d.Lang, "wait.pace", pp.Limit, win)
		v.AheadFormat = msg(d.Lang, "wait.ahead", "%d", pp.Limit, win)
		d.JSMessages["wait.ahead.one"] = msgN(d.Lang, "wait.ahead", 1, "%d", pp.Limit, win) // the script's "1 row"
		if p.RowsAhead > 0 {
			v.AheadText = msgN(d.Lang, "wait.ahead", p.RowsAhead, itoa(p.RowsAhead), pp.Limit, win)
		}
	}
	switch {
	case ev.Done && p.State != uploadstatus.PublishFailed:
		v.End, v.EndText = endState(p.Status), endText(d.Lang, p.Status)
		v.ETAText = v.EndText
	case ev.Done:
		v.ETAText = msg(d.Lang, "detail.done")
	case v.Marketplace == upload.MarketplaceNotAnswering:
		v.ETAText = msg(d.Lang, "outage.eta")
	case v.Marketplace == upload.MarketplaceFailing:
		v.ETAText = msg(d.Lang, "failing.eta")
	case v.Marketplace == upload.MarketplaceMisconfigured:
		v.ETAText = msg(d.Lang, "paused.eta")
	case p.State == uploadstatus.Publishing:
		v.ETAText = msg(d.Lang, "detail.publishing")
	case p.ETA == nil:
		v.ETAText = msg(d.Lang, "detail.eta.none")
	default:
		v.ETAISO, v.ETAAt = p.ETA.Format(time.RFC3339Nano), sayTime(d.Lang, *p.ETA, d.Zone)
		if left := time.Until(*p.ETA); left < time.Second {
			v.ETAText = msg(d.Lang, "detail.eta.now")
		} else {
			v.ETAText = msg(d.Lang, "detail.eta", fmtDuration(d.Lang, left), v.ETAAt)
		}
	}
	if p.State == uploadstatus.PublishFailed {
		v.ETAText = msg(d.Lang, "detail.publishfail")
	}
	if at := finishedAt(p.Status); ev.Done && !at.IsZero() {
		v.FinishedText = msg(d.Lang, "detail.finished", sayTime(d.Lang, at, d.Zone))
	}
	d.Detail = v
	s.render(w, r, http.StatusOK, "detail", d)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// checkView is a check's result as the page shows it. Every list and the
// preview are bounded (bounds.go): the page stays under the answer ceiling
// whatever the file holds, and says what it left out.
type checkView struct {
	// Plan says what Register will do (n register, m skipped with
	// problems, k already registered); Register is n, Skips whether any row
	// is skipped or none registers, when Register asks first. Confirm
	// shows the question (Register pressed without the page's script).
	Plan     string
	Register int
	Skips    bool
	Confirm  bool

	Refusal      template.HTML
	NoRows       bool
	FileProblems []template.HTML
	// FileProblemsMore says how many of a refused file's problems are not listed.
	FileProblemsMore string

	// Summary counts the rows by what Register does with them; Invalid
	// counts the rows with problems to fix, Other those registered already
	// with other content.
	Summary                               string
	Total, Valid, Invalid, Already, Other int
	Problems                              []problemView
	OtherContent                          []problemView // SKUs registered already with other content, apart from Problems
	// ProblemsMore and OtherMore say how many of each list are not shown,
	// and where to see them all; empty when every one is.
	ProblemsMore, OtherMore string
	Warnings                []template.HTML
	WarningsMore            string
	Header                  []colView
	Rows                    []rowView
	// PreviewCut says which rows and columns the preview shows when it
	// does not show them all.
	PreviewCut string

	// Before says the seller uploaded this very file before (BeforeID).
	Before, BeforeID string
}

type problemView struct {
	Row   int
	Cell  string
	Label template.HTML // the column's header, as the seller's file names it
	Text  template.HTML
	// Linked: the cell is in the preview (a link to it goes somewhere).
	Linked bool
}

type colView struct {
	Letter string
	Name   template.HTML
}

type rowView struct {
	Number       int
	State, Class string
	Cells        []cellView
}

type cellView struct {
	Text    template.HTML
	Cell    string
	Problem string        // the problem's text, for the tooltip
	Said    template.HTML // the same, for the screen reader
}

// previewCellLen bounds a cell's text in the preview, in characters.
const previewCellLen = 60

func refusalView(lang string, ref upload.Refusal) *checkView {
	ref.Params = cutParams(ref.Params)
	v := &checkView{Refusal: isolated(ref.Text(lang), textShownLen, paramValues(ref.Params)...), NoRows: ref.Code == upload.CodeNoRows}
	for i, p := range ref.Problems {
		if i == maxFileProblemsShown {
			v.FileProblemsMore = msg(lang, "check.fileproblems.more", len(ref.Problems)-i)
			break
		}
		p.Params, p.Message = cutParams(p.Params), cutRunes(p.Message, textShownLen)
		v.FileProblems = append(v.FileProblems, isolated(p.In(lang, nil), textShownLen, paramValues(p.Params)...))
	}
	return v
}

// shownProblem is a problem of a check as a page shows it: its params and
// message cut, its text and the values it quotes set apart (isolated).
func shownProblem(lang string, p upload.Problem, header []string) (string, template.HTML) {
	p.Params, p.Message = cutParams(p.Params), cutRunes(p.Message, textShownLen)
	text := p.Text(lang, header)
	var field string
	if f := p.Params["field"]; f != "" {
		field = upload.FieldName(lang, header, f)
	}
	return cutRunes(text, textShownLen), isolated(text, textShownLen, paramValues(p.Params, field)...)
}

func checkedView(lang string, zone *time.Location, c *upload.Checked) *checkView {
	// Rows whose SKU is registered already with other content are skipped
	// too, but nothing in the file is wrong: they are counted apart from the
	// rows with problems.
	fix, other := c.Invalid-c.OtherContent, c.OtherContent
	v := &checkView{Total: len(c.Rows), Valid: c.Valid, Invalid: fix, Already: c.AlreadyRegistered, Other: other, Register: c.Valid,
		Skips: c.Invalid > 0 || c.AlreadyRegistered > 0 || c.Valid == 0}
	v.Summary = summaryText(lang, v.Total, c.Valid, fix, c.AlreadyRegistered, other)
	v.Plan = planText(lang, c)
	// The seller's header, cut where it is shown: a header full of text in
	// brackets still names its column, and a page names the column once
	// per problem.
	header := make([]string, len(c.Header))
	for i, h := range c.Header {
		header[i] = cutRunes(h, headerShownLen)
	}
	cols := min(len(header), previewColumns)
	labels := make(map[string]string, len(header)) // column letters → the seller's header
	for i, h := range header {
		if i < len(c.Columns) {
			labels[c.Columns[i]] = h
		}
	}
	for i := range cols {
		v.Header = append(v.Header, colView{Letter: c.Columns[i], Name: isolated(header[i], headerShownLen, header[i])})
	}
	if b := c.UploadedBefore; b != nil {
		v.Before = b.Text(lang, zone)
		v.BeforeID = b.UploadID
	}

	// The preview: the first rows and columns, up to previewBudget bytes.
	shown := map[string]bool{} // cells in the preview
	used := 0
	for _, r := range c.Rows {
		if len(v.Rows) == previewRows || used >= previewBudget {
			break
		}
		rv := rowView{Number: r.Number, Class: r.State}
		switch r.State {
		case upload.RowValid:
			rv.State = msg(lang, "row.valid")
		case upload.RowInvalid:
			rv.State = msg(lang, "row.invalid")
			if upload.OnlyOtherContent(r.Problems) {
				rv.State, rv.Class = msg(lang, "detail.othercontent"), "already"
			}
		default:
			rv.State, rv.Class = msg(lang, "row.already"), "already"
		}
		bad := map[string]upload.Problem{}
		for _, p := range r.Problems {
			if _, ok := bad[p.Cell]; p.Cell != "" && !ok {
				bad[p.Cell] = p
			}
		}
		for i := range cols {
			cell := c.Columns[i] + itoa(r.Number)
			text := ""
			if i < len(r.Cells) {
				text = cutRunes(r.Cells[i], previewCellLen)
			}
			cv := cellView{Text: isolated(text, previewCellLen, text), Cell: cell}
			if p, ok := bad[cell]; ok {
				cv.Problem, cv.Said = shownProblem(lang, p, header)
				cv.Problem = attrIsolated(cv.Problem)
			}
			used += escapedLen(text) + 2*escapedLen(cv.Problem) + cellMarkup
			rv.Cells = append(rv.Cells, cv)
			shown[cell] = true
		}
		v.Rows = append(v.Rows, rv)
	}
	if len(v.Rows) < len(c.Rows) || cols < len(header) {
		v.PreviewCut = msg(lang, "check.preview.cut", msgN(lang, "n.rows", len(v.Rows), len(v.Rows)), msgN(lang, "n.cols", cols, cols),
			msgN(lang, "n.rows", len(c.Rows), len(c.Rows)), msgN(lang, "n.cols", len(header), len(header)))
	}

	// The problems, in the file's order, up to maxProblemsShown and
	// problemsBudget bytes; the rows registered with other content apart.
	used = 0
	var more, otherMore int
	for _, p := range c.Problems {
		isOther := p.Code == upload.CodeRegisteredOtherContent // a group apart: nothing to fix in the file
		list := &v.Problems
		if isOther {
			list = &v.OtherContent
		}
		if len(v.Problems)+len(v.OtherContent) >= maxProblemsShown || used >= problemsBudget {
			if isOther {
				otherMore++
			} else {
				more++
			}
			continue
		}
		// The field is named once, before the problem: by the problem's own
		// field, else by its column's header.
		label := p.Field(lang, header)
		if label == "" && p.Params["field"] == "" {
			if h, ok := labels[strings.TrimRight(p.Cell, "0123456789")]; ok {
				label = upload.ColumnName(lang, h)
			}
		}
		text, html := shownProblem(lang, p, header)
		used += escapedLen(p.Cell) + escapedLen(label) + escapedLen(text) + cellMarkup
		pv := problemView{Row: p.Row, Cell: p.Cell, Text: html, Linked: shown[p.Cell]}
		if label != "" {
			pv.Label = isolated(label, headerShownLen, label)
		}
		*list = append(*list, pv)
	}
	if more > 0 {
		v.ProblemsMore = msg(lang, "check.problems.more", more)
	}
	if otherMore > 0 {
		v.OtherMore = msg(lang, "check.problems.more", otherMore)
	}
	for i, w := range c.Warnings {
		if i == maxWarningsShown {
			v.WarningsMore = msg(lang, "check.warnings.more", len(c.Warnings)-i)
			break
		}
		w.Params, w.Message = cutParams(w.Params), cutRunes(w.Message, textShownLen)
		v.Warnings = append(v.Warnings, isolated(w.In(lang, header), textShownLen, paramValues(w.Params)...))
	}
	return v
}

func itoa(n int) string { return strconv.Itoa(n) }
