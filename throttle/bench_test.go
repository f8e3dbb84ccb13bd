package throttle

import (
	"context"
	"crypto/rand"
	"encoding/csv"
	"fmt"
	mrand "math/rand/v2"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/lua"
)

// BenchmarkReserve measures reservations per second through Throttle.Reserve
// with 10,000 sellers and 64 goroutines, then, against the same redis-server,
// the raw EVALSHA rate of the same script with redis-benchmark (64 clients,
// 10,000 sellers). The ratio says what the Go side costs on top of Redis.
//
//	go test -run '^$' -bench Reserve -benchtime 200000x ./throttle/
func BenchmarkReserve(b *testing.B) {
	const sellers, goroutines = 10_000, 64
	srv := startRedis(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: goroutines})
	b.Cleanup(func() { rdb.Close() })
	p := PerMinute(100)
	th, err := New(rdb, p)
	if err != nil {
		b.Fatal(err)
	}
	// a fresh set of sellers per run, so every run starts from empty logs
	prefix := "bench-" + rand.Text()[:6] + "-"
	names := make([]string, sellers)
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
	}
	ctx := context.Background()
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((goroutines + procs - 1) / procs)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		r := mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
		for pb.Next() {
			if _, err := th.Reserve(ctx, names[r.IntN(sellers)]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	goRate := float64(b.N) / elapsed.Seconds()

	raw, err := evalshaRate(ctx, rdb, srv.Port, max(b.N, 20_000), goroutines, sellers, th)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(goRate, "reservations/s")
	b.ReportMetric(raw, "raw-evalsha/s")
	b.ReportMetric(goRate/raw, "ratio")
}

// evalshaRate runs redis-benchmark with the reserve script: n EVALSHA calls
// from clients connections over a keyspace of sellers, and answers its
// requests per second.
func evalshaRate(ctx context.Context, rdb *redis.Client, port, n, clients, sellers int, th *Throttle) (float64, error) {
	p := th.Policy()
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		return 0, fmt.Errorf("redis-benchmark is not on PATH (Debian: redis-tools; `make deps` installs it): %w", err)
	}
	sha, err := rdb.ScriptLoad(ctx, lua.Script("slot_guard.lua")+lua.Script("fits.lua")+lua.Script("reserve.lua")).Result()
	if err != nil {
		return 0, fmt.Errorf("load reserve.lua: %w", err)
	}
	// Each __rand_int__ is drawn on its own: the two keys name different
	// sellers, which a single Redis does not mind, and the member is random.
	// The marker is one initialised hash slot's, as every seller has one.
	args := []string{"-p", strconv.Itoa(port), "-n", strconv.Itoa(n), "-c", strconv.Itoa(clients),
		"-r", strconv.Itoa(sellers), "--csv",
		"evalsha", sha, "3", "bulkreg:{s:rb-__rand_int__}:log", "bulkreg:{s:rb-__rand_int__}:block", NewMarkers().OfSlot(0),
		strconv.Itoa(p.Limit), strconv.FormatInt(p.span().Microseconds(), 10),
		strconv.FormatInt((2 * p.span()).Microseconds(), 10), "id-__rand_int__", strconv.FormatInt((p.Window + 2*p.Margin).Microseconds(), 10),
		strconv.FormatInt(th.Policy().reach().Microseconds(), 10)}
	out, err := exec.CommandContext(ctx, "redis-benchmark", args...).Output()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark %s: %w", strings.Join(args, " "), err)
	}
	// --csv: a header line, then "test","rps",...
	rows, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(rows) < 2 || len(rows[len(rows)-1]) < 2 {
		return 0, fmt.Errorf("redis-benchmark answered %q, want CSV with a rate", out)
	}
	rate, err := strconv.ParseFloat(rows[len(rows)-1][1], 64)
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark rate %q: %w", rows[len(rows)-1][1], err)
	}
	return rate, nil
}
