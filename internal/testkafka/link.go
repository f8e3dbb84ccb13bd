package testkafka

import (
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/bulkreg/bulkreg/internal/testproxy"
)

// StartBehindLink runs a one-broker cluster with the given topics that
// clients reach only through the returned link: the broker advertises the
// link's address in its metadata, so every connection a client opens, the
// bootstrap one and those to the partition leaders and the group
// coordinator, passes the link, and the link's blackhole freezes the broker
// as a network partition would (connections stay open, nothing answers).
// The link's Addr is the bootstrap address. Both stop when the test ends.
func StartBehindLink(t testing.TB, partitions int32, topics []string, opts ...kfake.Opt) *testproxy.Link {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	link, err := testproxy.NewLink(t, ln.Addr().String())
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	advertised, err := net.ResolveTCPAddr("tcp", link.Addr())
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	listen := func(string, string) (net.Listener, error) { return advertisedListener{ln, advertised}, nil }
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...), kfake.AllowAutoTopicCreation(), kfake.ListenFn(listen)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		ln.Close()
		t.Fatalf("start embedded Kafka broker: %v", err)
	}
	t.Cleanup(c.Close)
	return link
}

// advertisedListener accepts on a real socket and says its address is
// another one: kfake advertises what Addr says.
type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }
