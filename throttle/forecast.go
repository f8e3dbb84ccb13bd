package throttle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/lua"
)

// Forecast says when a seller's next rows would get their slots.
type Forecast struct {
	Now time.Time // the Redis clock when the forecast was made
	// Held is the slots in the seller's log at or after Now: rows holding a
	// slot and waiting for it.
	Held int
	// Last is the slot of the n-th of the seller's next rows: the n-th held
	// slot, or the slot the reserve script would give it when every row
	// before it had taken its own; Now when n is 0.
	Last time.Time
}

// Forecast tells when the seller's next n rows would get their slots, under
// the throttle's policy: the rows take the slots held ahead first, in order,
// and then the slots Reserve would give them one after another. It reads the
// log and writes nothing, so the answer is exact for as long as no slot is
// given back, blocked or taken by a row not counted in n. A slot that has
// begun is not held (the log cannot tell a call under way from one done):
// a row counted in n while its call is under way is given a slot of its
// own, so for the length of a call the answer can be up to a window late.
func (t *Throttle) Forecast(ctx context.Context, seller string, n int) (Forecast, error) {
	if seller == "" {
		return Forecast{}, errors.New("throttle: seller id must not be empty")
	}
	if n < 0 || n > 100000 {
		return Forecast{}, fmt.Errorf("throttle: forecast: n must be between 0 and 100000, got %d", n)
	}
	k := t.keys(seller)
	// Made here, not in New, so the throttle's own fields stay as they are;
	// hashing the script costs microseconds.
	args := append([]any{t.p.Limit, t.p.span().Microseconds(), n, string(t.p.Kind)}, t.kargs...)
	v, err := redis.NewScript(lua.Script("forecast.lua")).Run(ctx, t.rdb, []string{k.log, k.block, k.marker, k.tat}, args...).Slice()
	if err != nil {
		return Forecast{}, t.fail(ctx, "forecast", seller, err)
	}
	if len(v) == 3 {
		now, err1 := micros(v[0])
		held, ok := v[1].(int64)
		last, err2 := micros(v[2])
		if err1 == nil && ok && err2 == nil {
			return Forecast{Now: time.UnixMicro(now), Held: int(held), Last: time.UnixMicro(last)}, nil
		}
	}
	return Forecast{}, fmt.Errorf("throttle: forecast for seller %q: %w: the forecast script answered %v", seller, ErrUnavailable, v)
}
