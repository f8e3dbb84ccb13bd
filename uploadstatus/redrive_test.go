package uploadstatus

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

func TestRequeue(t *testing.T) {
	ctx := context.Background()
	s := New(testredis.Start(t).Client(), time.Hour)
	if _, err := s.Create(ctx, newUpload("u1", 3)); err != nil {
		t.Fatal(err)
	}
	failed := RowResult{Row: 2, State: Failed, Code: "transient", Reason: "the registration API answered 503", Attempts: 8}
	for _, r := range []RowResult{failed, {Row: 3, State: Registered, ProductID: "p-1"}} {
		if err := s.RecordRow(ctx, "u1", r); err != nil {
			t.Fatal(err)
		}
	}
	counts := func() (reg, fail, wait int) {
		t.Helper()
		st, err := s.Get(ctx, "u1")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range st.Rows {
			if r.Row == 2 && r.State != Failed {
				t.Errorf("row 2 is listed as %s while waiting", r.State)
			}
		}
		return st.Registered, st.Failed, st.Waiting
	}
	if reg, fail, wait := counts(); reg != 1 || fail != 1 || wait != 1 {
		t.Fatalf("before: %d registered, %d failed, %d waiting; want 1, 1, 1", reg, fail, wait)
	}

	q, err := s.Requeue(ctx, "u1", 2)
	if err != nil || !q.Moved || q.State != Failed || q.Previous == nil || q.Previous.Reason != failed.Reason {
		t.Fatalf("Requeue of the failed row = %+v, %v; want moved with its previous result", q, err)
	}
	if reg, fail, wait := counts(); reg != 1 || fail != 0 || wait != 2 {
		t.Errorf("after Requeue: %d registered, %d failed, %d waiting; want 1, 0, 2", reg, fail, wait)
	}
	if st, err := s.RowState(ctx, "u1", 2); err != nil || st != "" {
		t.Errorf("RowState of the requeued row = %q, %v; want waiting (\"\")", st, err)
	}

	// The same row again (a second redrive), a registered row, a waiting row: nothing moves.
	for _, tc := range []struct {
		row  int
		want string
	}{{2, ""}, {3, Registered}, {1, ""}} {
		q, err := s.Requeue(ctx, "u1", tc.row)
		if err != nil || q.Moved || q.State != tc.want {
			t.Errorf("Requeue of row %d = %+v, %v; want not moved, state %q", tc.row, q, err, tc.want)
		}
	}
	if reg, fail, wait := counts(); reg != 1 || fail != 0 || wait != 2 {
		t.Errorf("after the other Requeues: %d registered, %d failed, %d waiting; want 1, 0, 2", reg, fail, wait)
	}

	// Publishing failed: the row is failed again, counted once.
	if err := s.Restore(ctx, "u1", q); err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(ctx, "u1", Requeued{}); err != nil {
		t.Fatal(err)
	}
	q2, _ := s.Requeue(ctx, "u1", 2)
	if err := s.Restore(ctx, "u1", q2); err != nil {
		t.Fatal(err)
	}
	if reg, fail, wait := counts(); reg != 1 || fail != 1 || wait != 1 {
		t.Errorf("after Restore: %d registered, %d failed, %d waiting; want 1, 1, 1", reg, fail, wait)
	}

	if _, err := s.Requeue(ctx, "nope", 2); !errors.Is(err, ErrNotFound) {
		t.Errorf("Requeue of an unknown upload: %v, want ErrNotFound", err)
	}
	if _, err := s.RowState(ctx, "nope", 2); !errors.Is(err, ErrNotFound) {
		t.Errorf("RowState of an unknown upload: %v, want ErrNotFound", err)
	}
	if _, err := s.Requeue(ctx, "u1", 0); err == nil {
		t.Error("Requeue of row 0: no error")
	}
}

// Two redrives racing over the same dead letter: one moves it.
func TestRequeueConcurrent(t *testing.T) {
	ctx := context.Background()
	s := New(testredis.Start(t).Client(), time.Hour)
	if _, err := s.Create(ctx, newUpload("u2", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRow(ctx, "u2", RowResult{Row: 2, State: Failed}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	moved := 0
	for range 16 {
		wg.Go(func() {
			q, err := s.Requeue(ctx, "u2", 2)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			if q.Moved {
				moved++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	st, err := s.Get(ctx, "u2")
	if err != nil {
		t.Fatal(err)
	}
	if moved != 1 || st.Failed != 0 || st.Waiting != 1 {
		t.Errorf("16 concurrent Requeues: %d moved, failed %d, waiting %d; want 1, 0, 1", moved, st.Failed, st.Waiting)
	}
}
