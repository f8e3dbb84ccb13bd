// Command outage measures what an outage of the registration API costs: one
// seller's upload while every call is answered 503 for a while, with the
// embedded Kafka broker, a real redis-server, the sandbox registration API
// (in this process) and N cmd/consumer processes with their production
// defaults (retry budget, circuit breaker) except for the shrunk window. It
// prints JSON.
//
//	go run ./bench/outage                                  # 500 rows, 4 consumers, 100 per 3 s, 503 for 150 s after 150 rows
//	go run ./bench/outage -consumer /tmp/old/consumer      # the same with another build of cmd/consumer
//
// It counts the rows dead-lettered, the requests the dead API received, the
// probes and openings of the circuit, and whether every row ended registered
// exactly once without a 429.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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
	"github.com/bulkreg/bulkreg/circuit"
	"github.com/bulkreg/bulkreg/internal/redisproc"
	"github.com/bulkreg/bulkreg/internal/sandbox"
)

type settings struct {
	Rows      int           `json:"rows"`
	Consumers int           `json:"consumers"`
	Limit     int           `json:"limit"`
	Window    time.Duration `json:"-"`
	After     int           `json:"outage_after_rows"`
	For       time.Duration `json:"-"`
	Binary    string        `json:"consumer_binary"`
}

type result struct {
	settings
	WindowS        float64 `json:"window_s"`
	OutageS        float64 `json:"outage_s"`
	RowsBefore     int     `json:"rows_registered_before_the_outage"`
	DeadLettered   int     `json:"rows_dead_lettered"`
	DeadAPICalls   int     `json:"requests_sent_into_the_dead_api"`
	CircuitOpens   int64   `json:"circuit_opens"`
	CircuitProbes  int64   `json:"circuit_probes"`
	OpenedAfterS   float64 `json:"circuit_opened_after_s"`
	Products       int     `json:"products_at_the_api"`
	Accepted       int     `json:"registrations_at_the_api"`
	RateLimited    int     `json:"rate_limited_429"`
	MaxInWindow    int     `json:"max_in_any_window"`
	DoneAfterBackS float64 `json:"all_rows_done_s_after_the_api_came_back"`
}

