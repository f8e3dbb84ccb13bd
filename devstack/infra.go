package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"

	"github.com/alicebob/miniredis/v2"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/redisproc"
)

// startKafka runs the embedded Kafka-protocol broker with the rows topic and
// its dead-letter topic already created, as an operator would create them.
func startKafka(host string, partitions int32, topic string, port int) (*kfake.Cluster, error) {
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.SeedTopics(partitions, topic, bulkreg.DLQTopic(topic)),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			_, p, _ := net.SplitHostPort(addr)
			return net.Listen(network, net.JoinHostPort(host, p))
		}),
	}
	if port != 0 {
		opts = append(opts, kfake.Ports(port))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start the embedded Kafka broker: %w", err)
	}
	return c, nil
}

// redisServer is whichever Redis devstack runs: a real redis-server when one
// is installed, or an in-process stand-in so `make demo` works on a machine
// with nothing but Go. Of the tests, only devstack's own use the stand-in.
type redisServer struct {
	Addr  string
	Real  bool
	stop  func()
	fakes *miniredis.Miniredis
}

func startRedis(ctx context.Context, mode string, port int, log *slog.Logger) (*redisServer, error) {
	if mode != "memory" {
		dir, err := os.MkdirTemp("", "bulkreg-devstack-redis-")
		if err != nil {
			return nil, fmt.Errorf("make a folder for redis-server: %w", err)
		}
		p, err := redisproc.Start(ctx, dir, port)
		switch {
		case err == nil:
			log.Info("redis: started redis-server", "addr", p.Addr)
			return &redisServer{Addr: p.Addr, Real: true, stop: func() { p.Stop(); os.RemoveAll(dir) }}, nil
		case errors.Is(err, redisproc.ErrNotInstalled) && mode == "auto":
			os.RemoveAll(dir)
			log.Warn("redis: redis-server is not installed, using an in-process stand-in (miniredis) for this demo only; install redis-server for the real thing")
		default:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
	}
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
		return nil, fmt.Errorf("start the in-process Redis stand-in: %w", err)
	}
	log.Info("redis: in-process stand-in listening", "addr", m.Addr())
	return &redisServer{Addr: m.Addr(), stop: m.Close, fakes: m}, nil
}
