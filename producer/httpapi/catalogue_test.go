package httpapi

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEveryPageMessageIsSaid: every key of the pages' catalogue is said
// somewhere: named in the package's code or templates, or read by the
// pages' script when it is among the texts sent to it (jsMessages). A key
// the script is sent but never reads, or one nothing names, is a sentence
// no seller meets that a translator still keeps in two languages. A key's
// form for one (".one") goes with its key.
func TestEveryPageMessageIsSaid(t *testing.T) {
	read := func(pattern string) string {
		t.Helper()
		files, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") || f == "i18n.go" {
				continue // tests and the catalogue itself say nothing to a seller
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
		}
		return b.String()
	}
	code := read("*.go") + read("web/templates/*.html")
	script := read("web/static/app.js")
	// Keys the script builds: m["state.done." + end] reads every key under the prefix.
	var prefixes []string
	for _, m := range regexp.MustCompile(`m\["([a-z_.]+\.)"\s*\+`).FindAllStringSubmatch(script, -1) {
		prefixes = append(prefixes, m[1])
	}
	// Keys the Go code builds the same way: msg(lang, "state."+st.State).
	for _, m := range regexp.MustCompile(`"([a-z_.]+\.)"\s*\+`).FindAllStringSubmatch(code, -1) {
		prefixes = append(prefixes, m[1])
	}
	byScript := func(k string) bool {
		return strings.Contains(script, `"`+k+`"`) || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(k, p) })
	}
	sent := jsMessages(langKO)
	for k := range sent {
		if !byScript(strings.TrimSuffix(k, ".one")) {
			t.Errorf("the pages' script is sent %q but never reads it", k)
		}
	}
	for k := range messages {
		base := strings.TrimSuffix(k, ".one")
		if strings.Contains(code, `"`+base+`"`) || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(base, p) }) {
			continue
		}
		if _, ok := sent[base]; ok && byScript(base) {
			continue
		}
		t.Errorf("page message %q is said nowhere: no code or template names it, and the script does not read it", k)
	}
}
