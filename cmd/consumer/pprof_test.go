package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/redisproc"
	"github.com/bulkreg/bulkreg/internal/testbin"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

// consumerProcessEnv makes this test binary run the consumer's main (see
// TestConsumerProcess), so a test can start a whole consumer as a process of
// its own and stop it with SIGTERM.
const consumerProcessEnv = "BULKREG_TEST_RUN_CONSUMER"

// TestConsumerProcess is not a test: it is the consumer's main when the test
// binary is started by startConsumerProcess.
func TestConsumerProcess(t *testing.T) {
	if os.Getenv(consumerProcessEnv) != "1" {
		t.Skip("runs only as a child process of another test")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, nil, os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// TestProfilesOnlyWhereAsked: the metrics listener, which deployments open
// to Prometheus and probes, serves no profile; --pprof-addr serves them on
// a listener of its own, and nothing does by default.
func TestProfilesOnlyWhereAsked(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a consumer process with Redis and the embedded broker")
	}
	s, err := parse(nil, func(string) string { return "" }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if s.pprofAddr != "" {
		t.Errorf("--pprof-addr defaults to %q, want empty: no profiles unless an operator asks", s.pprofAddr)
	}

	brokers := testkafka.Start(t, 1, "product-registrations", "product-registrations.dlq")
	rs := testredis.Start(t)
	ports, err := redisproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr, pprofAddr := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	cmd := exec.Command(os.Args[0], "-test.run=^TestConsumerProcess$")
	cmd.Env = append(os.Environ(), consumerProcessEnv+"=1",
		"BULKREG_KAFKA_BROKERS="+strings.Join(brokers, ","),
		"BULKREG_REDIS_ADDRS="+rs.Addr,
		"BULKREG_METRICS_ADDR="+metricsAddr,
		"BULKREG_PPROF_ADDR="+pprofAddr,
		"BULKREG_SESSION_TIMEOUT=6s",
		"BULKREG_SHUTDOWN_TIMEOUT=10s",
	)
	var out testbin.Output
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("consumer output:\n%s", out.String())
		}
	})

	status := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testwait.For(t, 30*time.Second, "the consumer's metrics listener answers /healthz", func() bool {
		return status("http://"+metricsAddr+"/healthz") != 0
	})
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1"} {
		if got := status("http://" + metricsAddr + path); got != http.StatusNotFound {
			t.Errorf("GET %s on the metrics listener: %d, want 404 (profiles are not for whoever can scrape metrics)", path, got)
		}
	}
	if got := status("http://" + metricsAddr + "/metrics"); got != http.StatusOK {
		t.Errorf("GET /metrics: %d, want 200", got)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1"} {
		if got := status("http://" + pprofAddr + path); got != http.StatusOK {
			t.Errorf("GET %s on --pprof-addr: %d, want 200", path, got)
		}
	}
}
