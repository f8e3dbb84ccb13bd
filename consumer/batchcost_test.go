package consumer

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// BenchmarkABatchsRedisWork is the Redis side of one runner batch of 100
// registered rows against a real redis-server, step by step as the runner
// asks it (claim and reserve, check, write the calls with their settles and
// marks, write the rows' results), with the consumer's heap allocations
// per row: a count, so unlike the bench's CPU figures it does not move with
// the machine's load; and Redis's own CPU per row (INFO cpu). The rows' own data (SKUs, keys) is made before the
// timer; what is counted is what the stores and the Redis client allocate.
//
//	go test -run '^$' -bench ABatchsRedisWork -benchtime 200x ./consumer/
func BenchmarkABatchsRedisWork(b *testing.B) {
	const n = 100
	rdb := testredis.Start(b).Client()
	b.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	th, err := throttle.New(rdb, throttle.Policy{Limit: 1 << 20, Window: time.Minute, Margin: 100 * time.Millisecond, CallTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ld := ledger.New(rdb, ledger.Options{})
	rec := compliance.NewRecorder(rdb, time.Hour)
	st := uploadstatus.New(rdb, time.Hour)

	type batch struct {
		claims []ledger.ClaimRequest
		got    []ledger.ClaimResult
		rs     []throttle.Reservation
		calls  []compliance.Call
		marks  []ledger.MarkResult
		rows   []uploadstatus.RowResult
	}
	// newBatch is a batch's rows: new SKUs and keys each round, so every
	// claim is a first claim and every mark a first registration.
	round := 0
	newBatch := func() *batch {
		round++
		bt := &batch{claims: make([]ledger.ClaimRequest, n), got: make([]ledger.ClaimResult, n), calls: make([]compliance.Call, n),
			marks: make([]ledger.MarkResult, n), rows: make([]uploadstatus.RowResult, n)}
		for i := range n {
			id := strconv.Itoa(round*n + i)
			bt.claims[i] = ledger.ClaimRequest{SKU: "sku-" + id, Row: "key-" + id, Hash: "hash", From: "rows/0/" + id}
			bt.calls[i] = compliance.Call{Status: 201, Class: "registered", Key: bt.claims[i].Row}
			bt.rows[i] = uploadstatus.RowResult{Row: i + 1, State: uploadstatus.Registered, ProductID: "p-" + id, Attempts: 1}
		}
		return bt
	}
	steps := []struct {
		name string
		run  func(bt *batch) error
	}{
		{"claim-reserve", func(bt *batch) (err error) {
			var before []scriptbatch.Step
			if s, ok := ld.ClaimStep("s", bt.claims, bt.got); ok {
				before = append(before, s)
			}
			bt.rs, err = th.ReserveN(ctx, "s", n, before...)
			return err
		}},
		{"check", func(bt *batch) error {
			_, err := th.CheckN(ctx, "s", bt.rs)
			return err
		}},
		{"write-calls", func(bt *batch) error {
			now := time.Now()
			settles := make([]throttle.Settled, len(bt.calls))
			marks := make([]ledger.MarkRequest, len(bt.calls))
			for i := range bt.calls {
				bt.calls[i].At = bt.rs[i].At
				settles[i] = throttle.Settled{Res: bt.rs[i], Answer: now}
				c := bt.claims[i]
				marks[i] = ledger.MarkRequest{SKU: c.SKU, Row: c.Row, Hash: c.Hash, ProductID: bt.rows[i].ProductID}
			}
			after := th.SettleStep("s", settles)
			if s, ok := ld.MarkStep("s", marks, bt.marks); ok {
				after = append(after, s)
			}
			return rec.RecordAll(ctx, "s", bt.calls, after...)
		}},
		{"write-rows", func(bt *batch) error {
			return st.RecordRows(ctx, "u-"+strconv.Itoa(round), bt.rows)
		}},
	}
	for k, step := range steps {
		b.Run(step.name, func(b *testing.B) {
			bts := make([]*batch, b.N)
			for i := range bts {
				bt := newBatch()
				for _, before := range steps[:k] { // what the runner did with the batch first
					if err := before.run(bt); err != nil {
						b.Fatal(err)
					}
				}
				bts[i] = bt
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			cpu := testredis.CPU(b, rdb)
			b.ResetTimer()
			for i := range b.N {
				if err := step.run(bts[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			cpu = testredis.CPU(b, rdb) - cpu
			rows := float64(b.N * n)
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/rows, "allocs/row")
			b.ReportMetric(b.Elapsed().Seconds()*1e6/rows, "µs/row")
			b.ReportMetric(cpu/rows, "redis-cpu-µs/row")
		})
	}
}
