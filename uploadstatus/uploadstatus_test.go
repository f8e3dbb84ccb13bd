package uploadstatus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

func newUpload(id string, total int) Upload {
	cells := map[int][]string{}
	for r := 2; r < 2+total; r++ {
		cells[r] = []string{fmt.Sprintf("SKU-%d", r), "=cmd", "한글"}
	}
	return Upload{ID: id, SellerID: "seller-1", FileName: "a.xlsx", SHA256: "abc", Total: total, Valid: total, Header: []string{"seller_sku", "name", "brand"},
		CreatedAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), Cells: cells}
}

func TestCreateThenDuplicate(t *testing.T) {
	ctx := context.Background()
	s := New(testredis.Start(t).Client(), time.Hour)
	u := newUpload("u1", 3)
	prev, err := s.Create(ctx, u)
	if err != nil || prev != nil {
		t.Fatalf("first Create = %v, %v; want nil, nil", prev, err)
	}
	u2 := u
	u2.FileName = "renamed.xlsx"
	prev, err = s.Create(ctx, u2)
	if err != nil || prev == nil {
		t.Fatalf("second Create = %v, %v; want the existing upload", prev, err)
	}
	if prev.FileName != "a.xlsx" || prev.State != Publishing || prev.Total != 3 || len(prev.Header) != 3 || !prev.CreatedAt.Equal(u.CreatedAt) {
		t.Errorf("existing upload %+v does not match the first", prev)
	}
	st, err := s.Get(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if st.FileName != "a.xlsx" || st.Waiting != 3 || st.Registered != 0 || st.Done() {
		t.Errorf("status %+v: want the first file name, 3 waiting, not done", st)
	}
	cells, err := s.Cells(ctx, "u1")
	if err != nil || len(cells) != 3 || cells[3][0] != "SKU-3" || cells[4][2] != "한글" {
		t.Errorf("Cells = %v, %v", cells, err)
	}
}

func TestGetUnknown(t *testing.T) {
	s := New(testredis.Start(t).Client(), time.Hour)
	if _, err := s.Get(context.Background(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of an unknown upload: err = %v, want ErrNotFound", err)
	}
}

func TestRecordRowRules(t *testing.T) {
	ctx := context.Background()
	s := New(testredis.Start(t).Client(), time.Hour)
	if _, err := s.Create(ctx, newUpload("u", 4)); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		r                        RowResult
		registered, failed, rows int
		wantState, wantProduct   string
	}{
		{RowResult{Row: 2, State: Failed, Reason: "429 many"}, 0, 1, 1, Failed, ""},
		{RowResult{Row: 2, State: Failed, Reason: "again"}, 0, 1, 1, Failed, ""},           // same row twice: counted once
		{RowResult{Row: 2, State: Registered, ProductID: "P2"}, 1, 0, 1, Registered, "P2"}, // registered wins over failed
		{RowResult{Row: 2, State: Failed, Reason: "late"}, 1, 0, 1, Registered, "P2"},      // and over a later failed
		{RowResult{Row: 2, State: Registered, ProductID: "P2b"}, 1, 0, 1, Registered, "P2"},
		{RowResult{Row: 3, State: Registered, ProductID: "P3"}, 2, 0, 2, Registered, "P3"},
		{RowResult{Row: 4, State: Failed, Code: "invalid", Field: "price", Reason: "bad price"}, 2, 1, 3, Failed, ""},
	}
	for i, step := range steps {
		if err := s.RecordRow(ctx, "u", step.r); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		st, err := s.Get(ctx, "u")
		if err != nil {
			t.Fatal(err)
		}
		if st.Registered != step.registered || st.Failed != step.failed || len(st.Rows) != step.rows || st.Waiting != 4-step.registered-step.failed {
			t.Errorf("step %d: registered %d failed %d waiting %d rows %d; want %d %d %d %d", i, st.Registered, st.Failed, st.Waiting, len(st.Rows), step.registered, step.failed, 4-step.registered-step.failed, step.rows)
		}
		for _, r := range st.Rows {
			if r.Row == step.r.Row && (r.State != step.wantState || r.ProductID != step.wantProduct) {
				t.Errorf("step %d: row %d is %s %q, want %s %q", i, r.Row, r.State, r.ProductID, step.wantState, step.wantProduct)
			}
		}
	}
	for _, bad := range []RowResult{{Row: 0, State: Failed}, {Row: 2, State: "done"}} {
		if err := s.RecordRow(ctx, "u", bad); err == nil {
			t.Errorf("RecordRow(%+v) accepted", bad)
		}
	}
}

// TestAlreadyRegistered: the new outcome is counted on its own, is final
// like "registered", and counts towards Done and Succeeded.
func TestAlreadyRegistered(t *testing.T) {
	ctx := context.Background()
	s := New(testredis.Start(t).Client(), time.Hour)
	if _, err := s.Create(ctx, newUpload("u", 4)); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		r                         RowResult
		registered, already, fail int
		wantState, wantProduct    string
	}{
		{RowResult{Row: 2, State: AlreadyRegistered, ProductID: "P1", Reason: "already registered as P1"}, 0, 1, 0, AlreadyRegistered, "P1"},
		{RowResult{Row: 2, State: Failed, Reason: "late"}, 0, 1, 0, AlreadyRegistered, "P1"},             // final over a later failed
		{RowResult{Row: 2, State: Registered, ProductID: "P9"}, 0, 1, 0, AlreadyRegistered, "P1"},        // and over a later registered
		{RowResult{Row: 2, State: AlreadyRegistered, ProductID: "P8"}, 0, 1, 0, AlreadyRegistered, "P1"}, // the first details stay
		{RowResult{Row: 3, State: Registered, ProductID: "P3"}, 1, 1, 0, Registered, "P3"},
		{RowResult{Row: 3, State: AlreadyRegistered, ProductID: "P3"}, 1, 1, 0, Registered, "P3"}, // registered is final too
		{RowResult{Row: 4, State: Failed, Reason: "bad"}, 1, 1, 1, Failed, ""},
		{RowResult{Row: 4, State: AlreadyRegistered, ProductID: "P4"}, 1, 2, 0, AlreadyRegistered, "P4"}, // wins over an earlier failed
	}
	for i, step := range steps {
		if err := s.RecordRow(ctx, "u", step.r); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		st, err := s.Get(ctx, "u")
		if err != nil {
			t.Fatal(err)
		}
		if st.Registered != step.registered || st.AlreadyRegistered != step.already || st.Failed != step.fail ||
			st.Waiting != 4-step.registered-step.already-step.fail {
			t.Errorf("step %d: registered %d, already %d, failed %d, waiting %d; want %d %d %d", i, st.Registered, st.AlreadyRegistered, st.Failed, st.Waiting,
				step.registered, step.already, step.fail)
		}
		for _, r := range st.Rows {
			if r.Row == step.r.Row && (r.State != step.wantState || r.ProductID != step.wantProduct) {
				t.Errorf("step %d: row %d is %s %q, want %s %q", i, r.Row, r.State, r.ProductID, step.wantState, step.wantProduct)
			}
		}
	}
	if err := s.RecordRow(ctx, "u", RowResult{Row: 5, State: AlreadyRegistered, ProductID: "P5"}); err != nil {
		t.Fatal(err)
	}
	st, _ := s.Get(ctx, "u")
	if !st.Done() || !st.Succeeded() || st.Waiting != 0 {
		t.Errorf("every row registered or already registered: done %v, succeeded %v, waiting %d; want done and succeeded", st.Done(), st.Succeeded(), st.Waiting)
	}
}

