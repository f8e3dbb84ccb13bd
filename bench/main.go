// Command bench measures the consumer end to end and prints JSON: the
// embedded Kafka broker, a real redis-server, the sandbox registration API
// (in this process) and N cmd/consumer processes, with the window scaled down
// so a run takes a minute instead of an hour.
//
//	go run ./bench                      # both scenarios
//	go run ./bench -scenario one-seller # (a) only
//
// (a) one-seller: one seller's rows; makespan ÷ lower bound, 429s, Redis
// commands per registered row.
// (b) many-sellers: 100 sellers × 500 rows with 4 consumers; each seller's
// makespan ÷ lower bound, total 429s, the consumers' peak RSS.
//
// The lower bound of n rows at L per window W with margin m is
// (⌈n/L⌉ − 1) × (W + m) after the first registration.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/redisproc"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/throttle"
)

type scenario struct {
	Name       string        `json:"name"`
	Sellers    int           `json:"sellers"`
	Rows       int           `json:"rows_per_seller"`
	Consumers  int           `json:"consumers"`
	Partitions int           `json:"partitions"`
	Limit      int           `json:"limit"`
	Window     time.Duration `json:"-"`
	Margin     time.Duration `json:"-"`
	Latency    time.Duration `json:"-"`
}

type result struct {
	scenario
	WindowS     float64            `json:"window_s"`
	MarginS     float64            `json:"margin_s"`
	LatencyS    float64            `json:"registry_latency_s"`
	LowerBoundS float64            `json:"lower_bound_s"`
	Registered  int                `json:"registered"`
	Products    int                `json:"products"`
	Replays     int                `json:"replays"`
	RateLimited int                `json:"rate_limited_429"`
	MaxInWindow int                `json:"max_in_any_window"`
	RatioMin    float64            `json:"ratio_min"`
	RatioMedian float64            `json:"ratio_median"`
	RatioMax    float64            `json:"ratio_max"`
	Ratios      map[string]float64 `json:"ratios,omitempty"`
	WallS       float64            `json:"wall_s"`
	// Commands the consumers sent to Redis (a script is one), per product.
	RedisSent   int64   `json:"redis_commands_sent"`
	RedisPerRow float64 `json:"redis_commands_sent_per_registered_row"`
	// Commands Redis executed, those run inside scripts included.
	RedisCommands     int64     `json:"redis_commands_executed"`
	RedisServerPerRow float64   `json:"redis_commands_executed_per_registered_row"`
	APICalls          int64     `json:"api_calls"`
	PeakRSSMiBEach    []float64 `json:"consumer_peak_rss_mib"`
	PeakRSSMiBTotal   float64   `json:"consumer_peak_rss_mib_total"`
	// CPU time (user + system) the consumers used, in all and in ms per
	// registered row: what sizes a consumer's CPU request (deploy/k8s).
	CPUSeconds  float64 `json:"consumer_cpu_s"`
	CPUMsPerRow float64 `json:"consumer_cpu_ms_per_row"`
}

func main() {
	which := flag.String("scenario", "all", "one-seller, many-sellers or all")
	window := flag.Duration("window", 0, "override the scaled window of both scenarios")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	scenarios := []scenario{
		{Name: "one-seller", Sellers: 1, Rows: 500, Consumers: 4, Partitions: 4, Limit: 100, Window: 3 * time.Second, Margin: 50 * time.Millisecond, Latency: 5 * time.Millisecond},
		{Name: "many-sellers", Sellers: 100, Rows: 500, Consumers: 4, Partitions: 8, Limit: 100, Window: 20 * time.Second, Margin: 100 * time.Millisecond, Latency: 5 * time.Millisecond},
	}
	var out []result
	for _, sc := range scenarios {
		if *which != "all" && *which != sc.Name {
			continue
		}
		if *window > 0 {
			sc.Window = *window
		}
		r, err := run(context.Background(), sc, log)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", sc.Name+":", err)
			os.Exit(1)
		}
		out = append(out, r)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(map[string]any{
		"machine_cpus": numCPU(),
		"note": "windows scaled down from 60 s so a run takes minutes; ratio = (last − first registration of a seller at the sandbox) ÷ lower bound, " +
			"lower bound = (⌈rows/limit⌉ − 1) × (window + margin); everything (broker, Redis, sandbox, consumers) shares this machine",
		"results": out,
	})
}

