package httpapi

import (
	"bytes"
	"errors"
	"html/template"
	"net/http"
	"net/url"
)

// Signing in with a link takes two requests, so that only a person signs
// in, and only as the seller they mean:
//
//   - GET /signin?token=… (pageSignIn) changes nothing. It shows a page
//     naming the link's seller with one button. A chat app's link preview,
//     a mail scanner or a browser's prefetch fetches the link without using
//     it up and without opening a session for whoever fetched it.
//   - POST /signin (pagePostSignIn), sent by that button from this origin,
//     uses the link (once) and starts the session. A POST another site
//     sends is refused (http.CrossOriginProtection: Sec-Fetch-Site, else
//     Origin), whatever it carries.
//
// A browser signed in already sends its session cookie with that POST
// (same-origin; see the cookie's SameSite note in session.go). When the
// link is the same seller's, the seller goes on with the session they have.
// When it is another seller's, the service asks first (the switch page,
// where staying is the default) and switches only on a POST carrying the
// current session's CSRF token, which only the switch page shows: a link
// another site hands a signed-in seller never replaces their session by
// itself, so what they upload next cannot land in someone else's account.

// signInLinkPage is the page of a sign-in link: the button that signs in,
// or the question whether to switch sellers. It is parsed once; a parse
// error is a build mistake every test of the package catches.
var signInLinkPage = template.Must(template.New("signinlink").ParseFS(webFiles, "web/templates/layout.html", "web/templates/signinlink.html"))

// linkPageData is what signinlink.html gets: the layout's data (Seller is
// who is signed in now, empty when no one is) and the link.
type linkPageData struct {
	pageData
	// Token is the link's token, which the page's form posts back.
	Token string
	// Next is the seller the link signs in.
	Next string
}

// LangHref is the layout's language switch: the same page in lang.
func (d pageData) LangHref(lang string) string { return "?lang=" + lang }

// LangHref keeps the link's token in the language switch: the link's page
// in the other language, not the sign-in page without a link.
func (d linkPageData) LangHref(lang string) string {
	return "?" + url.Values{"token": {d.Token}, "lang": {lang}}.Encode()
}

// pageSignIn answers GET /signin. Without a token it is the sign-in page
// ("open a link from your seller center"); with a link's token it shows
// the link's page and uses nothing up.
func (s *Server) pageSignIn(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Referrer-Policy", "no-referrer") // the URL holds the token
	w.Header().Set("X-Robots-Tag", "noindex")
	tok := r.URL.Query().Get("token")
	if tok == "" || s.Sessions == nil {
		if s.signedIn(r) {
			http.Redirect(w, r, "/uploads", http.StatusSeeOther)
			return
		}
		if r.URL.Query().Get("signed_out") == "1" { // pageSignOut: say so, not "please sign in"
			d := s.data(r, caller{}, "", "signout.done")
			d.SignedOut = true
			s.render(w, r, http.StatusOK, "signin", d)
			return
		}
		s.render(w, r, http.StatusUnauthorized, "signin", s.data(r, caller{}, "", "signin.title"))
		return
	}
	link, cur, ok := s.linkAndSession(w, r, tok)
	if !ok {
		return
	}
	spent, err := s.Sessions.LinkSpent(r.Context(), link.ID)
	if err != nil {
		s.signInFailed(w, r, link, err)
		return
	}
	switch {
	case spent:
		s.linkUsedAgain(w, r, link, cur)
	case cur == nil:
		s.renderLinkPage(w, r, caller{}, link, tok)
	case cur.seller == link.Seller:
		// The seller's own link, opened in the browser the seller is
		// signed in with: nothing to ask. Using it up here takes it from
		// anyone else who sees it (history, a forwarded mail); a preview
		// bot has no session and never gets here.
		if _, err := s.Sessions.SpendLink(r.Context(), link.ID, link.SpentUntil); err != nil {
			s.logr(r).Warn("the seller's own sign-in link could not be marked used; it stays usable until it expires", "seller", link.Seller, "err", err)
		}
		markAuthenticated(r)
		http.Redirect(w, r, "/uploads", http.StatusSeeOther)
	default:
		s.logr(r).Info("sign-in link of another seller opened while signed in; asking before switching", "seller", cur.seller, "link_seller", link.Seller, "fetch_site", r.Header.Get("Sec-Fetch-Site"))
		markAuthenticated(r)
		s.renderLinkPage(w, r, *cur, link, tok)
	}
}

