// Package redischeck checks, when a binary starts, that the Redis it is
// given can hold bulkreg's state: a version that runs bulkreg's Lua
// scripts, and a maxmemory-policy that never evicts a key. An evicted
// throttle log lets a seller exceed the API's limit without any error; an
// evicted ledger claim lets two rows register the same SKU. A full Redis
// under noeviction refuses writes instead, and the consumers fail closed.
//
// In Redis Cluster every master is checked. A Redis that refuses the
// commands the check needs (managed services rename or disable CONFIG, an
// ACL may deny INFO) or does not answer at start is logged once as not
// checked, and the binary starts: the operator is then the one who vouches
// for the settings (docs/production.md).
package redischeck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// MinVersion is the oldest Redis that runs bulkreg's scripts: their
// "#!lua flags=…" first lines (no-writes on the read-only scripts,
// allow-cross-slot-keys on init.lua) are Redis 7.0's; older servers fail to
// compile them. The scripts use nothing newer (ZADD GT/LT and ZMSCORE are
// 6.2's). This is the one place the minimum is stated; docs/production.md
// quotes it.
const MinVersion = "7.0.0"

// ErrUnfit is wrapped by every refusal of Check.
var ErrUnfit = errors.New("this Redis is not fit for bulkreg")

// Evicts reports whether a maxmemory-policy lets Redis remove keys when its
// memory is full: every allkeys-* and volatile-* policy does, noeviction
// does not.
func Evicts(policy string) bool {
	p := strings.ToLower(strings.TrimSpace(policy))
	return p != "noeviction"
}

// node is what one Redis server answered.
type node struct {
	addr      string
	version   string // redis_version from INFO server; empty when not read
	policy    string // maxmemory-policy; empty when not read
	refused   []string
	unreached error
}

// Check reads the version and maxmemory-policy of the Redis behind rdb (each
// master of a Cluster; the primary behind Sentinel) and returns an error
// wrapping ErrUnfit that names the server, the setting and how to fix it
// when a version is below MinVersion or a policy evicts. What it cannot
// read it logs once on log at warn level and does not hold against Redis.
func Check(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) error {
	var (
		mu    sync.Mutex
		nodes []node
	)
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			n := read(ctx, c, c.Options().Addr)
			mu.Lock()
			nodes = append(nodes, n)
			mu.Unlock()
			return nil
		})
		if err != nil {
			// The cluster's layout could not be read: no master is known.
			log.Warn("Redis's version and maxmemory-policy were not checked: the Redis Cluster did not answer at start", "err", err)
			return nil
		}
	} else {
		addr := "Redis"
		if c, ok := rdb.(*redis.Client); ok {
			addr = c.Options().Addr
		}
		nodes = append(nodes, read(ctx, rdb, addr))
	}
	slices.SortFunc(nodes, func(a, b node) int { return strings.Compare(a.addr, b.addr) })

	var errs []error
	var refused, unreached []string
	for _, n := range nodes {
		if n.unreached != nil {
			unreached = append(unreached, fmt.Sprintf("%s: %v", n.addr, n.unreached))
			continue
		}
		refused = append(refused, n.refused...)
		if n.version != "" {
			if v, ok := parseVersion(n.version); !ok {
				refused = append(refused, fmt.Sprintf("%s: redis_version %q is not a version number", n.addr, n.version))
			} else if min, _ := parseVersion(MinVersion); less(v, min) {
				errs = append(errs, fmt.Errorf("%w: the server at %s is version %s; bulkreg needs %s or later (its Lua scripts declare flags, which older servers cannot compile): upgrade Redis", ErrUnfit, n.addr, n.version, MinVersion))
			}
		}
		if n.policy != "" && Evicts(n.policy) {
			errs = append(errs, fmt.Errorf("%w: the server at %s has maxmemory-policy %s, which evicts keys when memory is full: an evicted throttle log would let sellers exceed the API's limit, an evicted ledger claim would register an SKU twice. Set it to noeviction, at once with `redis-cli -h <host> -p <port> CONFIG SET maxmemory-policy noeviction` and for good with `maxmemory-policy noeviction` in redis.conf (or your provider's parameter group)", ErrUnfit, n.addr, n.policy))
		}
	}
	if len(refused) > 0 {
		log.Warn("Redis's settings were not all checked (CONFIG or INFO refused, as managed Redis services do): make sure maxmemory-policy is noeviction and the version is "+MinVersion+" or later", "not_checked", refused)
	}
	if len(unreached) > 0 {
		log.Warn("Redis's version and maxmemory-policy were not checked: Redis did not answer at start", "nodes", unreached)
	}
	return errors.Join(errs...)
}

// read asks one server for its version and policy. A reply error from the
// server (unknown or renamed command, NOPERM) marks the setting as refused;
// any other error means the server was not reached.
func read(ctx context.Context, c redis.Cmdable, addr string) node {
	n := node{addr: addr}
	info, err := c.Info(ctx, "server").Result()
	switch {
	case isReply(err):
		n.refused = append(n.refused, fmt.Sprintf("%s: INFO server: %v", addr, err))
	case err != nil:
		n.unreached = err
		return n
	default:
		n.version = infoField(info, "redis_version")
	}
	cfg, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	switch {
	case isReply(err):
		n.refused = append(n.refused, fmt.Sprintf("%s: CONFIG GET maxmemory-policy: %v", addr, err))
	case err != nil:
		n.unreached = err
	case cfg["maxmemory-policy"] == "":
		n.refused = append(n.refused, fmt.Sprintf("%s: CONFIG GET maxmemory-policy: no value", addr))
	default:
		n.policy = cfg["maxmemory-policy"]
	}
	return n
}

func isReply(err error) bool {
	var re redis.Error
	return err != nil && !errors.Is(err, redis.Nil) && errors.As(err, &re)
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// parseVersion reads "7.0.15" (or "7.2"); a missing part is 0.
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) == 0 || len(parts) > 3 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

func less(a, b [3]int) bool { return slices.Compare(a[:], b[:]) < 0 }
