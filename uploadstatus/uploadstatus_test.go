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
	"github.com/bulkreg/bulkreg/internal/testwait"
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

// TestRecordRowHonoursItsContext: a row whose caller gave up before its
// call is not recorded, and RecordRow says why.
func TestRecordRowHonoursItsContext(t *testing.T) {
	ctx := context.Background()
	s := New(testredis.Start(t).Client(), time.Hour)
	if _, err := s.Create(ctx, newUpload("gone", 2)); err != nil {
		t.Fatal(err)
	}
	gone, giveUp := context.WithCancel(ctx)
	giveUp()
	if err := s.RecordRow(gone, "gone", RowResult{Row: 2, State: Registered}); !errors.Is(err, context.Canceled) {
		t.Fatalf("RecordRow after its caller gave up: %v, want context.Canceled", err)
	}
	if st, err := s.Get(ctx, "gone"); err != nil || st.Registered != 0 || len(st.Rows) != 0 {
		t.Errorf("after a row whose caller gave up: %+v, %v; want nothing recorded", st, err)
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
	testwait.For(t, 5*time.Second, "the upload gone after its 2 s retention", func() bool {
		_, err := s.Get(ctx, "r")
		return errors.Is(err, ErrNotFound)
	})
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
	testwait.For(t, 3*time.Second, "a publishing state 200 ms old taken over", func() bool {
		ok, _, err := s.BeginPublish(ctx, "stale", 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
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

// flushBeforeEvalSha empties Redis's script cache just before the first
// EVALSHA, as a restart between loading the script and using it would.
type flushBeforeEvalSha struct {
	rdb   *redis.Client
	armed bool // after the setup's own scripts
	done  bool
}

func (h *flushBeforeEvalSha) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *flushBeforeEvalSha) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.armed && !h.done && cmd.Name() == "evalsha" {
			h.done = true
			if err := h.rdb.ScriptFlush(ctx).Err(); err != nil {
				return err
			}
		}
		return next(ctx, cmd)
	}
}
func (h *flushBeforeEvalSha) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestRecordRowsAfterScriptCacheLoss(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t)
	rdb := srv.Client()
	hook := &flushBeforeEvalSha{rdb: srv.Client()}
	rdb.AddHook(hook)
	s := New(rdb, time.Hour)
	if _, err := s.Create(ctx, newUpload("f", 3)); err != nil {
		t.Fatal(err)
	}
	// The record script in Redis's cache, as after an earlier upload.
	if err := s.record.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	hook.armed = true
	rs := []RowResult{{Row: 2, State: Failed, Reason: "a"}, {Row: 3, State: Failed, Reason: "b"}}
	if err := s.RecordRows(ctx, "f", rs); err != nil {
		t.Fatalf("RecordRows after the script cache was flushed: %v", err)
	}
	if !hook.done {
		t.Fatal("the script cache was never flushed before the rows' script call")
	}
	if st, _ := s.Get(ctx, "f"); st.Failed != 2 || st.Waiting != 1 {
		t.Errorf("failed %d waiting %d, want 2 and 1", st.Failed, st.Waiting)
	}
}

// TestOtherContentIsCountedInTheMeta: the list of a seller's uploads reads
// each upload's meta only, so the failed rows whose SKU is registered
// already with other content are counted there as they come and go (a
// failure of another kind after, a redrive, a success), and Summaries and
// Get agree on them.
func TestOtherContentIsCountedInTheMeta(t *testing.T) {
	ctx := context.Background()
	s := New(testredis.Start(t).Client(), time.Hour)
	if _, err := s.Create(ctx, newUpload("oc", 4)); err != nil {
		t.Fatal(err)
	}
	other := func(row int) RowResult {
		return RowResult{Row: row, State: Failed, Code: OtherContent, Reason: "registered already with other content",
			Details: []Detail{{Code: OtherContent, Field: "seller_sku"}}}
	}
	check := func(step string, failed, want int) {
		t.Helper()
		sums, err := s.Summaries(ctx, []string{"oc"})
		if err != nil || len(sums) != 1 {
			t.Fatalf("%s: Summaries = %v, %v", step, sums, err)
		}
		st, err := s.Get(ctx, "oc")
		if err != nil {
			t.Fatal(err)
		}
		if sums[0].OtherContent != want || st.OtherContent != want || sums[0].Failed != failed {
			t.Errorf("%s: the list counts %d rows with other content (%d failed), the status %d; want %d (%d failed)",
				step, sums[0].OtherContent, sums[0].Failed, st.OtherContent, want, failed)
		}
	}
	steps := []struct {
		step         string
		r            RowResult
		failed, want int
	}{
		{"row 2 registered with other content", other(2), 1, 1},
		{"row 2 again, the same", other(2), 1, 1},
		{"row 3 refused for its price", RowResult{Row: 3, State: Failed, Code: "invalid_price", Details: []Detail{{Code: OtherContent}}}, 2, 1},
		{"row 3 then registered with other content", other(3), 2, 2},
		{"row 2 then refused for another reason", RowResult{Row: 2, State: Failed, Code: "invalid_name"}, 2, 1},
		{"row 4 registered with other content", other(4), 3, 2},
		{"row 4 registered after all", RowResult{Row: 4, State: Registered}, 2, 1},
		{"row 4 with other content after its success", other(4), 2, 1},
	}
	for _, st := range steps {
		if err := s.RecordRow(ctx, "oc", st.r); err != nil {
			t.Fatal(err)
		}
		check(st.step, st.failed, st.want)
	}
	q, err := s.Requeue(ctx, "oc", 3)
	if err != nil || !q.Moved {
		t.Fatalf("Requeue of row 3 = %+v, %v", q, err)
	}
	check("row 3 redriven", 1, 0)
	if err := s.Restore(ctx, "oc", q); err != nil {
		t.Fatal(err)
	}
	check("row 3's redrive undone", 2, 1)
}

// TestOneCallIsTheSameAsOneCallPerRow: upload_record.lua reads the rows'
// states at once and writes them at once; rows given in one call, the same
// row several times among them, must leave exactly what one call per row
// leaves: the counts, every row's state and its latest details.
func TestOneCallIsTheSameAsOneCallPerRow(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	s := New(rdb, time.Hour)
	rng := rand.New(rand.NewPCG(30, 0))
	results := func(row int) []RowResult {
		return []RowResult{
			{Row: row, State: Registered, ProductID: fmt.Sprintf("P-%d", row)},
			{Row: row, State: AlreadyRegistered, ProductID: fmt.Sprintf("P-%d", row)},
			{Row: row, State: Failed, Code: "invalid_price", Reason: "price"},
			{Row: row, State: Failed, Code: OtherContent, Reason: "other content", Details: []Detail{{Code: OtherContent}}},
			{Row: row, State: Failed, Code: "server_error", Reason: "503", Attempts: 2},
		}
	}
	for round := range 30 {
		one, each := fmt.Sprintf("one-%d", round), fmt.Sprintf("each-%d", round)
		var rs []RowResult
		for range 1 + rng.IntN(120) { // beyond maxRecordBatch: more than one call
			row := 2 + rng.IntN(12) // few rows, so rows repeat
			c := results(row)
			r := c[rng.IntN(len(c))]
			r.At = time.Date(2026, 11, 27, 9, 0, len(rs), 0, time.UTC)
			rs = append(rs, r)
		}
		for _, id := range []string{one, each} {
			if _, err := s.Create(ctx, newUpload(id, 12)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.RecordRows(ctx, one, rs); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if err := s.RecordRows(ctx, each, []RowResult{r}); err != nil {
				t.Fatal(err)
			}
		}
		for _, part := range []string{"meta", "states", "rows"} {
			got, err1 := rdb.HGetAll(ctx, key(one, part)).Result()
			want, err2 := rdb.HGetAll(ctx, key(each, part)).Result()
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if part == "meta" {
				for _, m := range []map[string]string{got, want} {
					delete(m, "id") // the upload's own fields differ
					delete(m, "created_at")
					delete(m, "state_at")
					for f, v := range m { // a count that came back to 0 may be absent in one call
						if v == "0" {
							delete(m, f)
						}
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("round %d, %d results: %s after one call\n%v\nafter one call per row\n%v", round, len(rs), part, got, want)
			}
		}
	}
}

// TestACallWritesEachHashOnce: the rows of a call are read in one command
// and written in one per hash, not one each (four commands per row would
// be most of what Redis does per registered row).
func TestACallWritesEachHashOnce(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	s := New(rdb, time.Hour)
	if _, err := s.Create(ctx, newUpload("once", 60)); err != nil {
		t.Fatal(err)
	}
	var rs []RowResult
	for row := 2; row < 62; row++ {
		rs = append(rs, RowResult{Row: row, State: Registered, ProductID: "P"})
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRows(ctx, "once", rs); err != nil {
		t.Fatal(err)
	}
	calls := testredis.CommandCalls(t, rdb)
	// Two HMGETs: the upload's presence (its id, or that it was lost) and
	// the rows' states; two HINCRBYs: the count that changed and what the
	// rows keep for the seller's share ("rows_bytes").
	if h, g, m, i, e := calls["hset"], calls["hget"], calls["hmget"], calls["hincrby"], calls["hexists"]; h > 2 || g > 0 || m > 2 || i > 2 || e > 0 {
		t.Errorf("recording 60 rows ran %d HSET, %d HGET, %d HMGET, %d HINCRBY, %d HEXISTS; want at most 2, 0, 2, 2, 0", h, g, m, i, e)
	}
	st, err := s.Get(ctx, "once")
	if err != nil || st.Registered != 60 {
		t.Errorf("after the call: %d registered, %v; want 60", st.Registered, err)
	}
}
