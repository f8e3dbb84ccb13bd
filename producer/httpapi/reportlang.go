package httpapi

import "net/http"

// reportLang is the language of a downloaded report: the seller's page
// language when the request says one (?lang=, the language switch's
// cookie, or Accept-Language, which every browser sends), else English, the
// language scripts calling the API have always been answered in.
func reportLang(r *http.Request) string {
	if r.URL.Query().Get("lang") == "" && r.Header.Get("Accept-Language") == "" {
		if _, err := r.Cookie(langCookie); err != nil {
			return langEN
		}
	}
	return pickLang(r)
}
