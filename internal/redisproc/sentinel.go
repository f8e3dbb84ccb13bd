package redisproc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelOptions describe one Redis Sentinel process.
type SentinelOptions struct {
	MasterName string        // the name clients ask for
	MasterAddr string        // host:port of the primary to watch
	Quorum     int           // sentinels that must agree the primary is down
	DownAfter  time.Duration // silence after which a sentinel thinks it down
	Failover   time.Duration // failover timeout
}

// StartSentinel runs a sentinel (redis-sentinel, or redis-server --sentinel
// where the redis-sentinel package is not installed) on a free port. A
// sentinel rewrites its configuration file, so it gets its own in dir.
func StartSentinel(ctx context.Context, dir string, o SentinelOptions) (*Proc, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, ErrNotInstalled
	}
	host, port, err := splitHostPort(o.MasterAddr)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		free, err := FreePort()
		if err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, "sentinel-"+strconv.Itoa(free)+".conf")
		logFile := filepath.Join(dir, "sentinel-"+strconv.Itoa(free)+".log")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\nlogfile %s\n"+
			"sentinel monitor %s %s %s %d\nsentinel down-after-milliseconds %s %d\n"+
			"sentinel failover-timeout %s %d\nsentinel parallel-syncs %s 1\n",
			free, dir, logFile,
			o.MasterName, host, port, o.Quorum, o.MasterName, o.DownAfter.Milliseconds(),
			o.MasterName, o.Failover.Milliseconds(), o.MasterName)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return nil, fmt.Errorf("write the sentinel configuration: %w", err)
		}
		p := &Proc{Port: free, Addr: "127.0.0.1:" + strconv.Itoa(free), dir: dir}
		if lastErr = p.startSentinel(ctx, conf, logFile); lastErr == nil {
			return p, nil
		}
	}
	return nil, lastErr
}

func (p *Proc) startSentinel(ctx context.Context, conf, logFile string) error {
	name, args := "redis-sentinel", []string{conf}
	if _, err := exec.LookPath(name); err != nil {
		name, args = "redis-server", []string{conf, "--sentinel"}
	}
	return p.run(ctx, exec.Command(name, args...), logFile, func(addr string) pinger {
		return redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
	})
}

func splitHostPort(addr string) (string, string, error) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:], nil
		}
	}
	return "", "", fmt.Errorf("%q is not host:port", addr)
}
