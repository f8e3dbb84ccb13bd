package devstack

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/uploadstatus"

	"github.com/bulkreg/bulkreg/internal/redisproc"
)

// TestDemo runs what `make demo` runs, with a 2 s window: the three sample
// uploads through the producer's HTTP service, three consumers, a real
// redis-server. Every row must be registered once, with no 429 and no
// window over the limit, and the printed report must say so.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 10 s")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed; `make test` installs it")
	}
	const window = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Redis: "real", Window: window, Margin: 50 * time.Millisecond, SessionTimeout: 6 * time.Second, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.RedisReal {
		t.Fatal("asked for a real redis-server, got the stand-in")
	}
	var out bytes.Buffer
	res, err := s.Demo(ctx, &out, DemoUploads(filepath.Join("..", "testdata", "demo")), 500*time.Millisecond)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if err := res.OK(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := map[string]int{"seller-a": 500, "seller-b": 120, "seller-c": 40}
	for seller, n := range want {
		a := res.Audit.Sellers[seller]
		if a.Products != n || a.Accepted != n || a.RateLimited != 0 || a.MaxInWindow > 100 {
			t.Errorf("%s at the sandbox: %+v, want %d products, no 429, ≤ 100 in a window", seller, a, n)
		}
	}
	if len(res.Compliance.Sellers) != 3 || res.Compliance.Exceeded {
		t.Errorf("compliance report: %+v", res.Compliance)
	}
	// 500 rows at 100 per (2 s + 50 ms) cannot finish in less than 4 windows.
	a := res.Audit.Sellers["seller-a"]
	lower := 4 * (window + 50*time.Millisecond)
	if took := a.Last.Sub(a.First); took < lower-50*time.Millisecond || took > lower*3/2 {
		t.Errorf("seller-a first→last %v, want about the lower bound %v", took, lower)
	}
	for _, line := range []string{"seller-a-500.xlsx", "compliance report", "the registry's own audit", "100/100 in window", s.ProducerURL + "/signin?token="} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the demo's output lacks %q:\n%s", line, out.String())
		}
	}
}

// The in-process stand-in runs the same Lua scripts, so `make demo` works on
// a machine without redis-server. It is only for the demo; this test checks
// just that the stack starts on it and a throttle slot can be taken under
// each policy, with the sandbox counting the way the consumers keep it.
func TestStandInRedisRunsTheScripts(t *testing.T) {
	ctx := context.Background()
	for _, policy := range []string{"fixed", "token-bucket"} {
		s, err := Start(ctx, Options{Redis: "memory", Consumers: 1, Partitions: 1, Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Throttle.Reserve(ctx, "seller-x")
		if a := s.Sandbox.Audit(); err != nil || !r.Admitted || string(s.Throttle.Policy().Kind) != policy || a.Policy != policy {
			t.Errorf("%s: reservation %+v, %v; the throttle counts %q, the sandbox %q", policy, r, err, s.Throttle.Policy().Kind, a.Policy)
		}
		s.Close()
	}
	s, err := Start(ctx, Options{Redis: "memory", Consumers: 1, Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.RedisReal {
		t.Fatal("asked for the stand-in, got redis-server")
	}
	for i := range 3 {
		r, err := s.Throttle.Reserve(ctx, "seller-x")
		if err != nil || !r.Admitted {
			t.Fatalf("reservation %d on the stand-in: %+v, %v", i, r, err)
		}
	}
	// The progress line falls back to the registry's count there.
	var out bytes.Buffer
	s.printProgress(ctx, &out, time.Second, []uploadstatus.Status{{Upload: uploadstatus.Upload{SellerID: "seller-x", Total: 3}}})
	if !strings.Contains(out.String(), "0/100 in window (registry's count)") {
		t.Errorf("progress on the stand-in: %q", out.String())
	}
}

func TestOptionsNameTheFlag(t *testing.T) {
	for _, tt := range []struct {
		o    Options
		want string
	}{
		{Options{Redis: "disk"}, "--redis"},
		{Options{Partitions: -1}, "--partitions"},
		{Options{Consumers: -2}, "--consumers"},
		{Options{Limit: -1}, "--limit"},
		{Options{Window: -time.Second}, "--window"},
		{Options{Margin: -time.Second}, "--margin"},
		{Options{Policy: "leaky"}, "--policy"},
		{Options{Policy: "fixed", Burst: 3}, "--burst"},
		{Options{SessionTimeout: time.Second}, "--session-timeout"},
		{Options{Secret: []byte("short")}, "secret"},
	} {
		if _, err := Start(context.Background(), tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Start(%+v) = %v, want an error naming %s", tt.o, err, tt.want)
		}
	}
}

// Every port the stack opens can be chosen: Redis (redis-server and the
// stand-in) and the upload service's admin listener as well as Kafka, the
// sandbox and the upload service.
func TestEveryPortChosen(t *testing.T) {
	for _, mode := range []string{"real", "memory"} {
		t.Run(mode, func(t *testing.T) {
			ports, err := redisproc.FreePorts(5)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Start(context.Background(), Options{Redis: mode, Consumers: 1, Partitions: 1,
				KafkaPort: ports[0], SandboxPort: ports[1], ProducerPort: ports[2], AdminPort: ports[3], RedisPort: ports[4]})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			want := func(what, got string, port int) {
				if !strings.HasSuffix(got, ":"+strconv.Itoa(port)) {
					t.Errorf("%s at %s, want port %d", what, got, port)
				}
			}
			want("kafka", s.Brokers[0], ports[0])
			want("sandbox", s.RegistryURL, ports[1])
			want("upload service", s.ProducerURL, ports[2])
			want("admin listener", s.AdminURL, ports[3])
			want("redis", s.RedisAddr, ports[4])
		})
	}
}
