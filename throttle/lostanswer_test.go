package throttle

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/testproxy"
	"github.com/bulkreg/bulkreg/lua"
)

// dropProxy forwards TCP to a Redis and, when armed, lets the next request
// through but drops its reply and closes the connection: an answer lost on
// the way back, after Redis ran the command.
type dropProxy struct {
	address  string
	armed    atomic.Bool // drop the next reply and close the connection
	swallow  atomic.Bool // while set, discard the replies to EVALSHA and EVAL and keep the connection: the client times out
	dropped  atomic.Int32
	mu       sync.Mutex
	requests bytes.Buffer // everything the clients sent
}

func startDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	p := &dropProxy{}
	p.address = testproxy.Start(t, target, p.serve)
	return p
}

func (p *dropProxy) serve(client, server net.Conn) {
	// go-redis sends one command and waits for its reply (no pipelining
	// here), so the latest request is the one the next reply answers.
	var script atomic.Bool
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				p.mu.Lock()
				p.requests.Write(buf[:n])
				p.mu.Unlock()
				script.Store(bytes.Contains(bytes.ToLower(buf[:n]), []byte("eval")))
				if _, err := server.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				server.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && p.armed.CompareAndSwap(true, false) {
			p.dropped.Add(1)
			return // the reply never reaches the client
		}
		if n > 0 && p.swallow.Load() && script.Load() {
			p.dropped.Add(1)
			continue
		}
		if n > 0 {
			if _, err := client.Write(buf[:n]); err != nil {
				return
			}
		}
		if err == io.EOF || err != nil {
			return
		}
	}
}

func (p *dropProxy) sent(cmd string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Count(bytes.ToLower(p.requests.Bytes()), []byte(cmd))
}

// TestALostAnswerIsNotReplayedBlindly runs a reservation whose reply is lost
// after Redis took the slot. go-redis retries the command; the retry carries
// the same reservation id and answers the slot already held, so one
// reservation holds one slot.
func TestALostAnswerIsNotReplayedBlindly(t *testing.T) {
	srv := startRedis(t)
	direct := srv.Client()
	ctx := context.Background()
	// loaded beforehand, so the first EVALSHA runs the script (no NOSCRIPT)
	if err := direct.ScriptLoad(ctx, lua.Script("slot_guard.lua")+lua.Script("fits.lua")+lua.Script("reserve.lua")).Err(); err != nil {
		t.Fatal(err)
	}
	proxy := startDropProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.address, PoolSize: 1, ReadTimeout: 2 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil { // connection set up before arming
		t.Fatal(err)
	}
	// Limit 1: a replay that did not find its own slot would count it and
	// move itself a window ahead.
	th := newThrottle(t, rdb, Policy{Limit: 1, Window: time.Minute})
	s := seller("lost")

	proxy.armed.Store(true)
	r, err := th.Reserve(ctx, s)
	if err != nil {
		t.Fatalf("Reserve after a lost answer: %v (go-redis should have retried)", err)
	}
	if proxy.dropped.Load() != 1 || proxy.sent("evalsha") != 2 {
		t.Fatalf("the proxy dropped %d replies and saw %d EVALSHA; want 1 and 2 (the retry)", proxy.dropped.Load(), proxy.sent("evalsha"))
	}
	if !r.Admitted || r.Wait > time.Second {
		t.Errorf("the retry answered %+v, want the slot the lost answer held: now", r)
	}
	slots, err := direct.ZRangeWithScores(ctx, th.keys(s).log, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := r.At.Add(th.Policy().reach()).UnixMicro(); len(slots) != 1 || slots[0].Member != r.ID || int64(slots[0].Score) != want {
		t.Errorf("after one reservation whose answer was lost the log holds %v, want exactly the answered slot %s's latest count at %d",
			slots, r.ID, want)
	}
}

// TestAnAnswerLostForGoodGivesTheSlotBack: every reply is lost to a read
// timeout, go-redis retries with the same reservation id, and Reserve fails.
// The script did run, so the caller that got an error would leave a slot
// nobody uses; Reserve gives it back, and the retries never took a second one.
func TestAnAnswerLostForGoodGivesTheSlotBack(t *testing.T) {
	srv := startRedis(t)
	direct := srv.Client()
	ctx := context.Background()
	proxy := startDropProxy(t, srv.Addr)
	const retries = 2
	rdb := redis.NewClient(&redis.Options{Addr: proxy.address, ReadTimeout: 100 * time.Millisecond,
		MaxRetries: retries, MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 5 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	th := newThrottle(t, rdb, Policy{Limit: 1, Window: time.Minute, ReleaseTimeout: 500 * time.Millisecond})
	s := seller("lost-for-good")
	// Watch the log from outside: the reserve attempts must never hold more
	// than one slot between them, even before the give-back.
	var most atomic.Int64
	watch, stop := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watch.Err() == nil {
			if n, err := direct.ZCard(watch, th.keys(s).log).Result(); err == nil && n > most.Load() {
				most.Store(n)
			}
		}
	}()

	proxy.swallow.Store(true)
	r, err := th.Reserve(ctx, s)
	proxy.swallow.Store(false)
	stop()
	<-watched
	if err == nil || r.Admitted || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Reserve with every answer lost = %+v, %v; want ErrUnavailable and no slot", r, err)
	}
	// MaxRetries+1 reserve attempts, then at least one release; every reply swallowed.
	if got := proxy.sent("evalsha"); got < retries+2 {
		t.Fatalf("the proxy saw %d EVALSHA, want the %d reserve attempts and a release", got, retries+1)
	}
	if most.Load() > 1 {
		t.Errorf("the retries of one reservation held %d slots at once, want at most 1", most.Load())
	}
	if n := direct.ZCard(ctx, th.keys(s).log).Val(); n != 0 {
		t.Errorf("after a reservation that failed with its answer lost the log holds %d slots, want 0 (given back)", n)
	}
	// The seller is not penalised: the next reservation is now.
	next, err := th.Reserve(ctx, s)
	if err != nil || !next.Admitted || next.Wait > 100*time.Millisecond {
		t.Errorf("the next reservation = %+v, %v; want a slot now", next, err)
	}
}

// scriptCalls counts the script commands a client sends, by name.
type scriptCalls struct {
	mu    sync.Mutex
	calls []string
}

func (h *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			h.mu.Lock()
			h.calls = append(h.calls, name)
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *scriptCalls) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.calls
	h.calls = nil
	return out
}

