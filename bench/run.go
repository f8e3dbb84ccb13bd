// One run of a scenario: the broker, Redis, the sandbox and the consumers,
// started, fed and measured.

package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/redisproc"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/throttle"
)

func run(ctx context.Context, sc scenario, pipelining, bin, parent string, pprofPort, busy int, log *slog.Logger) (result, error) {
	dir, err := os.MkdirTemp(parent, sc.Name+"-")
	if err != nil {
		return result{}, err
	}
	res := result{Scenario: sc.Name, RedisPipelining: pipelining, LoadAvg1mAtStart: loadAvg(), Settings: settingsJSON{
		Groups: sc.Groups, Sellers: sc.sellers(), Rows: sc.rows(), Consumers: sc.Consumers, Partitions: sc.Partitions,
		LimitPerSeller: sc.Limit, WindowS: sc.Window.Seconds(), MarginS: sc.Margin.Seconds(),
		GlobalLimit: sc.GlobalLimit, GlobalWindowS: sc.GlobalWindow.Seconds(), LatencyS: sc.Latency.Seconds(),
		BusyProcesses: busy,
	}}
	stopBusy, err := startBusy(busy)
	defer stopBusy()
	if err != nil {
		return res, err
	}

	topic := bulkreg.DefaultTopic
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(sc.Partitions), topic, bulkreg.DLQTopic(topic)),
		kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		return res, err
	}
	defer kc.Close()
	// The consumers' fetches, counted as the broker receives them (the
	// only other client, the publisher, sends none).
	var fetches atomic.Int64
	kc.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		fetches.Add(1)
		return nil, nil, false // observed, left to the broker
	})
	brokers := kc.ListenAddrs()

	rp, err := redisproc.Start(ctx, dir, 0)
	if err != nil {
		return res, err
	}
	defer rp.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: rp.Addr})
	defer rdb.Close()
	// A new Redis, prepared as an operator does (producer redis-init), so
	// the first window is not held as after a loss and the makespan measures pacing.
	if _, err := throttle.Initialize(ctx, rdb); err != nil {
		return res, err
	}

	opts := sandbox.Options{Limit: sc.Limit, Window: sc.Window, Policy: "sliding", Latency: sc.Latency, Logger: log}
	opts.GlobalLimit, opts.GlobalWindow = sc.GlobalLimit, sc.GlobalWindow
	sb, err := sandbox.New(opts)
	if err != nil {
		return res, err
	}
	// Counted here so waiting for the last row does not take the sandbox's
	// lock (Audit) every poll while 4,000 calls a second want it.
	var requests, created atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		rec := &statusRecorder{ResponseWriter: w}
		sb.ServeHTTP(rec, r)
		if rec.status == http.StatusCreated {
			created.Add(1)
		}
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
	// All at once: ports taken one by one may repeat.
	ports, err := redisproc.FreePorts(sc.Consumers)
	if err != nil {
		return res, err
	}
	for i, port := range ports {
		metricsAddr := fmt.Sprintf("127.0.0.1:%d", port)
		metricsAddrs = append(metricsAddrs, metricsAddr)
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(),
			"BULKREG_KAFKA_BROKERS="+strings.Join(brokers, ","), "BULKREG_TOPIC="+topic, "BULKREG_GROUP=bench",
			"BULKREG_REDIS_ADDRS="+rp.Addr, "BULKREG_REGISTRY_URL=http://"+ln.Addr().String(),
			"BULKREG_LIMIT="+strconv.Itoa(sc.Limit), "BULKREG_WINDOW="+sc.Window.String(), "BULKREG_MARGIN="+sc.Margin.String(),
			"BULKREG_SESSION_TIMEOUT=3s", "BULKREG_HEARTBEAT_INTERVAL=300ms", "BULKREG_DRAIN_TIMEOUT=2s", "BULKREG_METRICS_ADDR="+metricsAddr, "BULKREG_LOG_LEVEL=warn")
		if pprofPort > 0 {
			cmd.Env = append(cmd.Env, fmt.Sprintf("BULKREG_PPROF_ADDR=127.0.0.1:%d", pprofPort+i))
		}
		if pipelining != "" {
			cmd.Env = append(cmd.Env, "BULKREG_REDIS_PIPELINING="+pipelining)
		}
		if sc.GlobalLimit > 0 {
			cmd.Env = append(cmd.Env, "BULKREG_GLOBAL_LIMIT="+strconv.Itoa(sc.GlobalLimit), "BULKREG_GLOBAL_WINDOW="+sc.GlobalWindow.String())
		}
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
	if err := waitStable(ctx, brokers, "bench", sc.Consumers); err != nil {
		return res, fmt.Errorf("%w; first consumer's log:\n%s", err, logTail(filepath.Join(dir, "consumer-0.log")))
	}

	if sc.Idle > 0 {
		time.Sleep(idleSettle)
	}
	before, err := sampleAll(ctx, rdb, procs, metricsAddrs)
	if err != nil {
		return res, err
	}
	fetchesBefore := fetches.Load()
	start := time.Now()
	if sc.Idle > 0 {
		time.Sleep(sc.Idle)
	} else if err := registerAll(ctx, sc, brokers, topic, sb, &created, &res, dir); err != nil {
		return res, err
	}
	after, err := sampleAll(ctx, rdb, procs, metricsAddrs)
	if err != nil {
		return res, err
	}
	res.SpanS = round(time.Since(start).Seconds())
	res.FetchesPerSEach = round(float64(fetches.Load()-fetchesBefore) / float64(len(procs)) / res.SpanS)
	for _, p := range procs {
		if exited(p.Process.Pid) {
			return res, fmt.Errorf("consumer process %d exited during the run; first consumer's log:\n%s", p.Process.Pid, logTail(filepath.Join(dir, "consumer-0.log")))
		}
	}

	audit := sb.Audit()
	times, rows := map[string][]time.Time{}, map[string]int{}
	groupRatios := make([][]float64, len(sc.Groups))
	finish := make([]time.Duration, len(sc.Groups))
	var ratios []float64
	sc.eachSeller(func(id string, _, n int) {
		times[id], rows[id] = sb.AcceptedTimes(id), n
	})
	first, last := span(times)
	res.times = map[string][]float64{}
	for id, ts := range times {
		for _, t := range ts {
			res.times[id] = append(res.times[id], round(t.Sub(first).Seconds()))
		}
	}
	if sc.sellers() <= 20 { // a hundred would bury the rest of the JSON
		res.SellerRatios = map[string]float64{}
	}
	sc.eachSeller(func(id string, g, n int) {
		a := audit.Sellers[id]
		res.RegisteredRows += a.Products
		res.Accepted += a.Accepted
		res.Replays += a.Replays
		res.RateLimited += a.RateLimited
		res.MaxInWindow = max(res.MaxInWindow, a.MaxInWindow)
		if ts := times[id]; len(ts) > 0 {
			finish[g] = max(finish[g], ts[len(ts)-1].Sub(first))
		}
		if lb := lowerBound(n, sc.Limit, sc.Window, sc.Margin); lb > 0 {
			r := a.Last.Sub(a.First).Seconds() / lb.Seconds()
			ratios = append(ratios, r)
			groupRatios[g] = append(groupRatios[g], r)
			if res.SellerRatios != nil {
				res.SellerRatios[id] = round(r)
			}
		}
	})
	res.APIRequests = requests.Load()
	res.Ratio = summarize(ratios)
	for g, grp := range sc.Groups {
		res.Groups = append(res.Groups, groupResult{sellerGroup: grp,
			LowerBoundS:      lowerBound(grp.RowsEach, sc.Limit, sc.Window, sc.Margin).Seconds(),
			Ratio:            summarize(groupRatios[g]),
			FinishWindowsMax: round(finish[g].Seconds() / sc.finishWindow().Seconds()),
		})
	}
	if !last.IsZero() {
		res.FirstToLastS = round(last.Sub(first).Seconds())
		res.PublishToLastS = round(last.Sub(start).Seconds())
	}
	if d := last.Sub(first).Seconds(); d > 0 {
		res.RegistrationsPerS = math.Round(float64(res.RegisteredRows) / d)
	}
	if sc.GlobalLimit > 0 {
		periods, used, worst := globalUse(times, rows, sc.Limit, sc.Window, sc.Margin, sc.GlobalLimit, sc.GlobalWindow)
		gr := &globalResult{Periods: periods}
		for _, p := range periods {
			if p.Counted {
				gr.PeriodsCounted++
			}
		}
		if !math.IsNaN(used) {
			gr.UsedFraction, gr.UsedFractionWorst = ptr(round(used)), ptr(round(worst))
		}
		res.Global = gr
	}

	perRow := func(x float64) float64 { // 0 for an idle scenario
		if res.RegisteredRows == 0 {
			return 0
		}
		return x / float64(res.RegisteredRows)
	}
	var cpu, sent, trips float64
	haveTrips := true
	for i := range procs {
		cpu += after.consumers[i].cpuS - before.consumers[i].cpuS
		sent += after.consumers[i].commands - before.consumers[i].commands
		haveTrips = haveTrips && after.consumers[i].roundTrips != nil && before.consumers[i].roundTrips != nil
		if haveTrips {
			trips += *after.consumers[i].roundTrips - *before.consumers[i].roundTrips
		}
		mib := peakRSS(procs[i].Process.Pid)
		res.PeakRSSMiB = append(res.PeakRSSMiB, round(mib))
		res.PeakRSSMiBMax = max(res.PeakRSSMiBMax, round(mib))
	}
	res.CPUS, res.CPUUsPerRow = round(cpu), math.Round(perRow(cpu)*1e6)
	res.CPUMsPerSEach = round(cpu / float64(len(procs)) / res.SpanS * 1000)
	res.CommandsSent, res.CommandsSentPerRow = sent, round(perRow(sent))
	if haveTrips {
		res.RoundTrips, res.RoundTripsPerRow = ptr(trips), ptr(round(perRow(trips)))
	}
	res.ReserveLatency = reserveLatency(before.consumers, after.consumers)
	redisCPU := after.redisCPUS - before.redisCPUS
	res.RedisCPUUsPerRow = math.Round(perRow(redisCPU) * 1e6)
	res.CPU = cpuShare{Busy: round(after.machineBusyS - before.machineBusyS), Consumers: round(cpu), Redis: round(redisCPU),
		Bench: round(after.benchCPUS - before.benchCPUS)}
	res.CPU.Other = round(res.CPU.Busy - res.CPU.Consumers - res.CPU.Redis - res.CPU.Bench)
	mallocs, haveMallocs := 0.0, true
	for i := range procs {
		a, okA := after.consumers[i].metrics["go_memstats_mallocs_total"]
		b, okB := before.consumers[i].metrics["go_memstats_mallocs_total"]
		haveMallocs = haveMallocs && okA && okB
		mallocs += a - b
	}
	if haveMallocs {
		res.AllocsPerRow = ptr(math.Round(perRow(mallocs)))
	}
	if wakes, ok := counted(before, after, "go_sched_latencies_seconds_count"); ok {
		// The runtime records one goroutine in every schedTrackingPeriod
		// it makes runnable and runs.
		res.WakesPerRow = ptr(round(perRow(wakes * schedTrackingPeriod)))
	}
	if cycles, ok := counted(before, after, "go_gc_duration_seconds_count"); ok {
		res.GCCycles = ptr(cycles)
	}
	res.Counters = map[string]float64{}
	for _, name := range diagnostics {
		sum, ok := 0.0, true
		for i := range procs {
			a, okA := after.consumers[i].metrics[name]
			b, okB := before.consumers[i].metrics[name]
			ok = ok && okA && okB
			sum += a - b
		}
		if ok {
			res.Counters[name] = sum
		}
	}
	// −1: the first sample's INFO is itself a command.
	res.CommandsExecuted = after.redisCommands - before.redisCommands - 1
	res.CommandsExecutedPerRow = round(perRow(float64(res.CommandsExecuted)))
	res.CommandsExecutedByName = map[string]float64{}
	for name, calls := range after.redisByCommand {
		if per := round(perRow(float64(calls - before.redisByCommand[name]))); per > 0 {
			res.CommandsExecutedByName[name] = per
		}
	}
	res.RedisUsByCommand = map[string]float64{}
	for name, us := range after.redisUsec {
		if per := round(perRow(float64(us - before.redisUsec[name]))); per > 0 {
			res.RedisUsByCommand[name] = per
		}
	}
	return res, nil
}

