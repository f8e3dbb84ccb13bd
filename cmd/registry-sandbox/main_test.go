package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/sandbox"
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
		{name: "defaults: the contract, on loopback", check: func(t *testing.T, s settings) {
			o := s.opts
			if s.listen != "127.0.0.1:8081" || o.Limit != 100 || o.Window != time.Minute || o.Policy != "sliding" || s.logLevel != slog.LevelInfo {
				t.Errorf("defaults %q %+v %v", s.listen, o, s.logLevel)
			}
			if o.FailRate != 0 || o.SlowRate != 0 || o.DropRate != 0 || o.Latency != 0 {
				t.Errorf("faults on by default: %+v", o)
			}
			if s.timeouts != defaultTimeouts() || s.timeouts.shutdown != 5*time.Second {
				t.Errorf("timeouts %+v, want the defaults with a 5 s shutdown", s.timeouts)
			}
		}},
		{name: "docker-compose's environment", env: map[string]string{"BULKREG_LISTEN": "0.0.0.0:8081", "BULKREG_LIMIT": "100", "BULKREG_WINDOW": "60s"},
			check: func(t *testing.T, s settings) {
				if s.listen != "0.0.0.0:8081" || s.opts.Limit != 100 || s.opts.Window != time.Minute {
					t.Errorf("settings %q %+v", s.listen, s.opts)
				}
			}},
		{name: "flags win over the environment", env: map[string]string{"BULKREG_LIMIT": "20", "BULKREG_FAIL_RATE": "0.5"},
			args: []string{"--limit", "30", "--fail-rate", "0.1", "--slow-rate=0.2", "--slow-delay", "3s", "--drop-rate", "0.05", "--policy", "token-bucket", "--log-level", "debug"},
			check: func(t *testing.T, s settings) {
				o := s.opts
				if o.Limit != 30 || o.FailRate != 0.1 || o.SlowRate != 0.2 || o.SlowDelay != 3*time.Second || o.DropRate != 0.05 || o.Policy != "token-bucket" || s.logLevel != slog.LevelDebug {
					t.Errorf("settings %+v %v", o, s.logLevel)
				}
			}},
		{name: "the app-wide limit, off by default", check: func(t *testing.T, s settings) {
			if s.opts.GlobalLimit != 0 {
				t.Errorf("app-wide limit %d by default, want 0 (off)", s.opts.GlobalLimit)
			}
		}},
		{name: "the app-wide limit", env: map[string]string{"BULKREG_GLOBAL_LIMIT": "200", "BULKREG_GLOBAL_WINDOW": "3s"},
			check: func(t *testing.T, s settings) {
				if s.opts.GlobalLimit != 200 || s.opts.GlobalWindow != 3*time.Second {
					t.Errorf("app-wide %d per %v, want 200 per 3s", s.opts.GlobalLimit, s.opts.GlobalWindow)
				}
			}},
		{name: "negative app-wide limit", args: []string{"--global-limit", "-5"}, wantErr: "--global-limit (BULKREG_GLOBAL_LIMIT)"},
		{name: "app-wide limit without a window", args: []string{"--global-limit", "5", "--global-window", "0s"}, wantErr: "--global-window (BULKREG_GLOBAL_WINDOW)"},
		{name: "fail rate above 1", args: []string{"--fail-rate", "1.5"}, wantErr: "--fail-rate (BULKREG_FAIL_RATE): must be a fraction between 0 and 1, got 1.5"},
		{name: "drop rate from the environment", env: map[string]string{"BULKREG_DROP_RATE": "-0.1"}, wantErr: "--drop-rate"},
		{name: "malformed rate in the environment", env: map[string]string{"BULKREG_SLOW_RATE": "lots"}, wantErr: "BULKREG_SLOW_RATE"},
		{name: "unknown policy", args: []string{"--policy", "leaky"}, wantErr: "--policy"},
		{name: "a token bucket of the environment's size", env: map[string]string{"BULKREG_POLICY": "token-bucket", "BULKREG_BURST": "7"},
			check: func(t *testing.T, s settings) {
				if s.opts.Policy != "token-bucket" || s.opts.Burst != 7 {
					t.Errorf("policy %q, burst %d; want token-bucket, 7", s.opts.Policy, s.opts.Burst)
				}
			}},
		{name: "a burst without a bucket", args: []string{"--policy", "fixed", "--burst", "7"}, wantErr: "--burst (BULKREG_BURST)"},
		{name: "zero limit", args: []string{"--limit", "0"}, wantErr: "--limit"},
		{name: "negative latency", args: []string{"--latency", "-1s"}, wantErr: "--latency"},
		{name: "listen without port", args: []string{"--listen", "localhost"}, wantErr: "--listen"},
		{name: "log level", args: []string{"--log-level", "loud"}, wantErr: "--log-level"},
		{name: "not a number", args: []string{"--fail-rate", "half"}, wantErr: "fail-rate"},
		{name: "stray argument", args: []string{"serve"}, wantErr: "unexpected argument \"serve\""},
		{name: "every timeout is a setting", env: map[string]string{"BULKREG_SHUTDOWN_TIMEOUT": "9s"},
			args: []string{"--read-header-timeout", "1s", "--read-timeout", "2s", "--write-timeout", "3s", "--idle-timeout", "4s"},
			check: func(t *testing.T, s settings) {
				if want := (timeouts{readHeader: time.Second, read: 2 * time.Second, write: 3 * time.Second, idle: 4 * time.Second, shutdown: 9 * time.Second}); s.timeouts != want {
					t.Errorf("timeouts %+v, want %+v", s.timeouts, want)
				}
			}},
		{name: "zero shutdown timeout", args: []string{"--shutdown-timeout", "0s"}, wantErr: "--shutdown-timeout (BULKREG_SHUTDOWN_TIMEOUT): must be greater than 0"},
		{name: "negative read timeout", env: map[string]string{"BULKREG_READ_TIMEOUT": "-1s"}, wantErr: "--read-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parse(tc.args, env(tc.env), io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
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

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if _, err := parse([]string{"--help"}, func(string) string { return "" }, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("error %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"registration API", "/audit", "Retry-After",
		"-listen", "BULKREG_LISTEN", "-limit", "-window", "-policy", "-burst", "-latency", "-jitter",
		"-fail-rate", "BULKREG_FAIL_RATE", "-slow-rate", "-slow-delay", "-drop-rate", "-log-level",
		"-shutdown-timeout", "BULKREG_SHUTDOWN_TIMEOUT", "-read-timeout", "-write-timeout", "-idle-timeout", "-read-header-timeout"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help does not mention %q:\n%s", want, out.String())
		}
	}
}

