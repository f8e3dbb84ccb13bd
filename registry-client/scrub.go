package registryclient

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bulkreg/bulkreg/internal/redact"
)

// minSecret is the length under which a credential is not hidden: a secret
// of a few characters would hide ordinary words of a message.
const minSecret = 4

// secrets are the client's credentials (the URL's password, the Basic
// credentials, the auth header's value and its token) in every form an
// answer or an error could show them: as sent, escaped by %q (Go's quoting,
// also its ASCII-only form), by JSON (with and without HTML escaping), by
// URL escaping, and with runs of whitespace made one space (snippet does
// that to a page). Longest first, so that a form holding another is hidden
// whole. The zero value hides nothing.
//
// A password or token with spaces is hidden piece by piece too: net/http
// quotes the field of a malformed status line up to its first space, which
// may end inside the secret.
//
// What an answer says is hidden before anything cuts or quotes it: a
// secret cut in two, or quoted, is no longer found whole. What is cut
// afterwards never ends in the first bytes of a secret either (cut).
type secrets struct {
	forms []string
}

// newSecrets takes the credentials shown whole (the Basic credentials, a
// header's value, which begins with a scheme word such as "Bearer") and
// those whose pieces between spaces are secret too (a password, a token).
func newSecrets(whole, split []string) secrets {
	var forms []string
	add := func(s string) {
		if len(s) >= minSecret && !slices.Contains(forms, s) {
			forms = append(forms, s)
		}
	}
	inner := func(q string) string { return q[1 : len(q)-1] }
	var raw []string
	raw = append(raw, whole...)
	for _, s := range split {
		raw = append(raw, s)
		if pieces := strings.Fields(s); len(pieces) > 1 {
			raw = append(raw, pieces...)
		}
	}
	for _, s := range raw {
		add(s)
		add(inner(strconv.Quote(s)))
		add(inner(strconv.QuoteToASCII(s)))
		j, _ := json.Marshal(s) // <, > and & as \u003c…
		add(inner(string(j)))
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		add(inner(strings.TrimSuffix(b.String(), "\n")))
		add(url.PathEscape(s))
		add(url.QueryEscape(s))
		add(strings.Join(strings.Fields(s), " "))
	}
	slices.SortStableFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return secrets{forms: forms}
}

// hide replaces every form of every secret in s with redact.Mask.
func (k secrets) hide(s string) string {
	for _, f := range k.forms {
		if strings.Contains(s, f) {
			s = strings.ReplaceAll(s, f, redact.Mask)
		}
	}
	return s
}

// cut shortens s to at most n bytes, and reports whether it did. What is
// left ends on a whole character and never in the first bytes of a secret:
// where s went on with the rest of one, the part kept would show its start.
// Callers hide s first, so a secret whole in s is already gone; a trailing
// fragment that only looks like a secret's start is dropped all the same,
// which costs a few characters of a text that is cut anyway.
func (k secrets) cut(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	s = trimPartialRune(s[:n])
	for {
		d := k.secretStart(s)
		if d == 0 {
			return s, true
		}
		s = trimPartialRune(s[:len(s)-d])
	}
}

// secretStart is the length of the longest end of s that is the start (not
// the whole) of a form of a secret, or of the mask that hid one (a mask cut
// in part reads as if it were the secret), 0 if none.
func (k secrets) secretStart(s string) int {
	if len(k.forms) == 0 {
		return 0
	}
	longest := 0
	start := func(f string) {
		for d := min(len(f)-1, len(s)); d > longest; d-- {
			if strings.HasSuffix(s, f[:d]) {
				longest = d
				return
			}
		}
	}
	for _, f := range k.forms {
		start(f)
	}
	start(redact.Mask)
	return longest
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of s (what
// a cut by bytes leaves), and nothing else: invalid bytes elsewhere stay for
// %q to show.
func trimPartialRune(s string) string {
	i := len(s) - 1
	for i > 0 && len(s)-i < utf8.UTFMax && !utf8.RuneStart(s[i]) {
		i--
	}
	if i >= 0 && utf8.RuneStart(s[i]) && !utf8.FullRuneInString(s[i:]) {
		return s[:i]
	}
	return s
}

// snippetLen is how much of a body snippet shows.
const snippetLen = 120

// snippet shows the start of a body that is not the contract's JSON, such as
// a proxy's HTML page, on one line and quoted, with the secrets hidden
// before the body is cut or quoted.
func (k secrets) snippet(raw []byte) string {
	if len(raw) == 0 {
		return "empty body"
	}
	s := k.hide(string(raw))
	s = k.hide(strings.Join(strings.Fields(s), " ")) // a secret's whitespace made one space too
	s, cut := k.cut(s, snippetLen)
	if cut {
		s += "…"
	}
	return fmt.Sprintf("body %q", s)
}

// line is the start of a line an answer sent (a malformed status or header
// line), for a message to quote: the secrets hidden, then cut to maxLine
// bytes ("…" says it was).
func (k secrets) line(b string) string {
	s, cut := k.cut(k.hide(b), maxLine)
	if cut {
		s += "…"
	}
	return s
}

// maxLine is how much of a malformed line a message quotes.
const maxLine = 64
