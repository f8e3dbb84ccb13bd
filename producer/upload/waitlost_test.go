package upload

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/uploadstatus"
)

// statusSeq answers Get with its readings in turn, the last one from then on.
type statusSeq []func() (uploadstatus.Status, error)

func (q *statusSeq) Get(ctx context.Context, id string) (uploadstatus.Status, error) {
	f := (*q)[0]
	if len(*q) > 1 {
		*q = (*q)[1:]
	}
	return f()
}

// TestWaitEndsWhenTheStatusIsLost: `upload --wait` and `status
// --wait` poll until every row is done; when Redis lost the upload's record
// the row count is gone and that moment never comes. The wait ends at once
// with an error saying so, instead of polling until it is killed.
func TestWaitEndsWhenTheStatusIsLost(t *testing.T) {
	running := uploadstatus.Status{Upload: uploadstatus.Upload{ID: "u", Total: 3}, Registered: 1, Waiting: 2}
	lost := uploadstatus.Status{Upload: uploadstatus.Upload{ID: "u"}, Registered: 1, LostAt: time.Now()}
	for _, tc := range []struct {
		name string
		seq  statusSeq
	}{
		{"partly lost", statusSeq{func() (uploadstatus.Status, error) { return running, nil }, func() (uploadstatus.Status, error) { return lost, nil }}},
		{"gone", statusSeq{func() (uploadstatus.Status, error) { return running, nil },
			func() (uploadstatus.Status, error) {
				return uploadstatus.Status{}, fmt.Errorf("upload u: %w", uploadstatus.ErrNotFound)
			}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := WaitDone(ctx, &tc.seq, "u", 10*time.Millisecond, nil)
			if !errors.Is(err, ErrStatusLost) || ctx.Err() != nil {
				t.Errorf("WaitDone = %v (context: %v), want ErrStatusLost at once", err, ctx.Err())
			}
		})
	}
}