// TestNoScriptFallsBackToTheBody: every operation is one EVALSHA while the
// script is cached; after SCRIPT FLUSH (what a failover to a replica does,
// since Redis 7 does not replicate SCRIPT LOAD) the NOSCRIPT answer is
// followed by EVAL of the body, and the operation succeeds.
func TestNoScriptFallsBackToTheBody(t *testing.T) {
	srv := startRedis(t)
	direct := srv.Client()
	ctx := context.Background()
	for _, kind := range []Kind{Sliding, Fixed, TokenBucket} {
		t.Run(string(kind), func(t *testing.T) {
			hook := &scriptCalls{}
			rdb := srv.Client()
			rdb.AddHook(hook)
			th := newThrottle(t, rdb, Policy{Kind: kind, Limit: 10, Window: time.Second})
			s := seller("noscript")
			ops := []struct {
				name string
				run  func() error
			}{
				{"Reserve", func() error {
					r, err := th.Reserve(ctx, s)
					if err == nil && !r.Admitted {
						err = errors.New("not admitted")
					}
					return err
				}},
				{"Peek", func() error { _, err := th.Peek(ctx, s); return err }},
				{"Block", func() error { return th.Block(ctx, s, time.Millisecond) }},
				{"Release", func() error {
					r, err := th.Reserve(ctx, s)
					if err != nil {
						return err
					}
					hook.take() // only the release's commands count
					return th.Release(ctx, r)
				}},
			}
			for _, op := range ops {
				if err := direct.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				for i, want := range [][]string{{"evalsha", "eval"}, {"evalsha"}} {
					if err := op.run(); err != nil {
						t.Fatalf("%s %d after SCRIPT FLUSH: %v", op.name, i+1, err)
					}
					// the first falls back to the body, which caches it again
					if got := hook.take(); !slices.Equal(got, want) {
						t.Errorf("%s %d after SCRIPT FLUSH sent %v, want %v", op.name, i+1, got, want)
					}
				}
			}
		})
	}
}