func run(ctx context.Context, sc scenario, log *slog.Logger) (result, error) {
	dir, err := os.MkdirTemp("", "bulkreg-bench-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "consumer")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/bulkreg/bulkreg/cmd/consumer").CombinedOutput(); err != nil {
		return result{}, fmt.Errorf("build cmd/consumer: %v\n%s", err, out)
	}

	topic := bulkreg.DefaultTopic
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(sc.Partitions), topic, bulkreg.DLQTopic(topic)),
		kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		return result{}, err
	}
	defer kc.Close()
	brokers := kc.ListenAddrs()

	rp, err := redisproc.Start(ctx, dir, 0)
	if err != nil {
		return result{}, err
	}
	defer rp.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: rp.Addr})
	defer rdb.Close()
	// A new Redis, prepared as an operator does (producer redis-init), so
	// the first window is not held as after a loss and the makespan measures pacing.
	if _, err := throttle.Initialize(ctx, rdb); err != nil {
		return result{}, err
	}

	sb, err := sandbox.New(sandbox.Options{Limit: sc.Limit, Window: sc.Window, Policy: "sliding", Latency: sc.Latency, Logger: log})
	if err != nil {
		return result{}, err
	}
	var apiCalls atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apiCalls.Add(1)
		sb.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	var procs []*exec.Cmd
	var metricsAddrs []string
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	for i := range sc.Consumers {
		port, err := redisproc.FreePort()
		if err != nil {
			return result{}, err
		}
		metricsAddr := fmt.Sprintf("127.0.0.1:%d", port)
		metricsAddrs = append(metricsAddrs, metricsAddr)
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(),
			"BULKREG_KAFKA_BROKERS="+strings.Join(brokers, ","), "BULKREG_TOPIC="+topic, "BULKREG_GROUP=bench",
			"BULKREG_REDIS_ADDRS="+rp.Addr, "BULKREG_REGISTRY_URL=http://"+ln.Addr().String(),
			"BULKREG_LIMIT="+strconv.Itoa(sc.Limit), "BULKREG_WINDOW="+sc.Window.String(), "BULKREG_MARGIN="+sc.Margin.String(),
			"BULKREG_SESSION_TIMEOUT=3s", "BULKREG_HEARTBEAT_INTERVAL=300ms", "BULKREG_DRAIN_TIMEOUT=2s", "BULKREG_METRICS_ADDR="+metricsAddr, "BULKREG_LOG_LEVEL=warn")
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("consumer-%d.log", i)))
		if err != nil {
			return result{}, err
		}
		defer logf.Close()
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return result{}, err
		}
		procs = append(procs, cmd)
	}
	if err := waitStable(ctx, brokers, "bench", sc.Consumers); err != nil {
		return result{}, err
	}

	before, err := commandsProcessed(ctx, rdb)
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	if err := publish(ctx, brokers, topic, sc); err != nil {
		return result{}, err
	}
	total := sc.Sellers * sc.Rows
	lower := time.Duration(math.Ceil(float64(sc.Rows)/float64(sc.Limit))-1) * (sc.Window + sc.Margin)
	deadline := time.Now().Add(3*lower + 2*time.Minute)
	for {
		n := 0
		for _, a := range sb.Audit().Sellers {
			n += a.Products
		}
		if n >= total {
			break
		}
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("only %d of %d rows registered by the deadline", n, total)
		}
		time.Sleep(200 * time.Millisecond)
	}
	wall := time.Since(start)
	// Let the last results be recorded before counting Redis commands.
	time.Sleep(time.Second)
	after, err := commandsProcessed(ctx, rdb)
	if err != nil {
		return result{}, err
	}

	res := result{scenario: sc, WindowS: sc.Window.Seconds(), MarginS: sc.Margin.Seconds(), LatencyS: sc.Latency.Seconds(),
		LowerBoundS: lower.Seconds(), WallS: wall.Seconds(), RedisCommands: after - before - 1, APICalls: apiCalls.Load()}
	var ratios []float64
	res.Ratios = map[string]float64{}
	for seller, a := range sb.Audit().Sellers {
		res.Registered += a.Accepted
		res.Products += a.Products
		res.Replays += a.Replays
		res.RateLimited += a.RateLimited
		res.MaxInWindow = max(res.MaxInWindow, a.MaxInWindow)
		ratio := a.Last.Sub(a.First).Seconds() / lower.Seconds()
		ratios = append(ratios, ratio)
		if res.Ratios != nil {
			res.Ratios[seller] = round(ratio)
		}
	}
	slices.Sort(ratios)
	res.RatioMin, res.RatioMedian, res.RatioMax = round(ratios[0]), round(ratios[len(ratios)/2]), round(ratios[len(ratios)-1])
	res.RedisServerPerRow = round(float64(res.RedisCommands) / float64(res.Products))
	for _, addr := range metricsAddrs {
		n, err := scrape(addr, "bulkreg_consumer_redis_commands_total")
		if err != nil {
			return result{}, err
		}
		res.RedisSent += int64(n)
	}
	res.RedisPerRow = round(float64(res.RedisSent) / float64(res.Products))
	for _, p := range procs {
		mib := peakRSS(p.Process.Pid)
		res.PeakRSSMiBEach = append(res.PeakRSSMiBEach, round(mib))
		res.PeakRSSMiBTotal += mib
		res.CPUSeconds += cpuSeconds(p.Process.Pid)
	}
	res.CPUMsPerRow = round(res.CPUSeconds * 1000 / float64(max(1, res.Products)))
	res.CPUSeconds = round(res.CPUSeconds)
	res.PeakRSSMiBTotal = round(res.PeakRSSMiBTotal)
	return res, nil
}