func TestRecordWithoutCreate(t *testing.T) {
	ctx := context.Background()
	s := New(testredis.Start(t).Client(), time.Hour)
	if err := s.RecordRow(ctx, "loose", RowResult{Row: 5, State: Registered}); err != nil {
		t.Fatal(err)
	}
	st, err := s.Get(ctx, "loose")
	if err != nil || st.Registered != 1 || st.ID != "loose" {
		t.Fatalf("Get = %+v, %v", st, err)
	}
	// The row recorded first does not make a later Create look like a duplicate.
	if prev, err := s.Create(ctx, newUpload("loose", 3)); err != nil || prev != nil {
		t.Errorf("Create after a recorded row = %v, %v; want a new upload", prev, err)
	}
	if st, _ := s.Get(ctx, "loose"); st.Registered != 1 || st.Waiting != 2 {
		t.Errorf("after Create: %+v", st)
	}
}

func TestRetention(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	s := New(rdb, 2*time.Second)
	if _, err := s.Create(ctx, newUpload("r", 2)); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRow(ctx, "r", RowResult{Row: 2, State: Registered}); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"meta", "states", "rows", "cells"} {
		ttl := rdb.PTTL(ctx, key("r", part)).Val()
		if ttl <= 0 || ttl > 2*time.Second {
			t.Errorf("%s: TTL %v, want within (0, 2s]", key("r", part), ttl)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := s.Get(ctx, "r")
		if errors.Is(err, ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("upload still there 5s after a 2s retention: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := rdb.Exists(ctx, key("r", "states"), key("r", "rows"), key("r", "cells")).Val(); n != 0 {
		t.Errorf("%d keys of the expired upload remain", n)
	}
}

func TestPublishStates(t *testing.T) {
	ctx := context.Background()
	s := New(testredis.Start(t).Client(), time.Hour)
	if _, _, err := s.BeginPublish(ctx, "none", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("BeginPublish of an unknown upload: %v", err)
	}
	if _, err := s.Create(ctx, newUpload("p", 1)); err != nil {
		t.Fatal(err)
	}
	// Still publishing (a producer at work): nobody else may start.
	if ok, found, err := s.BeginPublish(ctx, "p", time.Hour); ok || found != Publishing || err != nil {
		t.Errorf("BeginPublish while publishing = %v %q %v", ok, found, err)
	}
	if err := s.SetState(ctx, "p", PublishFailed, "broker down"); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Get(ctx, "p"); st.State != PublishFailed || st.StateReason != "broker down" {
		t.Errorf("state %q %q", st.State, st.StateReason)
	}
	// Two retries at once: exactly one wins.
	var wins int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ok, _, err := s.BeginPublish(ctx, "p", 0)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d concurrent BeginPublish won, want 1", wins)
	}
	if err := s.SetState(ctx, "p", Published, ""); err != nil {
		t.Fatal(err)
	}
	if ok, found, _ := s.BeginPublish(ctx, "p", 0); ok || found != Published {
		t.Errorf("BeginPublish of a published upload = %v %q", ok, found)
	}
	// A publishing state left by a producer that died is taken over once stale.
	if _, err := s.Create(ctx, newUpload("stale", 1)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		ok, _, err := s.BeginPublish(ctx, "stale", 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a publishing state 200ms old was never taken over")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := s.SetState(ctx, "p", "bogus", ""); err == nil {
		t.Error("SetState accepted an unknown state")
	}
}

// concurrentRecorders has many goroutines record every row of one upload
// several times in random order with mixed outcomes, as redelivering
// consumers would; the counts must equal the distinct rows, with a row
// counted registered whenever any recorder registered it.
func concurrentRecorders(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	s := New(rdb, time.Hour)
	const rows, workers, rounds = 200, 8, 3
	if _, err := s.Create(ctx, newUpload("c", rows)); err != nil {
		t.Fatal(err)
	}
	registeredBy := func(row int) bool { return row%3 != 0 } // rows ≡ 0 mod 3 only ever fail
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			for range rounds {
				for _, i := range rnd.Perm(rows) {
					row := i + 2
					state := Failed
					if registeredBy(row) && rnd.IntN(2) == 0 {
						state = Registered
					}
					if err := s.RecordRow(ctx, "c", RowResult{Row: row, State: state, ProductID: "P"}); err != nil {
						t.Error(err)
						return
					}
				}
			}
			// every worker registers its rows at least once at the end
			for row := 2; row < 2+rows; row++ {
				if registeredBy(row) && row%workers == w {
					if err := s.RecordRow(ctx, "c", RowResult{Row: row, State: Registered}); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	st, err := s.Get(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	wantReg := 0
	for row := 2; row < 2+rows; row++ {
		if registeredBy(row) {
			wantReg++
		}
	}
	if st.Registered != wantReg || st.Failed != rows-wantReg || st.Waiting != 0 || len(st.Rows) != rows || !st.Done() {
		t.Errorf("registered %d failed %d waiting %d rows %d; want %d %d 0 %d", st.Registered, st.Failed, st.Waiting, len(st.Rows), wantReg, rows-wantReg, rows)
	}
	for _, r := range st.Rows {
		if want := registeredBy(r.Row); (r.State == Registered) != want {
			t.Errorf("row %d is %s", r.Row, r.State)
		}
	}
}

func TestConcurrentRecorders(t *testing.T) {
	concurrentRecorders(t, testredis.Start(t).Client())
}

func TestConcurrentRecordersCluster(t *testing.T) {
	c := testredis.StartCluster(t, 3)
	rdb := c.Client()
	concurrentRecorders(t, rdb)
	// RecordRows pipelines through the cluster client too.
	s := New(rdb, time.Hour)
	ctx := context.Background()
	if _, err := s.Create(ctx, newUpload("batch", 300)); err != nil {
		t.Fatal(err)
	}
	var rs []RowResult
	for row := 2; row < 302; row++ {
		rs = append(rs, RowResult{Row: row, State: Failed, Reason: "bad"})
	}
	if err := s.RecordRows(ctx, "batch", rs); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRows(ctx, "batch", rs); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Get(ctx, "batch"); err != nil || st.Failed != 300 || st.Waiting != 0 {
		t.Errorf("after RecordRows twice: %+v %v", st, err)
	}
}

func TestRedisDown(t *testing.T) {
	srv := testredis.Start(t)
	s := New(srv.Client(), time.Hour)
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := s.RecordRow(ctx, "x", RowResult{Row: 2, State: Registered}); err == nil {
		t.Error("RecordRow with Redis down returned no error")
	}
	if _, err := s.Get(ctx, "x"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Get with Redis down: %v, want an error that is not ErrNotFound", err)
	}
}

// flushBeforePipeline empties Redis's script cache just before the first
// pipeline, as a restart between loading the script and using it would.
type flushBeforePipeline struct {
	rdb  *redis.Client
	done bool
}

func (h *flushBeforePipeline) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *flushBeforePipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *flushBeforePipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		// The connection's own setup is a pipeline too: wait for the rows'.
		if !h.done && len(cmds) > 0 && cmds[0].Name() == "evalsha" {
			h.done = true
			if err := h.rdb.ScriptFlush(ctx).Err(); err != nil {
				return err
			}
		}
		return next(ctx, cmds)
	}
}

func TestRecordRowsAfterScriptCacheLoss(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t)
	rdb := srv.Client()
	hook := &flushBeforePipeline{rdb: srv.Client()}
	rdb.AddHook(hook)
	s := New(rdb, time.Hour)
	if _, err := s.Create(ctx, newUpload("f", 3)); err != nil {
		t.Fatal(err)
	}
	rs := []RowResult{{Row: 2, State: Failed, Reason: "a"}, {Row: 3, State: Failed, Reason: "b"}}
	if err := s.RecordRows(ctx, "f", rs); err != nil {
		t.Fatalf("RecordRows after the script cache was flushed: %v", err)
	}
	if !hook.done {
		t.Fatal("the script cache was never flushed before the rows' pipeline")
	}
	if st, _ := s.Get(ctx, "f"); st.Failed != 2 || st.Waiting != 1 {
		t.Errorf("failed %d waiting %d, want 2 and 1", st.Failed, st.Waiting)
	}
}
