package throttle

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/lua"
)

// dropProxy forwards TCP to a Redis and, when armed, lets the next request
// through but drops its reply and closes the connection: an answer lost on
// the way back, after Redis ran the command.
type dropProxy struct {
	ln       net.Listener
	target   string
	armed    atomic.Bool
	dropped  atomic.Int32
	mu       sync.Mutex
	requests bytes.Buffer // everything the clients sent
}

func startDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *dropProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				p.mu.Lock()
				p.requests.Write(buf[:n])
				p.mu.Unlock()
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
	srv := testredis.Start(t)
	direct := srv.Client()
	ctx := context.Background()
	// loaded beforehand, so the first EVALSHA runs the script (no NOSCRIPT)
	if err := direct.ScriptLoad(ctx, lua.Script("reserve.lua")).Err(); err != nil {
		t.Fatal(err)
	}
	proxy := startDropProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.ln.Addr().String(), PoolSize: 1, ReadTimeout: 2 * time.Second})
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
	if len(slots) != 1 || slots[0].Member != r.ID || int64(slots[0].Score) != r.At.UnixMicro() {
		t.Errorf("after one reservation whose answer was lost the log holds %v, want exactly the answered slot %s at %d",
			slots, r.ID, r.At.UnixMicro())
	}
}