// pagePostSignIn answers POST /signin: the link's page's button. It
// uses the link and starts a session, goes on with the session of the same
// seller, or, signed in as another seller, switches only with the current
// session's CSRF token (the switch page's button) and asks otherwise.
func (s *Server) pagePostSignIn(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	if s.Sessions == nil {
		s.render(w, r, http.StatusUnauthorized, "signin", s.data(r, caller{}, "", "signin.title"))
		return
	}
	if err := s.cop.Check(r); err != nil {
		s.logr(r).Info("cross-origin sign-in refused", "remote", r.RemoteAddr, "fetch_site", r.Header.Get("Sec-Fetch-Site"), "origin", r.Header.Get("Origin"), "err", err)
		s.renderMessage(w, r, caller{}, http.StatusForbidden, "forbidden.title", "forbidden.body")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxSignInForm)
	tok := r.PostFormValue("token")
	if tok == "" {
		s.logr(r).Info("sign-in form without a link refused", "remote", r.RemoteAddr)
		d := s.data(r, caller{}, "", "signin.title")
		d.Bad = true
		s.render(w, r, http.StatusBadRequest, "signin", d)
		return
	}
	link, cur, ok := s.linkAndSession(w, r, tok)
	if !ok {
		return
	}
	if cur != nil && cur.seller != link.Seller && !cur.csrfOK(r, r.PostFormValue("csrf_token")) {
		s.logr(r).Info("sign-in link of another seller posted without the session's confirmation; asking before switching", "seller", cur.seller, "link_seller", link.Seller)
		markAuthenticated(r)
		s.renderLinkPage(w, r, *cur, link, tok)
		return
	}
	fresh, err := s.Sessions.SpendLink(r.Context(), link.ID, link.SpentUntil)
	if err != nil {
		s.signInFailed(w, r, link, err)
		return
	}
	if !fresh {
		s.linkUsedAgain(w, r, link, cur)
		return
	}
	if cur != nil && cur.seller == link.Seller {
		markAuthenticated(r)
		http.Redirect(w, r, "/uploads", http.StatusSeeOther)
		return
	}
	ttl := orDefault(s.SessionTTL, DefaultSessionTTL)
	id, _, err := s.Sessions.Create(r.Context(), link.Seller, ttl)
	if err != nil {
		s.signInFailed(w, r, link, err)
		return
	}
	if cur != nil {
		// The new session replaces the cookie; ending the old one keeps a
		// copy of its cookie from acting as the other seller.
		if err := s.Sessions.Delete(r.Context(), cur.id); err != nil {
			s.logr(r).Warn("switching sellers: the previous session could not be ended in the store; it expires by itself", "seller", cur.seller, "err", err)
		}
		s.logr(r).Info("switched seller", "from", cur.seller, "seller", link.Seller)
	}
	s.setSessionCookie(w, r, id, ttl)
	markAuthenticated(r)
	s.logr(r).Info("signed in", "seller", link.Seller)
	http.Redirect(w, r, "/uploads", http.StatusSeeOther)
}

// maxSignInForm bounds the body of POST /signin: a token and a CSRF token.
const maxSignInForm = 8 << 10

// linkAndSession is the link tok signs in and the session the request
// already has (nil: none); when either cannot be had, the answer is
// written and ok is false.
func (s *Server) linkAndSession(w http.ResponseWriter, r *http.Request, tok string) (link SignInLink, cur *caller, ok bool) {
	if link, ok = s.verifyLink(w, r, tok); !ok {
		return link, nil, false
	}
	cur, err := s.currentSession(r)
	if err != nil {
		s.signInFailed(w, r, link, err)
		return link, nil, false
	}
	return link, cur, true
}

