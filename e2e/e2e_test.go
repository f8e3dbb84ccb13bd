// Package e2e runs the built binaries as separate processes, the way the
// README describes: the sandbox registry, three consumers and the producer
// CLI, against a real redis-server and the embedded Kafka broker.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/redisproc"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testbin"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
)

const (
	limit  = 100
	window = 3 * time.Second
	margin = 50 * time.Millisecond
)

type proc struct {
	name string
	cmd  *exec.Cmd
	out  *testbin.Output
	done chan error
}

// start runs a binary in the background with the given BULKREG_* settings;
// its output is shown when the test fails.
func start(t *testing.T, bin, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), out: &testbin.Output{}, done: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("── output of %s ──\n%s", name, p.out.Tail(40))
		}
	})
	return p
}

// freeAddrs gives n distinct free addresses. A test that starts several
// servers takes all their addresses in one call: addresses taken one by one
// may repeat, and a consumer then exits on "address already in use".
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	ports, err := redisproc.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, n)
	for i, p := range ports {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	return addrs
}

func getJSON(url string, into any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// stackEnv is the settings every command of a test stack reads: the
// embedded broker, the test's Redis, the sandbox at registry, limit per
// window with the shared margin, and extra ones after them. An extra setting
// replaces the same one above: os/exec keeps the last value of a key.
func stackEnv(brokers []string, redisAddr, registry string, window time.Duration, extra ...string) []string {
	return append([]string{
		"BULKREG_KAFKA_BROKERS=" + strings.Join(brokers, ","),
		"BULKREG_REDIS_ADDRS=" + redisAddr,
		"BULKREG_REGISTRY_URL=http://" + registry,
		"BULKREG_LIMIT=" + strconv.Itoa(limit),
		"BULKREG_WINDOW=" + window.String(),
		"BULKREG_MARGIN=" + margin.String(),
		"BULKREG_SESSION_TIMEOUT=6s",
	}, extra...)
}

// startSandbox runs the registry sandbox on registry with env and returns
// once it answers /healthz.
func startSandbox(t *testing.T, bin string, env []string, registry string) {
	t.Helper()
	start(t, filepath.Join(bin, "registry-sandbox"), "registry-sandbox", append(env, "BULKREG_LISTEN="+registry))
	testwait.For(t, 10*time.Second, "the sandbox answers /healthz", func() bool {
		resp, err := http.Get("http://" + registry + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
}

// TestEndToEnd: three sellers upload the sample spreadsheets (500, 120 and 40
// rows) with `producer upload --wait` while three consumer processes share
// the work. The sandbox's audit must show every row registered once, no 429
// and no window over the limit; the producer's compliance report must agree.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs for about 20 s")
	}
	bin := testbin.Build(t, "producer", "consumer", "registry-sandbox")
	topic := bulkreg.DefaultTopic
	brokers := testkafka.Start(t, 6, topic, bulkreg.DLQTopic(topic))
	rs := testredis.Start(t)
	redisInit(t, bin, rs.Addr)
	addrs := freeAddrs(t, 4)
	registry := addrs[0]
	env := stackEnv(brokers, rs.Addr, registry, window)

	startSandbox(t, bin, env, registry)
	var consumers []*proc
	for i := range 3 {
		consumers = append(consumers, start(t, filepath.Join(bin, "consumer"), fmt.Sprintf("consumer-%d", i+1),
			append(env, "BULKREG_METRICS_ADDR="+addrs[1+i], "BULKREG_HEARTBEAT_INTERVAL=1s")))
	}
	testkafka.WaitGroupStable(t, brokers, "bulkreg-registrar", 3, 30*time.Second)

	uploads := map[string]struct {
		file string
		rows int
	}{
		"seller-a": {"seller-a-500.xlsx", 500},
		"seller-b": {"seller-b-120.xlsx", 120},
		"seller-c": {"seller-c-40.xlsx", 40},
	}
	started := time.Now()
	var wg sync.WaitGroup
	for seller, u := range uploads {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, "producer"), "upload", "--seller", seller, "--wait",
				filepath.Join("..", "testdata", "demo", u.file))
			cmd.Env = append(os.Environ(), env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Errorf("producer upload --wait for %s: %v\n%s", seller, err, testbin.Tail(stderr.String(), 20))
				return
			}
			if id := strings.TrimSpace(stdout.String()); id == "" || strings.ContainsAny(id, " \n") {
				t.Errorf("producer upload printed no upload id: %q", stdout.String())
			}
			if !strings.Contains(stderr.String(), fmt.Sprintf("%d rows published", u.rows)) {
				t.Errorf("producer upload for %s: %q does not say %d rows were published", seller, testbin.Tail(stderr.String(), 5), u.rows)
			}
		})
	}
	wg.Wait()
	took := time.Since(started)

	var audit sandbox.Audit
	if err := getJSON("http://"+registry+"/audit", &audit); err != nil {
		t.Fatal(err)
	}
	for seller, u := range uploads {
		a := audit.Sellers[seller]
		if a.Products != u.rows || a.Accepted != u.rows {
			t.Errorf("%s: %d products, %d accepted at the registry, want %d each", seller, a.Products, a.Accepted, u.rows)
		}
		if a.RateLimited != 0 || a.MaxInWindow > limit || a.Exceeded {
			t.Errorf("%s: %d × 429, %d in one window (limit %d)", seller, a.RateLimited, a.MaxInWindow, limit)
		}
	}
	a := audit.Sellers["seller-a"]
	lower := 4 * (window + margin)
	t.Logf("all uploads done in %v; seller-a first→last %v (lower bound %v, ratio %.3f), replays %d",
		took.Round(time.Millisecond), a.Last.Sub(a.First).Round(time.Millisecond), lower, float64(a.Last.Sub(a.First))/float64(lower), a.Replays)
	if a.Last.Sub(a.First) < lower-margin {
		t.Errorf("seller-a's 500 rows took %v, less than the lower bound %v: the registry window was not enforced", a.Last.Sub(a.First), lower)
	}

	// The operator's view agrees with the registry's.
	out, err := exec.Command(filepath.Join(bin, "producer"), append([]string{"compliance", "--json"}, flagsOf(env)...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("producer compliance: %v\n%s", err, out)
	}
	var rep struct {
		Exceeded bool
		Sellers  []struct {
			Seller      string
			Accepted    int
			MaxInWindow int `json:"max_in_window"`
			RateLimited int `json:"rate_limited"`
		}
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("producer compliance --json: %v\n%s", err, out)
	}
	if rep.Exceeded || len(rep.Sellers) != 3 {
		t.Errorf("compliance report: exceeded %v, %d sellers, want not exceeded and 3", rep.Exceeded, len(rep.Sellers))
	}
	for _, s := range rep.Sellers {
		if s.Accepted != uploads[s.Seller].rows || s.MaxInWindow > limit || s.RateLimited != 0 {
			t.Errorf("compliance report for %s: %+v", s.Seller, s)
		}
	}

	// SIGTERM: every consumer leaves the group and exits 0 promptly.
	for _, c := range consumers {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range consumers {
		select {
		case err := <-c.done:
			c.done <- err // for the cleanup
			if err != nil {
				t.Errorf("%s exited with %v after SIGTERM", c.name, err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("%s did not exit within 20 s of SIGTERM", c.name)
		}
	}
}

// flagsOf turns BULKREG_X_Y=v settings into --x-y v flags.
// redisInit prepares the test's new Redis as an operator does, with
// `producer redis-init`: otherwise the throttle takes it for one that lost
// its data and holds every seller's first window.
func redisInit(t *testing.T, bin, addr string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(bin, "producer"), "redis-init", "--redis-addrs", addr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "initialised") {
		t.Fatalf("producer redis-init: %v\n%s", err, out)
	}
}

func flagsOf(env []string) []string {
	var args []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "BULKREG_REDIS_ADDRS", "BULKREG_LIMIT", "BULKREG_WINDOW":
			args = append(args, "--"+strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, "BULKREG_")), "_", "-"), v)
		}
	}
	return args
}
