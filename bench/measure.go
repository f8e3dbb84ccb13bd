// Reading the counters: the consumers' metrics, Redis's INFO, /proc and the
// machine.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// sample is the consumers', Redis's and the machine's counters at one moment.
type sample struct {
	consumers      []consumerSample
	redisCommands  int64
	redisByCommand map[string]int64 // calls, from INFO commandstats
	redisUsec      map[string]int64 // µs Redis spent in each command, from INFO commandstats (a script's includes its inner commands')
	redisCPUS      float64
	benchCPUS      float64 // this process: the sandbox and the broker
	machineBusyS   float64 // every CPU, every process
}

type consumerSample struct {
	cpuS       float64
	commands   float64
	roundTrips *float64 // nil: the binary has no such counter
	metrics    map[string]float64
}

// diagnostics are consumer counters printed as they are (summed over the
// consumers, over the scenario) when the binary has them: they explain a
// slow run (slots given back, rows handed back at a rebalance).
var diagnostics = [...]string{
	"bulkreg_consumer_slots_missed_total",
	"bulkreg_consumer_rows_abandoned_total",
	"bulkreg_consumer_rebalances_total",
	"bulkreg_consumer_redis_unavailable_total",
	"bulkreg_consumer_rate_limited_total",
}

func sampleAll(ctx context.Context, rdb *redis.Client, procs []*exec.Cmd, metricsAddrs []string) (sample, error) {
	var s sample
	client := &http.Client{Timeout: 5 * time.Second}
	for i, p := range procs {
		m, err := scrape(ctx, client, metricsAddrs[i])
		if err != nil {
			return s, err
		}
		c := consumerSample{cpuS: cpuSeconds(fmt.Sprintf("/proc/%d/stat", p.Process.Pid)), metrics: m}
		var ok bool
		if c.commands, ok = m["bulkreg_consumer_redis_commands_total"]; !ok {
			return s, fmt.Errorf("consumer %d's /metrics has no bulkreg_consumer_redis_commands_total", i)
		}
		if v, ok := m["bulkreg_consumer_redis_roundtrips_total"]; ok {
			c.roundTrips = &v
		}
		s.consumers = append(s.consumers, c)
	}
	var err error
	if s.redisCommands, s.redisCPUS, s.redisByCommand, s.redisUsec, err = redisStats(ctx, rdb); err != nil {
		return s, err
	}
	s.benchCPUS, s.machineBusyS = cpuSeconds("/proc/self/stat"), machineBusy()
	return s, nil
}

// redisStats reads, from one INFO, the commands Redis has processed, the
// CPU it has used, and how often it has run each command (commandstats:
// "cmdstat_zadd:calls=12,usec=…", subcommands as "client|setname").
func redisStats(ctx context.Context, rdb *redis.Client) (commands int64, cpuS float64, byCommand, usec map[string]int64, err error) {
	info, err := rdb.Info(ctx, "stats", "cpu", "commandstats").Result()
	if err != nil {
		return 0, 0, nil, nil, fmt.Errorf("INFO of the bench's Redis: %w", err)
	}
	found := 0
	byCommand, usec = map[string]int64{}, map[string]int64{}
	for line := range strings.SplitSeq(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "total_commands_processed":
			commands, err = strconv.ParseInt(v, 10, 64)
			found++
		case "used_cpu_user", "used_cpu_sys":
			var f float64
			f, err = strconv.ParseFloat(v, 64)
			cpuS += f
			found++
		default:
			if name, ok := strings.CutPrefix(k, "cmdstat_"); ok {
				calls, rest, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
				byCommand[name], err = strconv.ParseInt(calls, 10, 64)
				if u, ok := strings.CutPrefix(rest, "usec="); ok && err == nil {
					u, _, _ = strings.Cut(u, ",")
					usec[name], err = strconv.ParseInt(u, 10, 64)
				}
			}
		}
		if err != nil {
			return 0, 0, nil, nil, fmt.Errorf("INFO %s: %w", k, err)
		}
	}
	if found != 3 {
		return 0, 0, nil, nil, errors.New("INFO of the bench's Redis lacks total_commands_processed, used_cpu_user or used_cpu_sys")
	}
	return commands, cpuS, byCommand, usec, nil
}

// machineBusy is the CPU time every CPU of the machine has spent on
// anything but idling since boot (/proc/stat, in USER_HZ ticks of 10 ms).
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	busy := 0.0
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		x, _ := strconv.ParseFloat(v, 64)
		busy += x
	}
	return busy / 100
}

// peakRSS is a process's peak resident set size (VmHWM) in MiB.
func peakRSS(pid int) float64 {
	return kibToMiB(procField(fmt.Sprintf("/proc/%d/status", pid), "VmHWM:"))
}

// kibToMiB reads a /proc size ("1234 kB") as MiB; 0 when unreadable.
func kibToMiB(v string) float64 {
	kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 64)
	return round(kb / 1024)
}

// cpuSeconds is the user + system CPU time a live process has used so far,
// from its /proc/PID/stat (fields 14 and 15, in USER_HZ ticks, 100 on Linux).
func cpuSeconds(statPath string) float64 {
	b, err := os.ReadFile(statPath)
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

// exited reports whether a child process has ended (a zombie not yet
// waited for keeps its /proc entry, and its CPU times stop).
func exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	return !ok || strings.HasPrefix(rest, "Z") || strings.HasPrefix(rest, "X")
}

// procField is the value after the first line starting with key in a
// /proc file, trimmed; "" when there is none.
func procField(path, key string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return ""
}

type machineInfo struct {
	NProc     int     `json:"nproc"`
	CPUModel  string  `json:"cpu_model"`
	MemMiB    float64 `json:"mem_total_mib"`
	Kernel    string  `json:"kernel"`
	GoVersion string  `json:"go_version_of_bench"`
	LoadAvg1m float64 `json:"load_avg_1m_at_end"`
}

func machine() machineInfo {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return machineInfo{
		NProc:     runtime.NumCPU(),
		CPUModel:  procField("/proc/cpuinfo", "model name"),
		MemMiB:    kibToMiB(procField("/proc/meminfo", "MemTotal:")),
		Kernel:    strings.TrimSpace(string(kernel)),
		GoVersion: runtime.Version(),
		LoadAvg1m: loadAvg(),
	}
}

// loadAvg is the 1-minute load average: other work on the machine skews
// every figure, and this says how much there was.
func loadAvg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0 // unknown; JSON has no NaN
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// scrape reads the plain samples (no labels) of a consumer's /metrics, and
// the buckets of the reservation histogram (keyed by name and label).
func scrape(ctx context.Context, client *http.Client, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape a consumer's /metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s/metrics: %w", addr, err)
	}
	m := map[string]float64{}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") || strings.Contains(name, "{") && !strings.HasPrefix(name, reserveHistogram+"_bucket{") {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			m[name] = f
		}
	}
	return m, nil
}
