package consumer

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/ledger"
	"github.com/bulkreg/bulkreg/lua"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// commandLog counts the commands Redis ran for a client (answered without
// an error: a NOSCRIPT followed by EVAL counts once), scripts by their SHA1.
type commandLog struct {
	mu   sync.Mutex
	seen map[string]int
}

func (h *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.add(c, c.Err())
		}
		return err
	}
}
func (h *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.add(cmd, err)
		return err
	}
}

// add counts c unless it failed. err is what the hook chain returned: in a
// hook, go-redis v9.23 shows a NOSCRIPT EVALSHA's Err() as nil.
func (h *commandLog) add(c redis.Cmder, err error) {
	if err != nil {
		return
	}
	name := c.Name()
	if args := c.Args(); (name == "evalsha" || name == "eval") && len(args) > 1 {
		name, _ = args[1].(string)
		if c.Name() == "eval" {
			name = sha(name)
		}
	}
	h.mu.Lock()
	h.seen[name]++
	h.mu.Unlock()
}

func (h *commandLog) count(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[name]
}

func sha(body string) string { s := sha1.Sum([]byte(body)); return hex.EncodeToString(s[:]) }

// TestACallLeavesOneScript: what a registered row writes after its call
// (the call in the compliance history, its latest count in the throttle's
// log settled at its answer, its SKU in the ledger) is one script, shared
// with the other rows of the seller answered at the same time (at most one
// script per row, none of the writes on its own), and all of it is there.
// The settle moves each call's entry from its latest count (the slot + 4 s
// and more here) to its answer less the margin, or its slot, within a few
// milliseconds of the call.
func TestACallLeavesOneScript(t *testing.T) {
	const rows = 40
	for _, tc := range []struct {
		name    string
		margin  time.Duration
		latency time.Duration // the API's, before it answers
	}{
		{"answered at once", 200 * time.Millisecond, 5 * time.Millisecond},
		{"answered later than the margin", 50 * time.Millisecond, 80 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, stackOptions{partitions: 2, limit: 100, window: time.Second, margin: tc.margin, latency: tc.latency})
			log := &commandLog{seen: map[string]int{}}
			rdb := s.redis.Client()
			rdb.AddHook(log)
			s.startConsumer(func(cfg *Config, d *Deps) {
				th, err := throttle.New(rdb, cfg.ThrottlePolicy(s.limit, s.window, s.margin))
				if err != nil {
					t.Fatal(err)
				}
				d.Throttle, d.Calls, d.Status = th, compliance.NewRecorder(rdb, time.Hour), uploadstatus.New(rdb, time.Hour)
				d.Ledger = ledger.New(rdb, ledger.Options{})
			})
			s.waitGroupStable("registrar", 1)
			s.publish("up-1", "seller-1", rows)
			s.waitProducts("seller-1", rows, 20*time.Second)
			s.checkCompliant("seller-1", rows)

			ctx := context.Background()
			testwait.For(t, 5*time.Second, "every call in the compliance history and every registration in the ledger", func() bool {
				e, err := ledger.New(s.rdb, ledger.Options{}).Lookup(ctx, "seller-1", skus("up-1", rows))
				if err != nil || len(e) != rows || s.rdb.ZCard(ctx, compliance.CallsKey("seller-1")).Val() != rows {
					return false
				}
				for _, x := range e {
					if x.State != ledger.Registered {
						return false
					}
				}
				return true
			})
			// The batches' scripts: the history, the ledger and the settle.
			batches := map[bool]int{}
			for _, settle := range []bool{false, true} {
				names := []string{"compliance_record.lua", "ledger_mark.lua"}
				if settle {
					names = append(names, "settle.lua")
				}
				body, err := scriptbatch.Compose(names...)
				if err != nil {
					t.Fatal(err)
				}
				batches[settle] = log.count(sha(body))
			}
			if n := batches[false] + batches[true]; n == 0 || n > rows {
				t.Errorf("the calls' writes ran as %d scripts for %d rows, want 1 to %d", n, rows, rows)
			}
			if batches[false] > 0 {
				t.Errorf("%d scripts settled no call, want every call settled", batches[false])
			}
			t.Logf("%d rows' writes in %d scripts (%d with a settle)", rows, batches[false]+batches[true], batches[true])
			for _, alone := range []string{"compliance_record.lua", "ledger_mark.lua"} {
				if n := log.count(sha(lua.Script(alone))); n != 0 {
					t.Errorf("%s ran on its own %d times", alone, n)
				}
			}
			if n := log.count("zadd"); n != 0 {
				t.Errorf("%d slots settled with a ZADD of their own", n)
			}
			// Settled: every entry in the log moved to its call's answer
			// less the margin, or its slot, within a few ms of the call and
			// long before its latest count. Sorted, the k-th entry is then
			// near the k-th call, whatever the pairing.
			slots := s.rdb.ZRangeWithScores(ctx, "bulkreg:{s:seller-1}:log", 0, -1).Val()
			calls := s.rdb.ZRangeWithScores(ctx, compliance.CallsKey("seller-1"), 0, -1).Val()
			if len(slots) != rows || len(calls) != rows {
				t.Fatalf("%d slots and %d calls, want %d each", len(slots), len(calls), rows)
			}
			for i := range slots {
				if d := time.Duration(slots[i].Score-calls[i].Score) * time.Microsecond; d < -time.Second || d > time.Second {
					t.Errorf("entry %d at %.0f µs, its call sent at %.0f µs: %v after it, want its answer less the margin, or its slot, a few ms from it", i, slots[i].Score, calls[i].Score, d)
				}
			}
		})
	}
}

func skus(upload string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = upload + "-" + strconv.Itoa(i+1)
	}
	return out
}
