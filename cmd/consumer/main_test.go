package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/throttle"
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
			c := s.consumer.WithDefaults(s.policy) // as consumer.New fills it in
			if c.SessionTimeout != 10*time.Second || c.Topic != "product-registrations" || c.Group != "bulkreg-registrar" {
				t.Errorf("consumer config %+v does not carry the shared defaults", c)
			}
			if c.DrainTimeout != 8*time.Second || c.HeartbeatInterval != time.Second || c.DrainTimeout+2*c.HeartbeatInterval > c.SessionTimeout {
				t.Errorf("drain %v, heartbeat %v under a %v session: want 8s and 1s, a drain the session covers", c.DrainTimeout, c.HeartbeatInterval, c.SessionTimeout)
			}
			if c.SellerConcurrency != 100 || s.policy.MaxWait != 10*time.Second || c.MaxLateness != 125*time.Millisecond || c.MaxConcurrentCalls != s.registryConns {
				t.Errorf("derived defaults: seller concurrency %d (want the limit, 100), max wait %v (want the session timeout), lateness %v (want half the margin), calls %d (want %d)",
					c.SellerConcurrency, s.policy.MaxWait, c.MaxLateness, c.MaxConcurrentCalls, s.registryConns)
			}
			if s.policy.LossHold != time.Minute+500*time.Millisecond {
				t.Errorf("hold after a loss %v, want W′ + 2 × the lateness = 1m0.5s", s.policy.LossHold)
			}
		}},
		{name: "environment then flags", env: map[string]string{"BULKREG_LIMIT": "20", "BULKREG_SESSION_TIMEOUT": "3s", "BULKREG_MAX_IN_FLIGHT": "77"},
			args: []string{"--limit", "30", "--kafka-brokers", "a:1,b:2"}, check: func(t *testing.T, s settings) {
				c := s.consumer.WithDefaults(s.policy)
				if s.shared.Limit != 30 || s.policy.Limit != 30 || c.SellerConcurrency != 30 {
					t.Errorf("limit %d, throttle's %d, seller concurrency %d, want the flag's 30 for all", s.shared.Limit, s.policy.Limit, c.SellerConcurrency)
				}
				if c.SessionTimeout != 3*time.Second || s.policy.MaxWait != 3*time.Second || c.MaxInFlight != 77 {
					t.Errorf("session %v, max wait %v, in flight %d, want 3s, 3s, 77 from the environment", c.SessionTimeout, s.policy.MaxWait, c.MaxInFlight)
				}
				if strings.Join(s.consumer.Brokers, ",") != "a:1,b:2" {
					t.Errorf("brokers %v", s.consumer.Brokers)
				}
			}},
		{name: "the sliding window by default", check: func(t *testing.T, s settings) {
			if s.policy.Kind != throttle.Sliding || s.policy.Burst != 0 {
				t.Errorf("throttle kind %q, burst %d; want sliding, none", s.policy.Kind, s.policy.Burst)
			}
		}},
		{name: "a token bucket from the environment", env: map[string]string{"BULKREG_POLICY": "token-bucket", "BULKREG_BURST": "40"}, check: func(t *testing.T, s settings) {
			if s.policy.Kind != throttle.TokenBucket || s.policy.Burst != 40 || s.policy.Validate() != nil {
				t.Errorf("throttle policy %+v (%v), want a valid token bucket of 40", s.policy, s.policy.Validate())
			}
		}},
		{name: "fixed windows", args: []string{"--policy", "fixed"}, check: func(t *testing.T, s settings) {
			if s.policy.Kind != throttle.Fixed || s.policy.Validate() != nil {
				t.Errorf("throttle policy %+v (%v), want valid fixed windows", s.policy, s.policy.Validate())
			}
		}},
		{name: "unknown policy", args: []string{"--policy", "gcra"}, wantErr: `--policy (BULKREG_POLICY): must be sliding, fixed, token-bucket, got "gcra"`},
		{name: "no app-wide limit by default", check: func(t *testing.T, s settings) {
			if s.policy.Global.On() {
				t.Errorf("app-wide limit %+v by default, want none", s.policy.Global)
			}
		}},
		{name: "the app-wide limit reaches the throttle", env: map[string]string{"BULKREG_GLOBAL_LIMIT": "200", "BULKREG_GLOBAL_WINDOW": "3s"},
			check: func(t *testing.T, s settings) {
				if s.policy.Global.Limit != 200 || s.policy.Global.Window != 3*time.Second {
					t.Errorf("throttle's app-wide limit %+v, want 200 per 3s", s.policy.Global)
				}
				if err := s.policy.Validate(); err != nil {
					t.Errorf("the policy with the app-wide limit: %v", err)
				}
			}},
		{name: "app-wide limit needs a window", args: []string{"--global-limit", "200", "--global-window", "0s"}, wantErr: "--global-window (BULKREG_GLOBAL_WINDOW)"},
		{name: "malformed environment value is named", env: map[string]string{"BULKREG_DRAIN_TIMEOUT": "soon"}, wantErr: "BULKREG_DRAIN_TIMEOUT"},
		{name: "shutdown must outlast the drain", args: []string{"--drain-timeout", "5s", "--shutdown-timeout", "5s"}, wantErr: "--shutdown-timeout"},
		// Heartbeats stop while a member drains: a drain the session does not
		// cover gets the member evicted while its calls are in progress.
		{name: "the drain must fit in the session", args: []string{"--drain-timeout", "30s"}, wantErr: "--drain-timeout (30s) plus two --heartbeat-interval (1s) must not exceed --session-timeout (10s)"},
		{name: "the drain must fit in a shorter session", env: map[string]string{"BULKREG_SESSION_TIMEOUT": "4s", "BULKREG_DRAIN_TIMEOUT": "3s"}, wantErr: "--session-timeout (4s)"},
		{name: "the drain follows the session by default", env: map[string]string{"BULKREG_SESSION_TIMEOUT": "4s"}, check: func(t *testing.T, s settings) {
			if c := s.consumer.WithDefaults(s.policy); c.DrainTimeout != 2*time.Second {
				t.Errorf("drain timeout %v under a 4s session and 1s heartbeats, want 2s", c.DrainTimeout)
			}
		}},
		{name: "the rebalance must outlast the drain", args: []string{"--rebalance-timeout", "5s"}, wantErr: "--rebalance-timeout (5s) must be longer than --drain-timeout (8s)"},
		{name: "shared validation applies", args: []string{"--limit", "0"}, wantErr: "--limit"},
		{name: "ledger defaults: 400 days, a 5 minute lease", check: func(t *testing.T, s settings) {
			if s.ledger.Retention != 400*24*time.Hour || s.ledger.Lease != 5*time.Minute {
				t.Errorf("ledger %+v, want 400 days and 5 minutes", s.ledger)
			}
		}},
		{name: "ledger settings from the environment", env: map[string]string{"BULKREG_LEDGER_RETENTION": "720h", "BULKREG_LEDGER_LEASE": "30s"}, check: func(t *testing.T, s settings) {
			if s.ledger.Retention != 720*time.Hour || s.ledger.Lease != 30*time.Second {
				t.Errorf("ledger %+v, want 720h and 30s", s.ledger)
			}
		}},
		{name: "ledger lease must be positive", args: []string{"--ledger-lease", "0s"}, wantErr: "--ledger-lease (BULKREG_LEDGER_LEASE)"},
		{name: "--status-linger is refused", args: []string{"--status-linger", "100ms"}, wantErr: "flag provided but not defined: -status-linger"},
		{name: "aside retention must be positive", args: []string{"--ledger-aside-retention", "0s"}, wantErr: "--ledger-aside-retention (BULKREG_LEDGER_ASIDE_RETENTION)"},
		{name: "a held seller's defaults", check: func(t *testing.T, s settings) {
			c := s.consumer.WithDefaults(s.policy)
			if c.SellerProbeMin != time.Second || c.SellerProbeMax != 15*time.Second || c.SellerHoldLimit != time.Hour {
				t.Errorf("seller probes %v to %v, hold limit %v; want 1s to 15s, 1h", c.SellerProbeMin, c.SellerProbeMax, c.SellerHoldLimit)
			}
		}},
		{name: "a held seller's settings from the environment, then flags", env: map[string]string{"BULKREG_SELLER_HOLD_LIMIT": "10m"},
			args: []string{"--seller-probe-min", "2s", "--seller-probe-max", "30s"}, check: func(t *testing.T, s settings) {
				c := s.consumer
				if c.SellerHoldLimit != 10*time.Minute || c.SellerProbeMin != 2*time.Second || c.SellerProbeMax != 30*time.Second {
					t.Errorf("hold limit %v, probes %v to %v; want 10m, 2s to 30s", c.SellerHoldLimit, c.SellerProbeMin, c.SellerProbeMax)
				}
			}},
		{name: "seller probes: the longest not below the first", args: []string{"--seller-probe-min", "2m", "--seller-probe-max", "1m"}, wantErr: "--seller-probe-max (1m0s) must not be below --seller-probe-min (2m0s)"},
		{name: "circuit defaults are the package's documented ones", check: func(t *testing.T, s settings) {
			if s.circuit != circuit.DefaultSettings() {
				t.Errorf("circuit settings %+v, want circuit.DefaultSettings() %+v", s.circuit, circuit.DefaultSettings())
			}
		}},
		{name: "circuit settings from the environment, then flags", env: map[string]string{"BULKREG_CIRCUIT_WINDOW": "2s", "BULKREG_CIRCUIT_FAILURE_RATIO": "0.6",
			"BULKREG_CIRCUIT_PROBE_MIN": "100ms", "BULKREG_CIRCUIT_MIN_FAILED_ROWS": "3"},
			args: []string{"--circuit-probe-max", "400ms", "--circuit-probe-lease", "12s", "--circuit-probe-multiplier", "1.5", "--circuit-min-calls", "8"},
			check: func(t *testing.T, s settings) {
				c := s.circuit
				if c.Window != 2*time.Second || c.FailureRatio != 0.6 || c.ProbeMin != 100*time.Millisecond || c.MinFailedRows != 3 ||
					c.ProbeMax != 400*time.Millisecond || c.ProbeLease != 12*time.Second || c.ProbeMultiplier != 1.5 || c.MinCalls != 8 {
					t.Errorf("circuit settings %+v", c)
				}
			}},
		{name: "circuit ratio must be a fraction", args: []string{"--circuit-failure-ratio", "1.5"}, wantErr: "--circuit-failure-ratio (BULKREG_CIRCUIT_FAILURE_RATIO) must be a fraction"},
		{name: "circuit ratio malformed in the environment", env: map[string]string{"BULKREG_CIRCUIT_FAILURE_RATIO": "half"}, wantErr: "BULKREG_CIRCUIT_FAILURE_RATIO"},
		{name: "circuit window must be positive", args: []string{"--circuit-window", "0s"}, wantErr: "--circuit-window (BULKREG_CIRCUIT_WINDOW) must be greater than 0"},
		{name: "circuit probe max not below min", args: []string{"--circuit-probe-min", "2s", "--circuit-probe-max", "1s"}, wantErr: "--circuit-probe-max (BULKREG_CIRCUIT_PROBE_MAX) (1s) must not be below --circuit-probe-min (2s)"},
		{name: "circuit probe lease above the registry timeout", args: []string{"--registry-timeout", "20s"}, wantErr: "--circuit-probe-lease (BULKREG_CIRCUIT_PROBE_LEASE) (15s) must be longer than --registry-timeout (20s)"},
		{name: "circuit multiplier at least 1", args: []string{"--circuit-probe-multiplier", "0.5"}, wantErr: "--circuit-probe-multiplier"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parse(tc.args, env(tc.env), io.Discard)
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

// -h and usage errors with every secret in the environment print none of
// them (an image's default command may be `consumer -h`, whose output ends
// up in its logs).
func TestHelpPrintsNoSecrets(t *testing.T) {
	secrets := map[string]string{
		"BULKREG_REGISTRY_AUTH_HEADER": "X-Api-Key: registry-key-5e1a7c9b3d",
		"BULKREG_REDIS_PASSWORD":       "redis-password-7c3e9a1f",
		"BULKREG_KAFKA_PASSWORD":       "kafka-password-2b8d4e6a",
		"BULKREG_KAFKA_USERNAME":       "u",
		"BULKREG_KAFKA_SASL_MECHANISM": "plain",
		"BULKREG_REGISTRY_URL":         "https://user:url-password-91ab@registry.example.com",
	}
	for _, args := range [][]string{{"-h"}, {"--bogus"}, {"--limit", "x"}, {"--registry-url", "ftp://user:url-password-91ab@x"}} {
		var out strings.Builder
		_, err := parse(args, func(k string) string { return secrets[k] }, &out)
		text := out.String()
		if err != nil {
			text += err.Error()
		}
		for _, v := range []string{"registry-key-5e1a7c9b3d", "redis-password-7c3e9a1f", "kafka-password-2b8d4e6a", "url-password-91ab"} {
			if strings.Contains(text, v) {
				t.Errorf("consumer %q prints a secret:\n%s", args, text)
			}
		}
		if args[0] == "-h" && !strings.Contains(text, "-registry-auth-header") {
			t.Errorf("consumer -h does not list -registry-auth-header:\n%s", text)
		}
		// -h says when to choose each policy.
		for _, want := range []string{"-policy", "-burst", "sliding ", "fixed ", "token-bucket ", "slower at each window's start", "aligned to the clock", "a bucket of capacity C refilled at R"} {
			if args[0] == "-h" && !strings.Contains(text, want) {
				t.Errorf("consumer -h does not say %q:\n%s", want, text)
			}
		}
	}
}

// A malformed --registry-url ("http://user:pw@" starts with http://, and an
// error that quoted it whole would print the password): the consumer stops
// at its settings, naming the flag, without the password. Redis is a closed port
// here: nothing must be reached.
func TestMalformedRegistryURLKeepsItsPassword(t *testing.T) {
	const pw = "url-password-4d17"
	for _, raw := range []string{"http://user:" + pw + "@", "http//user:" + pw + "@registry", "http:/user:" + pw + "@registry"} {
		env := map[string]string{"BULKREG_REDIS_ADDRS": "127.0.0.1:1", "BULKREG_KAFKA_BROKERS": "127.0.0.1:1"}
		var stdout, stderr strings.Builder
		code := run(context.Background(), []string{"--registry-url", raw}, func(k string) string { return env[k] }, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "--registry-url") || strings.Contains(stderr.String()+stdout.String(), pw) {
			t.Errorf("--registry-url %q: exit %d, stderr %q; want 2 and an error naming --registry-url without the password", raw, code, stderr.String())
		}
	}
}
