// Package testredis starts real redis-server processes for tests: one node on
// a free port, or a three-master Redis Cluster. Tests that claim Redis
// behaviour use these, never a mock, and can stop and restart them to test
// failures. `make test` installs redis-server when it is missing.
package testredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/redisproc"
)

// Server is one redis-server process owned by a test.
type Server struct {
	Addr string // 127.0.0.1:port
	Port int

	t    testing.TB
	proc *redisproc.Proc
}

// Start runs redis-server on a free port and stops it when the test ends.
// extraArgs are passed through (for example "--cluster-enabled", "yes").
func Start(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	proc, err := redisproc.Start(context.Background(), t.TempDir(), 0, extraArgs...)
	if errors.Is(err, redisproc.ErrNotInstalled) {
		t.Fatalf("%v; run `make test`, which installs it", err)
	}
	if err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	s := &Server{Addr: proc.Addr, Port: proc.Port, t: t, proc: proc}
	t.Cleanup(s.Stop)
	return s
}

// Stop kills the server (SIGKILL: a crash, not a shutdown). Safe to call twice.
func (s *Server) Stop() { s.proc.Stop() }

// Freeze hangs the server (SIGSTOP) while it keeps its port, so no other
// test's server can take the port over while a failover is under way; the
// test's end kills it.
func (s *Server) Freeze() {
	s.t.Helper()
	if err := s.proc.Freeze(); err != nil {
		s.t.Fatal(err)
	}
}

// Restart starts the server again on the same port, with an empty dataset.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.proc.Restart(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

// Client returns a client of this server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// Cluster is a Redis Cluster of masters only, each a Server.
type Cluster struct {
	Nodes []*Server
	t     testing.TB
}