func publish(ctx context.Context, brokers []string, topic string, sc scenario) error {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Hash{}, BatchSize: 500, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	now := time.Now()
	for s := range sc.Sellers {
		seller := fmt.Sprintf("seller-%03d", s)
		msgs := make([]kafka.Message, 0, sc.Rows)
		for i := 1; i <= sc.Rows; i++ {
			p := bulkreg.Product{SellerSKU: fmt.Sprintf("%s-%d", seller, i), Name: "bench product", CategoryCode: "50000001", Price: 12000, Stock: 10}
			v, err := json.Marshal(bulkreg.NewMessage("up-"+seller, seller, i, p, now))
			if err != nil {
				return err
			}
			msgs = append(msgs, kafka.Message{Key: []byte(seller), Value: v})
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			return fmt.Errorf("publish seller %s: %w", seller, err)
		}
	}
	return nil
}

func waitStable(ctx context.Context, brokers []string, group string, n int) error {
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].GroupState == "Stable" && len(resp.Groups[0].Members) == n {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("consumer group %s did not reach %d stable members within 30 s", group, n)
}

func commandsProcessed(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO stats has no total_commands_processed")
}

// peakRSS is a process's peak resident set size (VmHWM) in MiB.
func peakRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

// cpuSeconds is the user + system CPU time a live process has used so far
// (/proc/PID/stat fields 14 and 15, in clock ticks of 1/100 s on Linux).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after it are
	// counted from its closing parenthesis.
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest) // f[0] is field 3
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

func numCPU() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "processor\t:")
}

func round(f float64) float64 { return math.Round(f*1000) / 1000 }

// scrape reads one counter from a consumer's /metrics.
func scrape(addr, name string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s has no %s", addr, name)
}
