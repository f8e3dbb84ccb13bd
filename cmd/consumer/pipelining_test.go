package main

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/consumer"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/throttle"
)

func TestRedisPipeliningSetting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     string
		args    []string
		want    string
		wantErr string
	}{
		{name: "autopipe by default", want: pipeAutopipe},
		{name: "from the environment", env: "goredis", want: pipeGoRedis},
		{name: "the flag wins", env: "goredis", args: []string{"--redis-pipelining", "none"}, want: pipeNone},
		{name: "an unknown value", args: []string{"--redis-pipelining", "fast"}, wantErr: `--redis-pipelining (BULKREG_REDIS_PIPELINING) is "fast": choose autopipe, goredis, goredis-2x64 or none`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "BULKREG_REDIS_PIPELINING" {
					return tc.env
				}
				return ""
			}
			s, err := parse(tc.args, getenv, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || s.redisPipelining != tc.want {
				t.Fatalf("--redis-pipelining %q, %v; want %q", s.redisPipelining, err, tc.want)
			}
		})
	}
}

// Every mode gives each caller its own answer; the two pipeliners carry
// the commands of 100 concurrent callers in fewer round trips, and none
// sends each in a round trip of its own.
func TestRedisPipeliningModes(t *testing.T) {
	ctx := context.Background()
	rs := testredis.Start(t)
	script := redis.NewScript(`return ARGV[1]`)
	for _, mode := range []string{pipeAutopipe, pipeGoRedis, pipeGoRedisShaped, pipeNone} {
		t.Run(mode, func(t *testing.T) {
			_, rdb, n := pipelinedCounted(ctx, t, rs.Addr, mode)
			if err := script.Load(ctx, rdb).Err(); err != nil {
				t.Fatal(err)
			}
			n.mark()
			const callers, each = 100, 5
			start := make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan string, callers*each)
			for c := range callers {
				wg.Go(func() {
					<-start
					for i := range each {
						want := strconv.Itoa(c*each + i)
						if got, err := script.Run(ctx, rdb, nil, want).Text(); err != nil || got != want {
							errs <- "caller " + strconv.Itoa(c) + ": got " + got + ", want " + want
						}
					}
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
			cmds := testutil.ToFloat64(n.commands) - n.c0
			trips := testutil.ToFloat64(n.roundTrips) - n.r0
			// New connections' set-up (HELLO, CLIENT SETINFO) is counted too.
			if cmds < callers*each {
				t.Errorf("%v commands counted, want at least %d (an EVALSHA each)", cmds, callers*each)
			}
			if mode == pipeNone && trips < callers*each || mode != pipeNone && trips > callers*each/2 {
				t.Errorf("%s: %d scripts in %v round trips", mode, callers*each, trips)
			}
			t.Logf("%s: %v commands in %v round trips", mode, cmds, trips)
		})
	}
}

// pipelinedCounted is a client of the Redis at addr in the pipelining mode,
// warmed up, with the commands and round trips of the connection under it
// (direct, to look at the server past the pipeline) counted from here.
func pipelinedCounted(ctx context.Context, t *testing.T, addr, mode string) (direct *redis.Client, rdb redis.UniversalClient, n *counted) {
	t.Helper()
	direct = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = direct.Close() })
	rdb, closePipe, err := pipelined(direct, mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closePipe)
	n = newCounted()
	countRedis(direct, n.commands, n.roundTrips)
	warmUp(ctx, t, rdb)
	return direct, rdb, n
}

// The consumer's throttle times every reservation of a batch's slots, and
// is still the consumer's Throttle.
func TestTimedThrottle(t *testing.T) {
	ctx := context.Background()
	rs := testredis.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	if _, err := throttle.Initialize(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	th, err := throttle.New(rdb, throttle.Policy{Limit: 10, Window: 3e9, Margin: 1e8})
	if err != nil {
		t.Fatal(err)
	}
	h := newReserveHistogram()
	tt := timedThrottle{Throttle: th, reserve: h}
	for range 3 {
		if rs, err := tt.ReserveN(ctx, "s1", 2); err != nil || len(rs) != 2 || !rs[0].Admitted {
			t.Fatalf("reserve: %+v, %v", rs, err)
		}
	}
	if _, err := tt.ReserveN(ctx, "", 1); err == nil {
		t.Fatal("an empty seller was reserved for")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(h)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "bulkreg_consumer_reserve_seconds" {
		t.Fatalf("gathered %v, %v", mfs, err)
	}
	if got := mfs[0].GetMetric()[0].GetHistogram().GetSampleCount(); got != 4 {
		t.Errorf("%d reservations timed, want 4 (the refused one too)", got)
	}
	var _ consumer.Throttle = tt // the consumer takes it as its throttle
}

// A row whose context ends (a rebalance, a shutdown) while its command waits
// for a pipeline: autopipe hands the caller its context's error at once and
// never sends the command; go-redis's AutoPipeliner (v9.23, as documented:
// "a per-command deadline or cancellation is not honored once queued")
// keeps the caller until the pipeline on the wire is answered and then runs
// the command anyway. Every pipeline the mode may have on the wire (two for
// autopipe, one for go-redis's defaults) is held by a DEBUG SLEEP first, so
// the command queues in either.
func TestAQueuedCallerWhoseContextEnds(t *testing.T) {
	rs := testredis.Start(t, "--enable-debug-command", "yes")
	const sleep, deadline = 700 * time.Millisecond, 50 * time.Millisecond
	for _, tc := range []struct {
		mode        string
		inFlight    int  // pipelines the mode sends at once
		wantHonored bool // the caller gets its context's error in time, the command is not run
	}{
		{pipeAutopipe, 2, true},
		{pipeGoRedis, 1, false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			ctx := context.Background()
			direct, rdb, n := pipelinedCounted(ctx, t, rs.Addr, tc.mode)
			key := "late-" + tc.mode
			n.mark()
			held := make(chan error, tc.inFlight)
			for i := range tc.inFlight {
				go func() { held <- rdb.Process(ctx, redis.NewCmd(ctx, "debug", "sleep", sleep.Seconds())) }()
				// Counted as it is handed to the connection.
				testwait.For(t, 5*time.Second, "hold "+strconv.Itoa(i+1)+" on the wire", func() bool {
					return testutil.ToFloat64(n.roundTrips)-n.r0 > float64(i)
				})
			}
			cctx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			start := time.Now()
			err := rdb.Set(cctx, key, "1", 0).Err()
			took := time.Since(start)
			for range tc.inFlight {
				if err := <-held; err != nil {
					t.Fatal(err)
				}
			}
			ran := direct.Exists(ctx, key).Val() == 1
			t.Logf("%s: the caller returned after %s with %v; the command ran: %v", tc.mode, took.Round(time.Millisecond), err, ran)
			honored := errors.Is(err, context.DeadlineExceeded) && took < sleep/2 && !ran
			if honored != tc.wantHonored {
				t.Errorf("%s: context honored %v, want %v", tc.mode, honored, tc.wantHonored)
			}
		})
	}
}