func main() {
	s := settings{Window: 3 * time.Second, For: 150 * time.Second}
	flag.IntVar(&s.Rows, "rows", 500, "rows of the one seller")
	flag.IntVar(&s.Consumers, "consumers", 4, "consumer processes")
	flag.IntVar(&s.Limit, "limit", 100, "registrations per seller per window")
	flag.DurationVar(&s.Window, "window", s.Window, "the API's window (shrunk from 60 s)")
	flag.IntVar(&s.After, "after", 150, "switch the outage on once this many rows are registered")
	flag.DurationVar(&s.For, "for", s.For, "how long every call is answered 503")
	flag.StringVar(&s.Binary, "consumer", "", "cmd/consumer binary to run (default: built from this module)")
	flag.Parse()
	if s.Rows <= 0 || s.Consumers <= 0 || s.Limit <= 0 || s.Window <= 0 || s.After < 0 || s.After >= s.Rows || s.For <= 0 {
		fmt.Fprintln(os.Stderr, "outage: --rows, --consumers, --limit, --window and --for must be positive, and --after below --rows")
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r, err := run(context.Background(), s, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "outage:", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(r)
}

func run(ctx context.Context, s settings, log *slog.Logger) (result, error) {
	dir, err := os.MkdirTemp("", "bulkreg-outage-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	if s.Binary == "" {
		s.Binary = filepath.Join(dir, "consumer")
		if out, err := exec.Command("go", "build", "-o", s.Binary, "github.com/bulkreg/bulkreg/cmd/consumer").CombinedOutput(); err != nil {
			return result{}, fmt.Errorf("build cmd/consumer: %v\n%s", err, out)
		}
	}
	topic := bulkreg.DefaultTopic
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(s.Consumers), topic, bulkreg.DLQTopic(topic)),
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
	sb, err := sandbox.New(sandbox.Options{Limit: s.Limit, Window: s.Window, Policy: "sliding", Latency: 5 * time.Millisecond, Logger: log})
	if err != nil {
		return result{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	srv := &http.Server{Handler: sb}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	for i := range s.Consumers {
		cmd := exec.Command(s.Binary)
		cmd.Env = append(os.Environ(),
			"BULKREG_KAFKA_BROKERS="+strings.Join(brokers, ","), "BULKREG_TOPIC="+topic, "BULKREG_GROUP=outage",
			"BULKREG_REDIS_ADDRS="+rp.Addr, "BULKREG_REGISTRY_URL=http://"+ln.Addr().String(),
			"BULKREG_LIMIT="+strconv.Itoa(s.Limit), "BULKREG_WINDOW="+s.Window.String(), "BULKREG_MARGIN=50ms",
			"BULKREG_SESSION_TIMEOUT=3s", "BULKREG_HEARTBEAT_INTERVAL=300ms", "BULKREG_DRAIN_TIMEOUT=2s", "BULKREG_METRICS_ADDR=127.0.0.1:0", "BULKREG_LOG_LEVEL=warn")
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("consumer-%d.log", i)))
		if err != nil {
			return result{}, err
		}
		defer logf.Close()
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return result{}, err
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	}
	if err := waitStable(ctx, brokers, "outage", s.Consumers); err != nil {
		return result{}, err
	}
	if err := publish(ctx, brokers, topic, s.Rows); err != nil {
		return result{}, err
	}
	const seller = "seller-a"
	products := func() int { return sb.Audit().Sellers[seller].Products }
	if err := until(time.Minute, func() bool { return products() >= s.After }); err != nil {
		return result{}, fmt.Errorf("%d rows registered before the outage: %w", s.After, err)
	}
	sb.SetOutage(sandbox.Outage{All: true})
	down := time.Now()
	res := result{settings: s, WindowS: s.Window.Seconds(), OutageS: s.For.Seconds(), RowsBefore: products()}
	time.Sleep(s.For)
	report := sb.Outage()
	b, err := circuit.New(rdb, circuit.Settings{})
	if err != nil {
		return result{}, err
	}
	if st, err := b.Peek(ctx); err == nil {
		res.CircuitOpens, res.CircuitProbes = st.Opens, st.Probes
		if st.State != circuit.Closed {
			res.OpenedAfterS = round(st.Now.Add(-st.OpenFor).Sub(down).Seconds())
		}
	}
	sb.SetOutage(sandbox.Outage{})
	back := time.Now()
	res.DeadAPICalls = report.Refused
	err = until(5*time.Minute, func() bool {
		dl, err := dlqLen(ctx, brokers, bulkreg.DLQTopic(topic))
		return err == nil && products()+dl >= s.Rows
	})
	if err != nil {
		return result{}, fmt.Errorf("rows neither registered nor dead-lettered: %w", err)
	}
	res.DoneAfterBackS = round(time.Since(back).Seconds())
	time.Sleep(time.Second) // a dead letter written just now
	if res.DeadLettered, err = dlqLen(ctx, brokers, bulkreg.DLQTopic(topic)); err != nil {
		return result{}, err
	}
	a := sb.Audit().Sellers[seller]
	res.Products, res.Accepted, res.RateLimited, res.MaxInWindow = a.Products, a.Accepted, a.RateLimited, a.MaxInWindow
	return res, nil
}

func publish(ctx context.Context, brokers []string, topic string, rows int) error {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Hash{}, BatchSize: 500, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	msgs := make([]kafka.Message, 0, rows)
	for i := 1; i <= rows; i++ {
		p := bulkreg.Product{SellerSKU: fmt.Sprintf("SKU-%d", i), Name: "outage product", CategoryCode: "50000001", Price: 12000, Stock: 10}
		v, err := json.Marshal(bulkreg.NewMessage("up-a", "seller-a", i, p, time.Now()))
		if err != nil {
			return err
		}
		msgs = append(msgs, kafka.Message{Key: []byte("seller-a"), Value: v})
	}
	return w.WriteMessages(ctx, msgs...)
}

func until(within time.Duration, ok func() bool) error {
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", within)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func waitStable(ctx context.Context, brokers []string, group string, n int) error {
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	return until(30*time.Second, func() bool {
		resp, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		return err == nil && len(resp.Groups) == 1 && resp.Groups[0].GroupState == "Stable" && len(resp.Groups[0].Members) == n
	})
}

// dlqLen counts the messages of the dead-letter topic.
func dlqLen(ctx context.Context, brokers []string, dlq string) (int, error) {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 5 * time.Second}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{dlq}})
	if err != nil || len(md.Topics) != 1 {
		return 0, fmt.Errorf("metadata of %s: %v", dlq, err)
	}
	var reqs []kafka.OffsetRequest
	for _, p := range md.Topics[0].Partitions {
		reqs = append(reqs, kafka.FirstOffsetOf(p.ID), kafka.LastOffsetOf(p.ID))
	}
	offs, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{dlq: reqs}})
	if err != nil {
		return 0, fmt.Errorf("offsets of %s: %w", dlq, err)
	}
	n := 0
	for _, p := range offs.Topics[dlq] {
		n += int(p.LastOffset - p.FirstOffset)
	}
	return n, nil
}

func round(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }
