package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, s settings)
	}{
		{name: "defaults are the production values", check: func(t *testing.T, s settings) {
			c := s.consumer
			if c.SessionTimeout != 10*time.Second || c.Topic != "product-registrations" || c.Group != "bulkreg-registrar" {
				t.Errorf("consumer config %+v does not carry the shared defaults", c)
			}
			if c.SellerConcurrency != 100 || s.maxWait != 10*time.Second || c.MaxLateness != 125*time.Millisecond || c.MaxConcurrentCalls != s.registryConns {
				t.Errorf("derived defaults: seller concurrency %d (want the limit, 100), max wait %v (want the session timeout), lateness %v (want half the margin), calls %d (want %d)",
					c.SellerConcurrency, s.maxWait, c.MaxLateness, c.MaxConcurrentCalls, s.registryConns)
			}
		}},
		{name: "environment then flags", env: map[string]string{"BULKREG_LIMIT": "20", "BULKREG_SESSION_TIMEOUT": "3s", "BULKREG_MAX_IN_FLIGHT": "77"},
			args: []string{"--limit", "30", "--kafka-brokers", "a:1,b:2"}, check: func(t *testing.T, s settings) {
				if s.shared.Limit != 30 || s.consumer.SellerConcurrency != 30 {
					t.Errorf("limit %d, seller concurrency %d, want the flag's 30 for both", s.shared.Limit, s.consumer.SellerConcurrency)
				}
				if s.consumer.SessionTimeout != 3*time.Second || s.maxWait != 3*time.Second || s.consumer.MaxInFlight != 77 {
					t.Errorf("session %v, max wait %v, in flight %d, want 3s, 3s, 77 from the environment", s.consumer.SessionTimeout, s.maxWait, s.consumer.MaxInFlight)
				}
				if strings.Join(s.consumer.Brokers, ",") != "a:1,b:2" {
					t.Errorf("brokers %v", s.consumer.Brokers)
				}
			}},
		{name: "malformed environment value is named", env: map[string]string{"BULKREG_DRAIN_TIMEOUT": "soon"}, wantErr: "BULKREG_DRAIN_TIMEOUT"},
		{name: "shutdown must outlast the drain", args: []string{"--drain-timeout", "1m", "--shutdown-timeout", "30s"}, wantErr: "--shutdown-timeout"},
		{name: "shared validation applies", args: []string{"--limit", "0"}, wantErr: "--limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parse(tc.args, env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, s)
		})
	}
}

// TestRedisClientFailsFast: against an address where nothing listens, a
// command fails at once instead of after go-redis's dial retries and command
// retries (about 2 s with its defaults), and the client is a single-node or a
// cluster client by the number of addresses.

func TestHealthz(t *testing.T) {
	for _, tc := range []struct {
		name     string
		health   error
		redis    bool
		wantCode int
		wantBody map[string]any
	}{
		{name: "running", redis: true, wantCode: http.StatusOK, wantBody: map[string]any{"ok": true, "redis": true}},
		{name: "running, Redis down", redis: false, wantCode: http.StatusOK, wantBody: map[string]any{"ok": true, "redis": false}},
		{name: "stopped", health: errors.New("the consumer is not running"), redis: true, wantCode: http.StatusServiceUnavailable,
			wantBody: map[string]any{"ok": false, "redis": true, "error": "the consumer is not running"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			healthz(func() error { return tc.health }, func() bool { return tc.redis }).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			if rec.Code != tc.wantCode {
				t.Errorf("status %d, want %d", rec.Code, tc.wantCode)
			}
			var got map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q is not JSON: %v", rec.Body, err)
			}
			if len(got) != len(tc.wantBody) {
				t.Errorf("body %v, want %v", got, tc.wantBody)
			}
			for k, v := range tc.wantBody {
				if got[k] != v {
					t.Errorf("body %v: %s = %v, want %v", got, k, got[k], v)
				}
			}
		})
	}
}