func ptr[T any](v T) *T { return &v }

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
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

// logTail is the end of a consumer's log, for an error message.
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// schedTrackingPeriod is how many goroutine schedulings the Go runtime
// counts one of in /sched/latencies:seconds (runtime.gTrackingPeriod).
const schedTrackingPeriod = 8

// counted is a counter's increase over the run, summed over the consumers;
// false when a consumer does not export it.
func counted(before, after sample, name string) (float64, bool) {
	sum := 0.0
	for i := range after.consumers {
		a, okA := after.consumers[i].metrics[name]
		b, okB := before.consumers[i].metrics[name]
		if !okA || !okB {
			return 0, false
		}
		sum += a - b
	}
	return sum, true
}

// registerAll publishes the scenario's rows and waits until the sandbox has
// registered every one, then a second more: the last results recorded and
// the offsets committed belong to the rows too.
func registerAll(ctx context.Context, sc scenario, brokers []string, topic string, sb *sandbox.Server, created *atomic.Int64, res *result, dir string) error {
	start := time.Now()
	if err := publish(ctx, brokers, topic, sc); err != nil {
		return err
	}
	res.PublishS = round(time.Since(start).Seconds())
	total := sc.rows()
	var longest time.Duration
	for _, g := range sc.Groups {
		longest = max(longest, lowerBound(g.RowsEach, sc.Limit, sc.Window, sc.Margin))
	}
	deadline := time.Now().Add(3*longest + 2*time.Minute)
	for {
		if created.Load() >= int64(total) {
			n := 0
			for _, a := range sb.Audit().Sellers {
				n += a.Products
			}
			if n >= total {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d rows registered (201) by the deadline; first consumer's log:\n%s",
				created.Load(), total, logTail(filepath.Join(dir, "consumer-0.log")))
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	return nil
}
