package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/bulkreg/bulkreg/internal/cli"
	"github.com/bulkreg/bulkreg/internal/cli/clitest"
	"github.com/bulkreg/bulkreg/internal/sandbox"
)

// TestREADME holds the README's tables to the sandbox (issue 29, item 10):
// its settings table to the flag set it parses, and the metrics table to
// what its /metrics serves once a request has been answered (the sandbox
// keeps its registry to itself).
func TestREADME(t *testing.T) {
	r, err := clitest.ReadREADME("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) string { return "" }
	fs, _, _ := bind(noEnv)
	for _, p := range clitest.CheckSettings(r, cli.Command{Name: "registry-sandbox", Flags: fs}) {
		t.Error(p)
	}
	s, err := parse(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(s.opts)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/sellers/s1/products", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "u:1")
	sb.ServeHTTP(httptest.NewRecorder(), req)
	rec := httptest.NewRecorder()
	sb.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, p := range clitest.CheckMetrics(r, "registry-sandbox", scraped(rec.Body.String())) {
		t.Error(p)
	}
}

var (
	typeLine   = regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`)
	seriesLine = regexp.MustCompile(`(?m)^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}`)
	labelName  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
)

// scraped reads the metrics, their types and labels from a text exposition.
func scraped(text string) []clitest.ExportedMetric {
	byName := map[string]*clitest.ExportedMetric{}
	var names []string
	for _, m := range typeLine.FindAllStringSubmatch(text, -1) {
		byName[m[1]] = &clitest.ExportedMetric{Name: m[1], Type: m[2]}
		names = append(names, m[1])
	}
	for _, m := range seriesLine.FindAllStringSubmatch(text, -1) {
		name := m[1]
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if e, ok := byName[strings.TrimSuffix(name, suffix)]; ok && e.Type == "histogram" {
				name = e.Name
			}
		}
		e, ok := byName[name]
		if !ok {
			continue
		}
		for _, l := range labelName.FindAllStringSubmatch(m[2], -1) {
			if l[1] != "le" && !slices.Contains(e.Labels, l[1]) {
				e.Labels = append(e.Labels, l[1])
			}
		}
	}
	sort.Strings(names)
	var out []clitest.ExportedMetric
	for _, n := range names {
		out = append(out, *byName[n])
	}
	return out
}
