package redischeck

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

func bufLog() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, nil)), &buf
}

// Every policy that evicts is refused, naming the server, the setting and
// the fix; noeviction passes without a warning.
func TestEvictingPolicyRefused(t *testing.T) {
	for _, tc := range []struct {
		policy string
		refuse bool
	}{
		{"noeviction", false},
		{"allkeys-lru", true},
		{"volatile-ttl", true},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			rs := testredis.Start(t, "--maxmemory-policy", tc.policy)
			log, buf := bufLog()
			err := Check(context.Background(), rs.Client(), log)
			if !tc.refuse {
				if err != nil {
					t.Fatalf("Check on %s: %v, want nil", tc.policy, err)
				}
				if buf.Len() != 0 {
					t.Errorf("Check on %s logged %q, want nothing", tc.policy, buf)
				}
				return
			}
			if !errors.Is(err, ErrUnfit) {
				t.Fatalf("Check on %s: %v, want ErrUnfit", tc.policy, err)
			}
			for _, want := range []string{rs.Addr, "maxmemory-policy " + tc.policy, "CONFIG SET maxmemory-policy noeviction", "redis.conf"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal %q does not say %q", err, want)
				}
			}
		})
	}
}

// A Redis without CONFIG (renamed away, as managed services do) is not
// held against: one warning, and the binary starts.
func TestConfigRefusedWarnsOnce(t *testing.T) {
	rs := testredis.Start(t, "--rename-command", "CONFIG", "")
	log, buf := bufLog()
	if err := Check(context.Background(), rs.Client(), log); err != nil {
		t.Fatalf("Check without CONFIG: %v, want nil (warn and go on)", err)
	}
	if n := strings.Count(buf.String(), "level=WARN"); n != 1 || !strings.Contains(buf.String(), "CONFIG GET maxmemory-policy") {
		t.Errorf("Check without CONFIG logged %d warnings, want 1 naming CONFIG GET maxmemory-policy:\n%s", n, buf)
	}
}

// A Redis that does not answer at start is logged, not refused: the
// consumer waits for Redis on its own.
func TestUnreachableWarns(t *testing.T) {
	rs := testredis.Start(t)
	c := rs.Client()
	rs.Stop()
	log, buf := bufLog()
	if err := Check(context.Background(), c, log); err != nil {
		t.Fatalf("Check of a stopped Redis: %v, want nil", err)
	}
	if !strings.Contains(buf.String(), "did not answer") {
		t.Errorf("no warning that Redis was not checked:\n%s", buf)
	}
}

// In a Cluster every master is read: one evicting master among noeviction
// ones is refused by name.
func TestClusterEveryMaster(t *testing.T) {
	cl := testredis.StartCluster(t, 3)
	addrs := make([]string, len(cl.Nodes))
	for i, n := range cl.Nodes {
		addrs[i] = n.Addr
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer cc.Close()
	log, _ := bufLog()
	if err := Check(context.Background(), cc, log); err != nil {
		t.Fatalf("Check of a noeviction cluster: %v", err)
	}
	bad := cl.Nodes[2]
	if err := bad.Client().ConfigSet(context.Background(), "maxmemory-policy", "allkeys-random").Err(); err != nil {
		t.Fatal(err)
	}
	err := Check(context.Background(), cc, log)
	if !errors.Is(err, ErrUnfit) || !strings.Contains(err.Error(), bad.Addr) || !strings.Contains(err.Error(), "allkeys-random") {
		t.Fatalf("Check with %s on allkeys-random: %v, want a refusal naming it", bad.Addr, err)
	}
	for _, n := range cl.Nodes[:2] {
		if strings.Contains(err.Error(), n.Addr) {
			t.Errorf("the refusal names %s, which runs noeviction: %v", n.Addr, err)
		}
	}
}

func TestVersionBelowMinimum(t *testing.T) {
	min, ok := parseVersion(MinVersion)
	if !ok {
		t.Fatalf("MinVersion %q does not parse", MinVersion)
	}
	for _, tc := range []struct {
		v     string
		below bool
	}{{"6.2.14", true}, {"6.0", true}, {"7.0.0", false}, {"7.0.15", false}, {"7.4.1", false}, {"8.0.2", false}} {
		v, ok := parseVersion(tc.v)
		if !ok {
			t.Fatalf("parseVersion(%q) failed", tc.v)
		}
		if got := less(v, min); got != tc.below {
			t.Errorf("%s below %s: %v, want %v", tc.v, MinVersion, got, tc.below)
		}
	}
	if _, ok := parseVersion("7.x"); ok {
		t.Error(`parseVersion("7.x") succeeded`)
	}
}
