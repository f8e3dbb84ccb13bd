// Package autopipe sends the commands that many goroutines issue one by one
// to Redis as pipelines: while one pipeline is on the wire, the commands
// issued meanwhile queue, and the next pipeline carries them all.
//
// A consumer at full speed issues several small commands per row (a SKU
// claim, a slot, its check, the call history, the upload status) from
// hundreds of goroutines at once. Sent one by one, each costs a round trip:
// a write and a read system call on both sides and a goroutine wake-up, which
// is most of the consumer's CPU and of Redis's. Batched, they share them.
// Nothing waits for a batch to fill: a command issued while nothing is in
// flight leaves at once, so an idle client is as fast as one without it,
// and a busy one batches exactly as much as the round trip it waits for
// lets it.
//
// Every command keeps its own answer and error (a pipeline is not a
// transaction), so callers see what they would see unbatched. Blocking
// commands and those of a transaction or an explicit pipeline are not
// touched.
package autopipe

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/workers"
)

// Client is what Install needs: a go-redis client that takes hooks and
// pipelines (*redis.Client, *redis.ClusterClient, a failover client).
type Client interface {
	AddHook(redis.Hook)
	Pipeline() redis.Pipeliner
}

// Options tune a Hook; the zero value is the default.
type Options struct {
	// MaxInFlight is how many pipelines may be on the wire at once; 0 = 1.
	// One gives the largest batches; more trade batch size for latency
	// when single commands are slow. On a Cluster each pipeline is split by
	// node and its parts are sent in parallel anyway.
	MaxInFlight int
	// MaxBatch caps the commands of one pipeline; 0 = 256. A huge batch
	// delays every answer in it until the last one is read.
	MaxBatch int
}

// Hook is the go-redis hook that batches single commands. Stats reads its
// counters.
type Hook struct {
	client Client
	max    int
	batch  int

	mu       sync.Mutex
	queue    []*call
	inFlight int

	// flushers keeps the goroutines that send what queued behind a
	// caller's batch: a new one would grow its stack anew down go-redis's
	// pipeline each time (runtime.newstack).
	flushers *workers.Pool

	pipelines, commands atomic.Int64
}

// A call is one command waiting for its pipeline. state moves once from
// queued to sent (a flusher took it) or to abandoned (its caller's context
// ended first: it is not sent, and the caller's error stands).
type call struct {
	ctx   context.Context
	cmd   redis.Cmder
	state atomic.Int32
	done  chan struct{}
}

// sending marks the context of a pipeline this hook sends.
type sending struct{}

const (
	queued int32 = iota
	sent
	abandoned
)

// Install adds a Hook to rdb and returns it. Add it before any other hook
// that should see pipelines rather than single commands (a hook added first
// is outermost in go-redis v9), for example one counting round trips.
func Install(rdb Client, o Options) *Hook {
	h := &Hook{client: rdb, max: o.MaxInFlight, batch: o.MaxBatch, flushers: workers.NewExpiring(4, 2*time.Second)}
	if h.max <= 0 {
		h.max = 1
	}
	if h.batch <= 0 {
		h.batch = 256
	}
	rdb.AddHook(h)
	return h
}

// Stats is what a Hook has sent: pipelines and the commands in them.
type Stats struct{ Pipelines, Commands int64 }

// Stats reports what the hook has sent so far.
func (h *Hook) Stats() Stats {
	return Stats{Pipelines: h.pipelines.Load(), Commands: h.commands.Load()}
}

// DialHook is not used.
func (h *Hook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook is not used: explicit pipelines and transactions go
// as they are.
func (h *Hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook queues a single command for the next pipeline and waits for
// its answer.
func (h *Hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if blocking(cmd.Name()) || ctx.Value(sending{}) != nil {
			return next(ctx, cmd)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		c := &call{ctx: ctx, cmd: cmd, done: make(chan struct{})}
		h.mu.Lock()
		h.queue = append(h.queue, c)
		lead := h.inFlight < h.max
		if lead {
			h.inFlight++
		}
		h.mu.Unlock()
		if lead {
			h.flush(true)
		}
		select {
		case <-c.done:
			return cmd.Err()
		case <-ctx.Done():
			if c.state.CompareAndSwap(queued, abandoned) {
				return ctx.Err()
			}
			// Already on the wire: its answer is on its way and will be
			// written into cmd, so wait for it rather than race with it.
			<-c.done
			return cmd.Err()
		}
	}
}

// flush sends the queue as one pipeline, then hands the turn on: a caller
// that led one batch goes back to its own work, and a goroutine sends what
// queued meanwhile; when the queue is empty the turn is given up. The
// goroutine is started only when something queued: one started to find the
// queue empty would cost a goroutine per led batch, and a new goroutine
// grows its stack anew down go-redis's pipeline (runtime.newstack, a
// visible share of the consumer's CPU profile).
func (h *Hook) flush(caller bool) {
	for {
		h.mu.Lock()
		n := min(len(h.queue), h.batch)
		if n == 0 {
			h.inFlight--
			h.mu.Unlock()
			return
		}
		batch := h.queue[:n:n]
		h.queue = h.queue[n:]
		if len(h.queue) == 0 {
			h.queue = nil // let the old backing array go
		}
		h.mu.Unlock()
		h.send(batch)
		if caller {
			h.mu.Lock()
			if len(h.queue) == 0 {
				h.inFlight--
				h.mu.Unlock()
				return
			}
			h.mu.Unlock()
			h.flushers.Go(func() { h.flush(false) })
			return
		}
	}
}

func (h *Hook) send(batch []*call) {
	cmds := make([]redis.Cmder, 0, len(batch))
	taken := batch[:0:0]
	for _, c := range batch {
		if c.state.CompareAndSwap(queued, sent) {
			cmds = append(cmds, c.cmd)
			taken = append(taken, c)
		}
	}
	if len(cmds) > 0 {
		pipe := h.client.Pipeline()
		for _, cmd := range cmds {
			_ = pipe.Process(taken[0].ctx, cmd)
		}
		// Each command carries its own answer or error; Exec's error is
		// only the first of them.
		// go-redis prepares a new connection (HELLO, AUTH) with commands
		// that pass through this hook again, under the pipeline's context:
		// marked, they go straight out instead of queueing behind the
		// pipeline that waits for them.
		h.pipelines.Add(1)
		h.commands.Add(int64(len(cmds)))
		_, _ = pipe.Exec(context.WithValue(context.WithoutCancel(taken[0].ctx), sending{}, true))
	}
	for _, c := range taken {
		close(c.done)
	}
}

// Direct marks ctx so that the commands issued with it go straight out, in
// a round trip of their own: for a command whose point is its latency (a
// clock read), not its answer.
func Direct(ctx context.Context) context.Context { return context.WithValue(ctx, sending{}, true) }

// blocking reports the commands that hold their connection until something
// happens: batched, they would hold every command behind them.
func blocking(name string) bool {
	switch strings.ToLower(name) {
	case "blpop", "brpop", "brpoplpush", "blmove", "blmpop", "bzpopmin", "bzpopmax", "bzmpop",
		"xread", "xreadgroup", "wait", "waitaof", "subscribe", "psubscribe", "ssubscribe", "monitor", "sync", "psync":
		return true
	}
	return false
}
