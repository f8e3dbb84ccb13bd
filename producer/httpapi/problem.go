package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/bulkreg/bulkreg/producer/upload"
)

// problem is an error answer as RFC 9457 describes it, with bulkreg's
// extension members: a stable code to branch on, the cell problems of a
// refused file, and the upload the error concerns.
type problem struct {
	Type     string           `json:"type"`
	Title    string           `json:"title"`
	Status   int              `json:"status"`
	Detail   string           `json:"detail,omitempty"`
	Instance string           `json:"instance,omitempty"`
	Code     string           `json:"code"`
	Problems []upload.Problem `json:"problems,omitempty"`
	UploadID string           `json:"upload_id,omitempty"`
	// Parameter names the query parameter refused (code bad_parameter).
	Parameter string `json:"parameter,omitempty"`
	// RequestID is the request's id (X-Request-Id), as in its log lines.
	RequestID string `json:"request_id,omitempty"`
}

// problemType is the URI naming a kind of problem; a URN, since there is
// no page to read at it.
func problemType(code string) string { return "urn:bulkreg:problem:" + code }

// writeProblem answers p as application/problem+json.
func writeProblem(w http.ResponseWriter, r *http.Request, p problem) {
	if p.Type == "" {
		p.Type = problemType(p.Code)
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	if p.Instance == "" && r != nil {
		p.Instance = r.URL.Path
	}
	if p.RequestID == "" && r != nil {
		p.RequestID = info(r).requestID
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// refuse answers a request refused before its work began (every slot
// taken, a file too large or too slow): a page's form or script gets a
// page in the seller's language that says what happened, what to do and
// when to try again (titleKey, bodyKey with args), with p's status and the
// headers set already (Retry-After); an API client, or a page's request
// that asks for JSON, gets p as a problem document.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, c caller, p problem, titleKey, bodyKey string, args ...any) {
	if !pageAsked(r) {
		writeProblem(w, r, p)
		return
	}
	d := s.data(r, c, "upload", titleKey)
	d.Body = msg(d.Lang, bodyKey, args...)
	s.render(w, r, p.Status, "message", d)
}

// pageAsked reports whether r is a page's request (a form, or the page's
// script) that reads an answer as a page: not an API route, and no JSON
// in Accept.
func pageAsked(r *http.Request) bool {
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		return false
	}
	for _, m := range strings.Split(r.Header.Get("Accept"), ",") {
		m, _, _ = strings.Cut(m, ";")
		if m = strings.TrimSpace(strings.ToLower(m)); m == "application/json" || strings.HasSuffix(m, "+json") {
			return false
		}
	}
	return true
}
