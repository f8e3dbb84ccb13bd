package throttle

import (
	"context"
	"strconv"
	"testing"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

// BenchmarkReserveNPastTheLimit is Redis's own CPU per slot for a batch of a
// seller whose log already holds its limit: the steady state of an upload
// larger than one window, where every slot goes after the L-th latest count
// from the end of the log and the room check runs (a log under its limit,
// as in consumer's BenchmarkABatchsRedisWork, takes neither). Each round is
// a new seller whose first window is booked before the timer, so the log
// holds what it holds in the bench: its limit and the batch.
//
//	go test -run '^$' -bench ReserveNPastTheLimit -benchtime 1000x ./throttle/
func BenchmarkReserveNPastTheLimit(b *testing.B) {
	for _, n := range []int{10, 50, 100} {
		b.Run("batch="+strconv.Itoa(n), func(b *testing.B) {
			rdb := startRedis(b).Client()
			b.Cleanup(func() { rdb.Close() })
			p := PerMinute(100)
			th, err := New(rdb, p)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			sellers, first := make([]string, b.N), make([]Reservation, b.N)
			for i := range sellers {
				sellers[i] = "full-" + strconv.Itoa(i)
				rs, err := th.ReserveN(ctx, sellers[i], p.Limit)
				if err != nil {
					b.Fatal(err)
				}
				first[i] = rs[0]
			}
			cpu := testredis.CPU(b, rdb)
			b.ResetTimer()
			for i := range b.N {
				rs, err := th.ReserveN(ctx, sellers[i], n)
				if err != nil {
					b.Fatal(err)
				}
				if !rs[n-1].Admitted || rs[0].At.Sub(first[i].At) <= p.Window+p.Margin {
					b.Fatalf("a batch past the limit: slots %s to %s (admitted %t), want them all more than %s after the first window's %s",
						rs[0].At, rs[n-1].At, rs[n-1].Admitted, p.Window+p.Margin, first[i].At)
				}
			}
			b.StopTimer()
			b.ReportMetric((testredis.CPU(b, rdb)-cpu)/float64(b.N*n), "redis-cpu-µs/slot")
		})
	}
}
