package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testproxy"
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

// TestReadyzFollowsFrozenServices: `producer serve`'s /readyz turns 503
// within 10 s of its broker freezing (connections open, nothing answers),
// naming Kafka and no address, and 200 again once the broker answers; the
// same for Redis. /livez stays 200 all along. The checks run at test
// speed (--readiness-interval, --readiness-timeout).
func TestReadyzFollowsFrozenServices(t *testing.T) {
	kafkaLink := testkafka.StartBehindLink(t, 1, []string{bulkreg.DefaultTopic})
	rs := testredis.Start(t)
	redisLink, err := testproxy.NewLink(t, rs.Addr)
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	addr, adminAddr := freeAddr(), freeAddr()
	env := map[string]string{"BULKREG_KAFKA_BROKERS": kafkaLink.Addr(), "BULKREG_REDIS_ADDRS": redisLink.Addr(),
		"BULKREG_JWT_SECRET": strings.Repeat("s", 40), "BULKREG_ADDR": addr, "BULKREG_ADMIN_ADDR": adminAddr, "BULKREG_LOG_LEVEL": "warn",
		"BULKREG_READINESS_INTERVAL": "200ms", "BULKREG_READINESS_TIMEOUT": "500ms"}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve"}, func(k string) string { return env[k] }, io.Discard, io.Discard)
	}()
	t.Cleanup(func() {
		kafkaLink.SetBlackhole(false)
		redisLink.SetBlackhole(false)
		cancel()
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop within 15 s")
		}
	})
	base := "http://" + adminAddr
	testwait.For(t, 10*time.Second, "/readyz 200 once serve checked Redis and Kafka", func() bool {
		code, _ := probe(base + "/readyz")
		return code == http.StatusOK
	})
	for _, tc := range []struct {
		name string
		link *testproxy.Link
	}{{"kafka", kafkaLink}, {"redis", redisLink}} {
		tc.link.SetBlackhole(true)
		frozen := time.Now()
		var body string
		testwait.For(t, 10*time.Second, "/readyz 503 after "+tc.name+" froze", func() bool {
			var code int
			code, body = probe(base + "/readyz")
			return code == http.StatusServiceUnavailable
		})
		toNotReady := time.Since(frozen)
		if !strings.HasPrefix(body, "not ready: "+tc.name+": ") || strings.Contains(body, "127.0.0.1") {
			t.Errorf("/readyz with %s frozen says %q, want it to name %s and no address", tc.name, body, tc.name)
		}
		if code, b := probe(base + "/livez"); code != http.StatusOK || b != "ok\n" {
			t.Errorf("/livez with %s frozen: %d %q, want 200 \"ok\"", tc.name, code, b)
		}
		tc.link.SetBlackhole(false)
		thawed := time.Now()
		testwait.For(t, 10*time.Second, "/readyz 200 after "+tc.name+" thawed", func() bool {
			code, _ := probe(base + "/readyz")
			return code == http.StatusOK
		})
		t.Logf("%s: /readyz 503 %s after it froze, 200 again %s after it thawed", tc.name, toNotReady.Round(time.Millisecond), time.Since(thawed).Round(time.Millisecond))
	}
	if code, b := probe(base + "/healthz"); code != http.StatusOK || b != "ok\n" {
		t.Errorf("/healthz: %d %q, want 200 \"ok\"", code, b)
	}
}
