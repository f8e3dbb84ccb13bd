// Package redact shows URLs in messages and logs without what may be a
// credential in them: the password of the user information, and the value
// of every query parameter.
//
// Every query value is hidden, not only those with a secret-looking name
// (token, api_key, sig, X-Amz-Signature, …): a list of names is never
// complete, and a message needs the parameter's name, not its value, to be
// acted on. The user name is kept, as url.URL.Redacted keeps it: it names
// the account to check and is not a secret. The fragment is dropped.
package redact

import (
	"net/url"
	"strings"
)

// Mask replaces a hidden value.
const Mask = "xxxxx"

// URL is raw as a message may show it: https://svc:xxxxx@host/p?token=xxxxx.
// A URL that url.Parse cannot read, or reads as a path or an opaque part
// although it holds an "@" ("http//user:secret@host", "user:secret@host"),
// is cut to what follows its last "@", with its query cut off too.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err == nil && (u.Host != "" || !strings.Contains(raw, "@")) {
		return Parsed(u)
	}
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		raw = "…" + raw[i:]
	}
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i] + "?" + Mask
	}
	return raw
}

// Parsed is u as a message may show it (see URL); u is not changed.
func Parsed(u *url.URL) string {
	c := *u
	if _, has := c.User.Password(); has {
		c.User = url.UserPassword(c.User.Username(), Mask)
	}
	c.Fragment, c.RawFragment = "", ""
	if c.RawQuery != "" {
		c.RawQuery = Query(c.RawQuery)
	}
	return c.String()
}

// Query is a raw query with every value replaced by Mask, names kept in
// their order: "token=abc&page=2" → "token=xxxxx&page=xxxxx". A parameter
// without "=" is a value on its own and is hidden too.
func Query(raw string) string {
	var b strings.Builder
	for i, part := range strings.Split(raw, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		name, _, ok := strings.Cut(part, "=")
		if !ok {
			if part != "" {
				b.WriteString(Mask)
			}
			continue
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(Mask)
	}
	return b.String()
}
