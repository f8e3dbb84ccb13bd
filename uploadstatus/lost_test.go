package uploadstatus

import (
	"context"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

// TestAStatusLostWithRedis: Redis restarts empty while an upload's rows are
// being registered. A consumer recording a row then neither fails nor loops:
// the row is kept and the status says plainly that part of it was lost (it
// does not pass for a one-row upload that is done). Sending the same file
// again restores it; rows recorded since keep their results, and a
// registration wins over a failure as always.
func TestAStatusLostWithRedis(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t)
	s := New(srv.Client(), time.Hour)
	if _, err := s.Create(ctx, newUpload("u-lost", 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRow(ctx, "u-lost", RowResult{Row: 2, State: Registered, ProductID: "P2"}); err != nil {
		t.Fatal(err)
	}
	srv.Restart() // empty: the upload's record and row 2's result are gone
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = s.RecordRow(ctx, "u-lost", RowResult{Row: 3, State: Failed, Reason: "bad price"}); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("recording a row after the loss: %v", err)
	}
	st, err := s.Get(ctx, "u-lost")
	if err != nil {
		t.Fatal(err)
	}
	if !st.PartlyLost() || st.LostAt.IsZero() || st.Failed != 1 || st.Registered != 0 || st.Done() || st.Succeeded() {
		t.Errorf("status after the loss = %+v; want partly lost, row 3 failed, neither done nor succeeded", st)
	}
	first := st.LostAt
	if err := s.RecordRow(ctx, "u-lost", RowResult{Row: 4, State: Registered, ProductID: "P4"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Get(ctx, "u-lost"); !st.LostAt.Equal(first) || st.Registered != 1 {
		t.Errorf("a second row after the loss: %+v, want the first loss time kept and one registered", st)
	}
	// The same file again: the record is back, rows recorded since keep their results.
	if prev, err := s.Create(ctx, newUpload("u-lost", 3)); err != nil || prev != nil {
		t.Fatalf("Create after the loss = %v, %v; want it created again", prev, err)
	}
	for _, r := range []RowResult{{Row: 2, State: Registered, ProductID: "P2"}, {Row: 3, State: Registered, ProductID: "P3"}} {
		if err := s.RecordRow(ctx, "u-lost", r); err != nil {
			t.Fatal(err)
		}
	}
	st, _ = s.Get(ctx, "u-lost")
	if st.PartlyLost() || st.Total != 3 || st.FileName != "a.xlsx" || st.Registered != 3 || st.Failed != 0 || !st.Succeeded() {
		t.Errorf("after the same file again: %+v; want the record back and rows 2, 3 (failed before, registered now) and 4 registered", st)
	}
}