// TestServeShutsDown serves on a free port, answers /healthz, and on
// shutdown finishes an answer in progress before returning nil.
func TestServeShutsDown(t *testing.T) {
	ln := listen(t)
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const latency = time.Second
	tm := defaultTimeouts()
	tm.shutdown = 3 * time.Second
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, ln, sandbox.Options{Limit: 1, Window: time.Second, SlowRate: 1, SlowDelay: latency}, tm, slog.New(slog.DiscardHandler))
	}()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz %d", resp.StatusCode)
	}

	// A registration in progress (held by the latency) when shutdown starts.
	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/sellers/s/products",
			strings.NewReader(`{"seller_sku":"A","name":"n","category_code":"c","price":1,"stock":0}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("the registration in progress at shutdown failed: %v", err)
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	handling(t, base) // the registration is in progress: counted, its answer held back
	began := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after a clean shutdown", err)
		}
	case <-time.After(tm.shutdown + time.Second):
		t.Fatal("serve did not return after its context ended")
	}
	if took := time.Since(began); took < latency/4 {
		t.Errorf("serve returned %s after shutdown began, before the answer in progress (held %s) was written", took, latency)
	}
	if code := <-answered; code != http.StatusCreated {
		t.Fatalf("the registration in progress at shutdown got %d, want 201", code)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the sandbox still answers after shutdown")
	}
}

// TestShutdownTimeoutCutsOffSlowAnswers: an answer slower than
// --shutdown-timeout does not hold the process; serve says so.
func TestShutdownTimeoutCutsOffSlowAnswers(t *testing.T) {
	ln := listen(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tm := defaultTimeouts()
	tm.shutdown = 200 * time.Millisecond
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, ln, sandbox.Options{SlowRate: 1, SlowDelay: 5 * time.Second}, tm, slog.New(slog.DiscardHandler))
	}()
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/sellers/s/products",
			strings.NewReader(`{"seller_sku":"A","name":"n","category_code":"c","price":1,"stock":0}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	handling(t, "http://"+ln.Addr().String()) // the registration waits out its slow answer
	began := time.Now()
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "--shutdown-timeout 200ms") {
			t.Fatalf("serve returned %v, want an error naming --shutdown-timeout", err)
		}
		if took := time.Since(began); took > 2*time.Second {
			t.Errorf("serve returned %s after shutdown began, want about the 200ms shutdown timeout", took)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a slow answer held the shutdown past its timeout")
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// handling waits until the sandbox at base has counted seller s's
// registration: its request is in the handler, whose answer SlowDelay holds
// back. A request whose bytes the server has only begun to read is not
// enough: net/http drops a request it finishes reading after Shutdown began.
func handling(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var a sandbox.Audit
		resp, err := http.Get(base + "/audit")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
		}
		if err == nil && a.Sellers["s"].Accepted >= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registration did not reach the sandbox's handler within 10s (last: %+v, %v)", a, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// -h with every bulkreg secret in the environment prints none of them.
func TestHelpPrintsNoSecrets(t *testing.T) {
	secrets := map[string]string{
		"BULKREG_REGISTRY_AUTH_HEADER": "X-Api-Key: registry-key-5e1a7c9b3d",
		"BULKREG_JWT_SECRET":           "jwt-seller-secret-4f1c9a7e2b6d8053e1",
		"BULKREG_REDIS_PASSWORD":       "redis-password-7c3e9a1f",
		"BULKREG_KAFKA_PASSWORD":       "kafka-password-2b8d4e6a",
	}
	for _, args := range [][]string{{"-h"}, {"--bogus"}} {
		var out strings.Builder
		parse(args, func(k string) string { return secrets[k] }, &out)
		for _, v := range secrets {
			if strings.Contains(out.String(), v[strings.Index(v, " ")+1:]) {
				t.Errorf("registry-sandbox %q prints a secret:\n%s", args, out.String())
			}
		}
	}
}
