package uploadstatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/redisfail"
	"github.com/bulkreg/bulkreg/lua"
)

// Requeued is Requeue's answer.
type Requeued struct {
	// Moved is true when the row was failed and is waiting now.
	Moved bool
	// State is the row's state before: Failed when Moved; otherwise the state
	// that kept it ("" = waiting, so a redrive already sent it again or its
	// result was never recorded; Registered or another final state).
	State string
	// Previous is the failed result the row had when Moved (nil otherwise),
	// for Restore when the row cannot be published after all.
	Previous *RowResult
}

// Requeue moves one row of an upload from failed back to waiting, for a
// redrive that publishes it again: the failed count drops by one and the row's
// result is removed, so the seller sees it waiting. A row that is not failed
// is left as it is and Moved is false: requeueing the same dead letter twice
// moves it once. An upload Redis does not know returns an error wrapping
// ErrNotFound.
func (s *Store) Requeue(ctx context.Context, uploadID string, row int) (Requeued, error) {
	if uploadID == "" {
		return Requeued{}, errors.New("requeue row: the upload id is empty")
	}
	if row < 1 {
		return Requeued{}, fmt.Errorf("requeue row of upload %s: row %d, rows start at 1", uploadID, row)
	}
	res, err := redis.NewScript(lua.Script("upload_requeue.lua")).Run(ctx, s.rdb, recordKeys(uploadID), row, s.ms()).Slice()
	if err != nil {
		return Requeued{}, fmt.Errorf("requeue row %d of upload %s in Redis: %w", row, uploadID, redisfail.Wrap(err))
	}
	if len(res) != 3 {
		return Requeued{}, fmt.Errorf("requeue row %d of upload %s: unexpected reply %v", row, uploadID, res)
	}
	code, _ := res[0].(int64)
	state, _ := res[1].(string)
	prev, _ := res[2].(string)
	switch code {
	case -1:
		return Requeued{}, fmt.Errorf("requeue row %d of upload %s: %w", row, uploadID, ErrNotFound)
	case 0:
		return Requeued{State: state}, nil
	}
	q := Requeued{Moved: true, State: Failed}
	var r RowResult
	if json.Unmarshal([]byte(prev), &r) == nil && r.State == Failed {
		q.Previous = &r
	} else {
		// The result was unreadable; Restore still needs one to count the row failed again.
		q.Previous = &RowResult{Row: row, State: Failed, Reason: "the row's earlier result could not be read"}
	}
	return q, nil
}

// Restore undoes a Requeue whose row could not be published: the row is
// failed again with its previous result. A row that meanwhile got another
// result keeps the one that wins (RecordRow's rule).
func (s *Store) Restore(ctx context.Context, uploadID string, q Requeued) error {
	if !q.Moved || q.Previous == nil {
		return nil
	}
	return s.RecordRow(ctx, uploadID, *q.Previous)
}

// RowState reads one row's state without changing it: "" (waiting), Failed,
// Registered, or another final state. An upload Redis does not know returns
// an error wrapping ErrNotFound.
func (s *Store) RowState(ctx context.Context, uploadID string, row int) (string, error) {
	pipe := s.rdb.Pipeline()
	exists := pipe.Exists(ctx, key(uploadID, "meta"))
	state := pipe.HGet(ctx, key(uploadID, "states"), strconv.Itoa(row))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("read row %d of upload %s from Redis: %w", row, uploadID, redisfail.Wrap(err))
	}
	if exists.Val() == 0 {
		return "", fmt.Errorf("row %d of upload %s: %w", row, uploadID, ErrNotFound)
	}
	return state.Val(), nil
}