// verifyLink checks a link's token or answers itself: signed in, the
// seller goes on to the uploads; otherwise the sign-in page says the link
// did not work.
func (s *Server) verifyLink(w http.ResponseWriter, r *http.Request, tok string) (SignInLink, bool) {
	link, err := s.Auth.VerifyLink(tok, orDefault(s.LinkMaxAge, DefaultLinkMaxAge))
	if err != nil {
		s.logr(r).Info("sign-in link refused", "remote", r.RemoteAddr, "err", err)
		if s.signedIn(r) {
			http.Redirect(w, r, "/uploads", http.StatusSeeOther)
			return SignInLink{}, false
		}
		d := s.data(r, caller{}, "", "signin.title")
		d.Bad = true
		s.render(w, r, http.StatusUnauthorized, "signin", d)
		return SignInLink{}, false
	}
	info(r).seller = link.Seller
	return link, true
}

// linkUsedAgain answers a link used before. The seller opening it again
// (a bookmark, the back button) in the browser signed in with it goes on to
// the uploads: that is no dead end. Anyone else is told the link was used.
func (s *Server) linkUsedAgain(w http.ResponseWriter, r *http.Request, link SignInLink, cur *caller) {
	s.logr(r).Info("sign-in link used again; refused", "seller", link.Seller, "remote", r.RemoteAddr)
	if cur != nil && cur.seller == link.Seller {
		markAuthenticated(r)
		http.Redirect(w, r, "/uploads", http.StatusSeeOther)
		return
	}
	d := s.data(r, caller{}, "", "signin.title")
	d.Bad = true
	s.render(w, r, http.StatusUnauthorized, "signin", d)
}

func (s *Server) signInFailed(w http.ResponseWriter, r *http.Request, link SignInLink, err error) {
	s.logr(r).Error("sign-in failed", "seller", link.Seller, "err", err)
	s.renderMessage(w, r, caller{}, http.StatusServiceUnavailable, "error.title", "error.title")
}

// currentSession is the page session the request's cookie names, nil when
// there is none (no cookie, expired, signed out). A bearer token is not a
// page session: a browser never sends one by itself.
func (s *Server) currentSession(r *http.Request) (*caller, error) {
	id := sessionID(r)
	if id == "" {
		return nil, nil
	}
	sess, err := s.Sessions.Get(r.Context(), id)
	if errors.Is(err, ErrNoSession) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &caller{seller: sess.Seller, session: &sess, id: id}, nil
}

// signedIn reports whether the request carries a valid page session.
func (s *Server) signedIn(r *http.Request) bool {
	if s.Sessions == nil {
		return false
	}
	c, err := s.authenticate(r, false)
	return err == nil && c.session != nil
}

// renderLinkPage shows a link's page: to c, signed in as another seller,
// the question whether to switch; to no one signed in, the button that
// signs in.
func (s *Server) renderLinkPage(w http.ResponseWriter, r *http.Request, c caller, link SignInLink, tok string) {
	d := linkPageData{pageData: s.data(r, c, "", "signin.title"), Token: tok, Next: link.Seller}
	if c.session != nil {
		d.Title = msg(d.Lang, "switch.title")
	} else {
		d.Title = msg(d.Lang, "signin.confirm.title", link.Seller)
	}
	var buf bytes.Buffer
	if err := signInLinkPage.ExecuteTemplate(&buf, "layout", d); err != nil {
		s.logr(r).Error("render page", "page", "signinlink", "err", err)
		http.Error(w, "the page could not be shown", http.StatusInternalServerError)
		return
	}
	if l := r.URL.Query().Get("lang"); l == langKO || l == langEN {
		http.SetCookie(w, &http.Cookie{Name: langCookie, Value: l, Path: "/", MaxAge: 365 * 24 * 3600, SameSite: http.SameSiteLaxMode, Secure: s.secure(r)})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Language", d.Lang)
	w.Header().Set("Vary", "Accept-Language, Cookie")
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
}
