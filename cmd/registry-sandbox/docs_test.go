package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bulkreg/bulkreg/internal/cli"
	"github.com/bulkreg/bulkreg/internal/cli/clitest"
	"github.com/bulkreg/bulkreg/internal/sandbox"
)

// TestDocs holds the documentation's tables to the sandbox: its settings
// table to the flag set it parses, and the metrics table to what its
// /metrics serves once a request has been answered (the sandbox keeps its
// registry to itself).
func TestDocs(t *testing.T) {
	fs, _, _ := bind(func(string) string { return "" })
	clitest.CheckDocs(t, "../..", cli.Command{Name: "registry-sandbox", Flags: fs}, sandboxMetrics)
}

// sandboxMetrics are what a default sandbox's /metrics serves after one
// registration.
func sandboxMetrics() ([]clitest.ExportedMetric, error) {
	s, err := parse(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		return nil, err
	}
	sb, err := sandbox.New(s.opts)
	if err != nil {
		return nil, err
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/sellers/s1/products", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "u:1")
	sb.ServeHTTP(httptest.NewRecorder(), req)
	rec := httptest.NewRecorder()
	sb.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return clitest.Scraped(rec.Body.String())
}