// StartCluster starts n masters (at least 3) and joins them with
// `redis-cli --cluster create`, then waits until every slot is served.
// extraArgs are passed to every redis-server (for example "--appendonly",
// "yes", so a node restarted with Server.Restart keeps its data).
func StartCluster(t testing.TB, n int, extraArgs ...string) *Cluster {
	t.Helper()
	if n < 3 {
		t.Fatalf("a Redis Cluster needs at least 3 masters, asked for %d", n)
	}
	c := &Cluster{t: t}
	addrs := make([]string, n)
	for i := range n {
		c.Nodes = append(c.Nodes, Start(t, append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"}, extraArgs...)...))
		addrs[i] = c.Nodes[i].Addr
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v: %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := true
		for _, node := range c.Nodes {
			info, err := exec.Command("redis-cli", "-p", strconv.Itoa(node.Port), "cluster", "info").Output()
			if err != nil || !strings.Contains(string(info), "cluster_state:ok") {
				ok = false
				break
			}
		}
		if ok {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis Cluster on %v did not reach cluster_state:ok within 20s", addrs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// AddReplica starts one more cluster node and makes it a replica of master,
// then waits until it is in sync. It is not in Nodes (which lists masters).
func (c *Cluster) AddReplica(ctx context.Context, master *Server) *Server {
	c.t.Helper()
	r := Start(c.t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
	rc := r.Client()
	mc := master.Client()
	if err := rc.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(master.Port)).Err(); err != nil {
		c.t.Fatalf("CLUSTER MEET: %v", err)
	}
	id, err := mc.ClusterMyID(ctx).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := rc.ClusterReplicate(ctx, id).Err()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("CLUSTER REPLICATE %s on %s: %v", id, r.Addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return r
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("replica %s of %s not in sync within 20s", r.Addr, master.Addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Addrs lists the masters' addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Client returns a cluster client, closed when the test ends.
func (c *Cluster) Client() *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	c.t.Cleanup(func() { cc.Close() })
	return cc
}

// Sentinel is a primary, its replicas and three sentinels watching them: the
// usual Redis high-availability setup, with real processes a test can kill.
type Sentinel struct {
	MasterName string
	Primary    *Server
	// PrimaryAddr is where the sentinels and the replica reach the primary
	// at the start: its own address, or the front of SentinelOptions.
	PrimaryAddr string
	Replicas    []*Server
	Sentinels   []*redisproc.Proc
	t           testing.TB
}

// StartSentinel starts a primary, one replica and three sentinels (quorum 2)
// that declare the primary down after downAfter of silence, and waits until
// the replica is in sync and every sentinel knows it.
func StartSentinel(t testing.TB, downAfter time.Duration) *Sentinel {
	t.Helper()
	return StartSentinelWith(t, SentinelOptions{DownAfter: downAfter})
}

// SentinelOptions shape a StartSentinelWith setup.
type SentinelOptions struct {
	DownAfter time.Duration // silence after which the sentinels think the primary down
	// Front, when set, is given the primary's address and returns the
	// address everyone else reaches it at (the replica, the sentinels and so
	// the clients): a test's proxy, to cut the replication link and make the
	// replica miss writes. Sentinel then names the front as the primary.
	Front func(primaryAddr string) string
}

// StartSentinelWith starts a primary, one replica and three sentinels
// (quorum 2), as StartSentinel does, with the options.
func StartSentinelWith(t testing.TB, o SentinelOptions) *Sentinel {
	t.Helper()
	s := &Sentinel{MasterName: "bulkreg", t: t}
	s.Primary = Start(t)
	s.PrimaryAddr = s.Primary.Addr
	if o.Front != nil {
		s.PrimaryAddr = o.Front(s.Primary.Addr)
	}
	host, port, err := net.SplitHostPort(s.PrimaryAddr)
	if err != nil {
		t.Fatalf("the primary's address %q: %v", s.PrimaryAddr, err)
	}
	replica := Start(t, "--replicaof", host, port)
	s.Replicas = []*Server{replica}
	downAfter := o.DownAfter
	for range 3 {
		p, err := redisproc.StartSentinel(context.Background(), t.TempDir(), redisproc.SentinelOptions{
			MasterName: s.MasterName, MasterAddr: s.PrimaryAddr, Quorum: 2, DownAfter: downAfter, Failover: 4 * downAfter,
		})
		if err != nil {
			t.Fatalf("start sentinel: %v", err)
		}
		t.Cleanup(p.Stop)
		s.Sentinels = append(s.Sentinels, p)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ready := true
		info, err := exec.Command("redis-cli", "-p", strconv.Itoa(replica.Port), "info", "replication").Output()
		if err != nil || !strings.Contains(string(info), "master_link_status:up") {
			ready = false
		}
		for _, sp := range s.Sentinels {
			out, err := exec.Command("redis-cli", "-p", strconv.Itoa(sp.Port), "sentinel", "replicas", s.MasterName).Output()
			if err != nil || !strings.Contains(string(out), strconv.Itoa(replica.Port)) {
				ready = false
			}
			out, err = exec.Command("redis-cli", "-p", strconv.Itoa(sp.Port), "sentinel", "sentinels", s.MasterName).Output()
			if err != nil || strings.Count(string(out), "name") < 2 {
				ready = false
			}
		}
		if ready {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("Sentinel setup did not settle within 20s (replica in sync, every sentinel knowing the replica and the other sentinels)")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// SentinelAddrs lists the sentinels' addresses.
func (s *Sentinel) SentinelAddrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, p := range s.Sentinels {
		out[i] = p.Addr
	}
	return out
}

// Client is a failover client that asks the sentinels for the primary,
// closed when the test ends.
func (s *Sentinel) Client() *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs()})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// MasterAddr asks a sentinel which address is the primary now.
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	var lastErr error
	for _, sp := range s.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: sp.Addr})
		addr, err := c.GetMasterAddrByName(ctx, s.MasterName).Result()
		c.Close()
		if err == nil && len(addr) == 2 {
			return addr[0] + ":" + addr[1], nil
		}
		lastErr = err
	}
	return "", fmt.Errorf("no sentinel named the primary: %w", lastErr)
}

// CommandCalls is how often the server has run each command since it
// started or its statistics were reset (CONFIG RESETSTAT), by lower-case
// name, commands a script ran included: INFO commandstats.
func CommandCalls(t testing.TB, rdb *redis.Client) map[string]int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, stats, _ := strings.Cut(rest, ":calls=")
		calls, _, _ := strings.Cut(stats, ",")
		v, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		out[name] = v
	}
	return out
}

// CPU is the CPU time the server has used since it started, user and
// system, in µs (INFO cpu): what a benchmark tells Redis's own cost by,
// apart from its client's.
func CPU(t testing.TB, rdb *redis.Client) float64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var us float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("INFO cpu: %q: %v", line, err)
			}
			us += f * 1e6
		}
	}
	return us
}

