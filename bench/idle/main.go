// Command idle measures what consumers cost while they have no rows: the
// embedded Kafka broker, a real redis-server and N cmd/consumer processes,
// joined to their group with the bench's settings (heartbeat 300 ms, window
// 3 s), their CPU read from /proc over a span with nothing published, which
// starts once the group is stable with every consumer in it and -settle has
// passed. A consumer that exits fails the run. A
// fleet waits between uploads most of the day, and during a short run its
// idle cost is a share of every row's. It prints JSON.
//
//	go run ./bench/idle -consumer-bin /tmp/consumer-new,/tmp/consumer-v040 -rounds 3   # interleaved
//
// Linux only (/proc).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/redisproc"
	"github.com/bulkreg/bulkreg/throttle"
)

type run struct {
	Binary          string    `json:"consumer_bin"`
	Round           int       `json:"round"`
	SpanS           float64   `json:"span_s"`
	CPUS            []float64 `json:"consumer_cpu_s"`
	CPUMsPerSecond  float64   `json:"consumer_cpu_ms_per_s_each"`
	LoadAvgAtStartS string    `json:"load_avg_1m_at_start"`
}

func main() {
	bins := flag.String("consumer-bin", "", "comma-separated cmd/consumer binaries, measured in turn, round after round (required)")
	consumers := flag.Int("consumers", 4, "consumer processes per run")
	partitions := flag.Int("partitions", 8, "partitions of the topic")
	settle := flag.Duration("settle", 8*time.Second, "how long the consumers run, once their group is stable, before the span starts")
	span := flag.Duration("span", 20*time.Second, "how long CPU is measured")
	rounds := flag.Int("rounds", 1, "runs of every binary, interleaved")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if *bins == "" {
		fmt.Fprintln(os.Stderr, "idle: -consumer-bin is required (build one with: go build -o /tmp/consumer ./cmd/consumer)")
		os.Exit(2)
	}
	ctx := context.Background()
	var out []run
	for round := 1; round <= *rounds; round++ {
		for _, bin := range strings.Split(*bins, ",") {
			r, err := measure(ctx, bin, *consumers, *partitions, *settle, *span)
			if err != nil {
				log.Error("idle: a run failed", "consumer_bin", bin, "err", err)
				os.Exit(1)
			}
			r.Round = round
			out = append(out, r)
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{"runs": out, "definitions": map[string]string{
		"consumer_cpu_s":             "each consumer's user + system CPU (/proc/PID/stat) over span_s, with no row published",
		"consumer_cpu_ms_per_s_each": "the mean of consumer_cpu_s ÷ span_s, in ms per second per consumer",
	}}); err != nil {
		fmt.Fprintln(os.Stderr, "idle: write the JSON:", err)
		os.Exit(1)
	}
}

func measure(ctx context.Context, bin string, n, partitions int, settle, span time.Duration) (run, error) {
	res := run{Binary: bin, SpanS: span.Seconds(), LoadAvgAtStartS: loadAvg()}
	topic := bulkreg.DefaultTopic
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topic, bulkreg.DLQTopic(topic)),
		kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		return res, err
	}
	defer kc.Close()
	dir, err := os.MkdirTemp("", "bulkreg-idle-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	rp, err := redisproc.Start(ctx, dir, 0)
	if err != nil {
		return res, err
	}
	defer rp.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: rp.Addr})
	defer rdb.Close()
	if _, err := throttle.Initialize(ctx, rdb); err != nil {
		return res, err
	}
	ports, err := redisproc.FreePorts(n)
	if err != nil {
		return res, err
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	for i, port := range ports {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(),
			"BULKREG_KAFKA_BROKERS="+strings.Join(kc.ListenAddrs(), ","), "BULKREG_TOPIC="+topic, "BULKREG_GROUP=idle",
			"BULKREG_REDIS_ADDRS="+rp.Addr, "BULKREG_REGISTRY_URL=http://127.0.0.1:9", // never called: no rows
			"BULKREG_LIMIT=100", "BULKREG_WINDOW=3s", "BULKREG_MARGIN=100ms",
			"BULKREG_SESSION_TIMEOUT=3s", "BULKREG_HEARTBEAT_INTERVAL=300ms", "BULKREG_DRAIN_TIMEOUT=2s",
			fmt.Sprintf("BULKREG_METRICS_ADDR=127.0.0.1:%d", port), "BULKREG_LOG_LEVEL=warn")
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("consumer-%d.log", i)))
		if err != nil {
			return res, err
		}
		defer logf.Close()
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return res, fmt.Errorf("start %s: %w", bin, err)
		}
		procs = append(procs, cmd)
	}
	if err := waitStable(ctx, kc.ListenAddrs(), "idle", n); err != nil {
		return res, fmt.Errorf("%w; first consumer's log: %s", err, logTail(filepath.Join(dir, "consumer-0.log")))
	}
	time.Sleep(settle)
	before := make([]float64, n)
	for i, p := range procs {
		if before[i], err = cpuS(p.Process.Pid); err != nil {
			return res, err
		}
	}
	time.Sleep(span)
	total := 0.0
	for i, p := range procs {
		after, err := cpuS(p.Process.Pid)
		if err != nil {
			return res, err
		}
		res.CPUS = append(res.CPUS, round(after-before[i]))
		total += after - before[i]
	}
	res.CPUMsPerSecond = round(total / float64(n) / span.Seconds() * 1000)
	return res, nil
}

// cpuS is a process's user + system CPU so far, in seconds.
func cpuS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read the CPU of process %d (it may have exited): %w", pid, err)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unreadable /proc/PID/stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc/PID/stat")
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, fmt.Errorf("consumer process %d exited", pid)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return ""
}

// waitStable waits until the consumer group is stable with n members.
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

// logTail is the end of a consumer's log, for an error message.
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func round(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
