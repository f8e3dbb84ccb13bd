// Package redisproc runs a redis-server child process on a chosen port. The
// test harness (internal/testredis) and devstack both start Redis this way,
// so a test's Redis and the demo's Redis are the same real server.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotInstalled means redis-server is not on PATH.
var ErrNotInstalled = errors.New("redis-server is not on PATH (Debian: apt-get install -y redis-server)")

// Proc is one redis-server process.
type Proc struct {
	Addr string // 127.0.0.1:port
	Port int

	dir     string
	extra   []string
	cmd     *exec.Cmd
	waitErr chan error
}

// Start runs redis-server on port (0: a free port), keeping nothing on disk
// but its log and cluster config in dir. extraArgs are passed through
// ("--requirepass", "secret" works: the start-up probe takes NOAUTH as an answer).
func Start(ctx context.Context, dir string, port int, extraArgs ...string) (*Proc, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, ErrNotInstalled
	}
	p := &Proc{dir: dir, extra: extraArgs}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		p.Port = port
		if port == 0 {
			free, err := FreePort()
			if err != nil {
				return nil, err
			}
			p.Port = free
		}
		p.Addr = "127.0.0.1:" + strconv.Itoa(p.Port)
		if lastErr = p.start(ctx); lastErr == nil {
			return p, nil
		}
		if port != 0 {
			break
		}
	}
	return nil, lastErr
}

func (p *Proc) start(ctx context.Context) error {
	args := []string{
		"--port", strconv.Itoa(p.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", p.dir,
		"--protected-mode", "no", "--logfile", filepath.Join(p.dir, "redis.log"),
	}
	args = append(args, p.extra...)
	return p.run(ctx, exec.Command("redis-server", args...), filepath.Join(p.dir, "redis.log"),
		func(addr string) pinger {
			return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		})
}

// pinger is a client of a server or a sentinel: both answer INFO.
type pinger interface {
	Process(ctx context.Context, cmd redis.Cmder) error
	Close() error
}

// run starts cmd and waits until the process answers through a client from
// dial, or exits (its log's tail is then in the error). The answer must be
// this process's own (INFO's process_id): a port FreePort gave out can be
// taken by another test's server before this one binds it, and that one
// would answer PING.
func (p *Proc) run(ctx context.Context, cmd *exec.Cmd, logFile string, dial func(addr string) pinger) error {
	name := filepath.Base(cmd.Path)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	p.cmd = cmd
	p.waitErr = make(chan error, 1)
	go func() { p.waitErr <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.waitErr:
			log, _ := os.ReadFile(logFile)
			p.cmd = nil
			return fmt.Errorf("%s on port %d exited (%v): %s", name, p.Port, err, tail(string(log)))
		case <-ctx.Done():
			p.Stop()
			return ctx.Err()
		default:
		}
		c := dial(p.Addr)
		info := redis.NewStringCmd(ctx, "info", "server")
		err := c.Process(ctx, info)
		c.Close()
		switch {
		case err == nil && processID(info.Val()) == cmd.Process.Pid:
			return nil
		case err == nil:
			// Another test's server took the port between FreePort and
			// this one's bind, and answered first: this one is exiting.
			p.Stop()
			return fmt.Errorf("%s on port %d: another server answers there", name, p.Port)
		case redis.HasErrorPrefix(err, "NOAUTH"):
			// A server run with --requirepass answers, but does not say
			// whose it is: it is this one if this one still runs once a
			// refused bind would have ended it.
			select {
			case werr := <-p.waitErr:
				log, _ := os.ReadFile(logFile)
				p.cmd = nil
				return fmt.Errorf("%s on port %d exited (%v): %s", name, p.Port, werr, tail(string(log)))
			case <-time.After(200 * time.Millisecond):
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Stop()
	return fmt.Errorf("%s on port %d did not answer PING within 10s", name, p.Port)
}

// Freeze stops the process (SIGSTOP) without freeing its port: a hung
// host, as a failure detector sees it. Stop still kills it.
func (p *Proc) Freeze() error {
	if p.cmd == nil {
		return fmt.Errorf("redis-server on port %d is not running", p.Port)
	}
	return p.cmd.Process.Signal(syscall.SIGSTOP)
}

// Stop kills the server (SIGKILL: a crash, not a shutdown). Safe to call twice.
func (p *Proc) Stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.waitErr
	p.cmd = nil
}

// Restart starts the server again on the same port with an empty dataset,
// retrying while the old socket lingers.
func (p *Proc) Restart(ctx context.Context) error {
	p.Stop()
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if err = p.start(ctx); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("restart redis-server on %s: %w", p.Addr, err)
}

// FreePort asks the kernel for a port nobody listens on.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts asks the kernel for n distinct ports nobody listens on. It holds
// every port until it has all n: a port closed and then asked for again may
// come back (bind prefers half of the ephemeral range), and two servers told
// the same port lose a test to "address already in use".
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "\n")
}

// processID is the process_id of an INFO server reply, 0 when it has none.
func processID(info string) int {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ := strconv.Atoi(v)
			return pid
		}
	}
	return 0
}
