package httpapi

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bulkreg/bulkreg/internal/testbin"
	"github.com/bulkreg/bulkreg/producer/upload"
)

func TestValidRequestID(t *testing.T) {
	for id, ok := range map[string]bool{
		"":                                     false,
		"abc-123":                              true,
		"0b7e9e4c-5d7a-4e2b-9a51-3f1f2a3c4d5e": true,
		"01HZX3J4K5M6N7P8Q9R0S1T2V3":           true,
		"a.b_c:d":                              true,
		strings.Repeat("a", 64):                true,
		strings.Repeat("a", 65):                false,
		"with space":                           false,
		"line\nbreak":                          false,
		"quote\"":                              false,
		"한글":                                   false,
	} {
		if validRequestID(id) != ok {
			t.Errorf("validRequestID(%q) = %v, want %v", id, !ok, ok)
		}
	}
}

// TestRequestIDsAndRouteLabels: every answer carries a request
// id (the client's when valid, else a new one) in X-Request-Id and in its
// problem document, and every log line of the request names it, the upload
// package's included; requests no endpoint served are counted under two
// bounded routes; the latency histogram counts by route and code class.
func TestRequestIDsAndRouteLabels(t *testing.T) {
	e := newEnv(t, nil, upload.WriterOptions{})
	logs := &testbin.Output{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	e.up.Logger = log
	reg := prometheus.NewRegistry()
	s := &Server{Uploader: e.up, Auth: Auth{Secret: secret}, Metrics: NewMetrics(reg), Logger: log}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)

	generated := regexp.MustCompile(`^[0-9a-f]{32}$`)
	cases := []struct {
		name, method, path, sent string
		status                   int
		route, wantID            string
	}{
		{"no such path", "GET", "/no/such/thing", "", 404, routeUnmatched, ""},
		{"another unknown path", "GET", "/v1/nothing-here-either", "", 404, routeUnmatched, ""},
		{"wrong method", "DELETE", "/v1/uploads", "", 405, routeMethodNotAllowed, ""},
		{"the client's id", "GET", "/no/such/thing", "client-id-1", 404, routeUnmatched, "client-id-1"},
		{"an id that could break a log line", "GET", "/no/such/thing", "a\tb", 404, routeUnmatched, ""},
		{"an id too long", "GET", "/no/such/thing", strings.Repeat("x", 65), 404, routeUnmatched, ""},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		if c.sent != "" {
			req.Header.Set("X-Request-Id", c.sent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p problem
		json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		id := resp.Header.Get("X-Request-Id")
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.status)
		}
		if c.wantID != "" && id != c.wantID || c.wantID == "" && !generated.MatchString(id) {
			t.Errorf("%s: X-Request-Id %q, want %q or a new 32-hex id", c.name, id, c.wantID)
		}
		if p.RequestID != id {
			t.Errorf("%s: problem request_id %q, header %q", c.name, p.RequestID, id)
		}
	}
	if got := testutil.ToFloat64(s.Metrics.requests.WithLabelValues(routeUnmatched, "404")); got != 5 {
		t.Errorf("requests counted under route unmatched: %v, want 5", got)
	}
	if got := testutil.ToFloat64(s.Metrics.requests.WithLabelValues(routeMethodNotAllowed, "405")); got != 1 {
		t.Errorf("requests counted under route method_not_allowed: %v, want 1", got)
	}

	// An upload: its access line and the upload package's line share its id.
	ct, body := multipartBody(t, "file", xlsx(t, "reqid", validRows(2)...), nil)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/uploads", body)
	req.Header.Set("Authorization", "Bearer "+token(t, "a"))
	req.Header.Set("Content-Type", ct)
	req.Header.Set("X-Request-Id", "upload-42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 || resp.Header.Get("X-Request-Id") != "upload-42" {
		t.Fatalf("upload: %d, X-Request-Id %q", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	var accessLine, uploadLine map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if rec["request_id"] == nil {
			t.Errorf("log line without request_id: %s", sc.Text())
		}
		switch rec["msg"] {
		case "request":
			if rec["route"] == "POST /v1/uploads" {
				accessLine = rec
			}
			if _, ok := rec["duration_seconds"].(float64); !ok {
				t.Errorf("access line's duration_seconds is not a number: %s", sc.Text())
			}
		case "upload published":
			uploadLine = rec
		}
	}
	if accessLine["request_id"] != "upload-42" || uploadLine["request_id"] != "upload-42" {
		t.Errorf("the upload's lines: access %v, upload %v; want both request_id upload-42", accessLine, uploadLine)
	}
	if n := testutil.CollectAndCount(s.Metrics.durations, "bulkreg_producer_http_request_duration_seconds"); n != 3 {
		t.Errorf("%d latency series, want 3 (unmatched 4xx, method_not_allowed 4xx, upload 2xx)", n)
	}
	if got := histCount(t, reg, "upload", "2xx"); got != 1 {
		t.Errorf("upload 2xx latency observations: %d, want 1", got)
	}
}

// histCount reads the sample count of the latency histogram's series.
func histCount(t *testing.T, reg *prometheus.Registry, route, class string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "bulkreg_producer_http_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["route"] == route && l["code_class"] == class {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}
