// Package testredis starts real redis-server processes for tests: one node on
// a free port, or a three-master Redis Cluster. Tests that claim Redis
// behaviour use these, never a mock, and can stop and restart them to test
// failures. `make test` installs redis-server when it is missing.
package testredis

import (
	"context"
	"errors"
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
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 3 {
		t.Fatalf("a Redis Cluster needs at least 3 masters, asked for %d", n)
	}
	c := &Cluster{t: t}
	addrs := make([]string, n)
	for i := range n {
		c.Nodes = append(c.Nodes, Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"))
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