// Owner is the master that serves hash slot slot, as the first node that
// answers CLUSTER SHARDS says.
func (c *Cluster) Owner(ctx context.Context, slot int) (*Server, error) {
	var lastErr error
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr})
		shards, err := cl.ClusterShards(ctx).Result()
		cl.Close()
		if err != nil {
			lastErr = err
			continue
		}
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if int64(slot) < r.Start || int64(slot) > r.End {
					continue
				}
				for _, node := range sh.Nodes {
					if node.Role != "master" {
						continue
					}
					for _, s := range c.Nodes {
						if s.Port == int(node.Port) {
							return s, nil
						}
					}
				}
			}
		}
		return nil, fmt.Errorf("no master of the Cluster serves hash slot %d", slot)
	}
	return nil, fmt.Errorf("no node answered CLUSTER SHARDS: %w", lastErr)
}

// MigrateOptions shape a MigrateSlot.
type MigrateOptions struct {
	// Batch is how many keys one MIGRATE moves (0: 10, as redis-cli's reshard).
	Batch int
	// Pause is waited after each batch, so clients meet the slot half moved
	// (ASK and TRYAGAIN redirections); 0: none.
	Pause time.Duration
}

// MigrateSlot moves hash slot slot with its keys to master to, as
// `redis-cli --cluster reshard` does: CLUSTER SETSLOT IMPORTING on to,
// MIGRATING on the slot's master, MIGRATE of its keys in batches, then
// SETSLOT NODE on both and on every other master. It returns how many keys
// moved; moving a slot to the master that serves it moves none.
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, to *Server, o MigrateOptions) (int, error) {
	from, err := c.Owner(ctx, slot)
	if err != nil {
		return 0, err
	}
	if from == to {
		return 0, nil
	}
	src := redis.NewClient(&redis.Options{Addr: from.Addr})
	defer src.Close()
	dst := redis.NewClient(&redis.Options{Addr: to.Addr})
	defer dst.Close()
	srcID, err := src.ClusterMyID(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("CLUSTER MYID on %s: %w", from.Addr, err)
	}
	dstID, err := dst.ClusterMyID(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("CLUSTER MYID on %s: %w", to.Addr, err)
	}
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err(); err != nil {
		return 0, fmt.Errorf("CLUSTER SETSLOT %d IMPORTING on %s: %w", slot, to.Addr, err)
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err(); err != nil {
		return 0, fmt.Errorf("CLUSTER SETSLOT %d MIGRATING on %s: %w", slot, from.Addr, err)
	}
	batch := o.Batch
	if batch <= 0 {
		batch = 10
	}
	host, port, err := net.SplitHostPort(to.Addr)
	if err != nil {
		return 0, err
	}
	moved := 0
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, batch).Result()
		if err != nil {
			return moved, fmt.Errorf("CLUSTER GETKEYSINSLOT %d on %s: %w", slot, from.Addr, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return moved, fmt.Errorf("MIGRATE %d keys of slot %d from %s to %s: %w", len(keys), slot, from.Addr, to.Addr, err)
		}
		moved += len(keys)
		if o.Pause > 0 {
			select {
			case <-ctx.Done():
				return moved, ctx.Err()
			case <-time.After(o.Pause):
			}
		}
	}
	// The target first, then the source, then the others: the order
	// redis-cli keeps, so no node is left believing the slot unserved.
	order := []*Server{to, from}
	for _, n := range c.Nodes {
		if n != to && n != from {
			order = append(order, n)
		}
	}
	for _, n := range order {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr})
		err := cl.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err()
		cl.Close()
		if err != nil {
			return moved, fmt.Errorf("CLUSTER SETSLOT %d NODE on %s: %w", slot, n.Addr, err)
		}
	}
	return moved, nil
}
