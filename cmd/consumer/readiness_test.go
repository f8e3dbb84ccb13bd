package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/testbin"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

// probe answers the status and body of GET url (0 when nothing answers).
func probe(url string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReadyzFollowsAFrozenBroker: a consumer whose broker stops answering
// (connections open, nothing answers, as in a network partition) turns
// /readyz 503 within 10 s, naming Kafka, and within a session timeout or
// so also says it lost its group; /livez stays 200 all along (a restart
// would not bring the broker back). Once the broker answers again /readyz
// is 200 again: the consumer rejoined its group. The readiness checks run
// at test speed (--readiness-interval, --readiness-timeout); kafka-go's
// heartbeat timeout is its own (5 s).
func TestReadyzFollowsAFrozenBroker(t *testing.T) {
	link := testkafka.StartBehindLink(t, 2, []string{bulkreg.DefaultTopic, bulkreg.DLQTopic(bulkreg.DefaultTopic)},
		kfake.GroupMinSessionTimeout(500*time.Millisecond))
	rs := testredis.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	ln.Close()
	env := map[string]string{
		"BULKREG_KAFKA_BROKERS":      link.Addr(),
		"BULKREG_REDIS_ADDRS":        rs.Addr,
		"BULKREG_METRICS_ADDR":       metricsAddr,
		"BULKREG_SESSION_TIMEOUT":    "3s",
		"BULKREG_HEARTBEAT_INTERVAL": "300ms",
		"BULKREG_SHUTDOWN_TIMEOUT":   "10s",
		"BULKREG_READINESS_INTERVAL": "200ms",
		"BULKREG_READINESS_TIMEOUT":  "500ms",
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out testbin.Output
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, nil, func(k string) string { return env[k] }, io.Discard, &out) }()
	t.Cleanup(func() {
		link.SetBlackhole(false)
		cancel()
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			t.Error("the consumer did not stop within 15 s")
		}
		if t.Failed() {
			t.Logf("consumer output:\n%s", out.String())
		}
	})
	base := "http://" + metricsAddr
	testwait.For(t, 30*time.Second, "/readyz 200 once the consumer joined its group", func() bool {
		code, _ := probe(base + "/readyz")
		return code == http.StatusOK
	})
	if code, body := probe(base + "/livez"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/livez of a running consumer: %d %q, want 200 \"ok\"", code, body)
	}
	if code, _ := probe(base + "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz of a running consumer: %d, want 200", code)
	}

	link.SetBlackhole(true)
	frozen := time.Now()
	var body string
	testwait.For(t, 10*time.Second, "/readyz 503 after the broker froze", func() bool {
		var code int
		code, body = probe(base + "/readyz")
		return code == http.StatusServiceUnavailable
	})
	toNotReady := time.Since(frozen)
	if !strings.Contains(body, "kafka") {
		t.Errorf("/readyz with the broker frozen says %q, want it to name kafka", body)
	}
	// Held until the heartbeat fails too: the consumer must find its group
	// again after the thaw, not only the broker.
	testwait.For(t, 20*time.Second, "/readyz to say the consumer left its group", func() bool {
		var code int
		code, body = probe(base + "/readyz")
		if code == http.StatusOK {
			t.Fatalf("/readyz 200 while the broker is frozen")
		}
		return strings.Contains(body, "consumer group")
	})
	if code, _ := probe(base + "/livez"); code != http.StatusOK {
		t.Errorf("/livez with the broker frozen: %d, want 200 (the process runs; restarting it would not help)", code)
	}
	frozenFor := time.Since(frozen)

	link.SetBlackhole(false)
	thawed := time.Now()
	testwait.For(t, 30*time.Second, "/readyz 200 after the broker thawed", func() bool {
		code, _ := probe(base + "/readyz")
		return code == http.StatusOK
	})
	t.Logf("/readyz 503 %s after the broker froze; frozen %s; 200 again %s after it thawed", toNotReady.Round(time.Millisecond), frozenFor.Round(time.Millisecond), time.Since(thawed).Round(time.Millisecond))
}
