package testkafka

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka4Removed are the request versions Apache Kafka 4.0 no longer accepts
// (KIP-896), as the lowest version of each API a 4.0.0 broker takes: the
// "Versions 0-N were removed in Apache Kafka 4.0" notes of the request
// schemas (clients/src/main/resources/common/message/*Request.json at 4.0.0).
// JoinGroup v0-1 came back in 4.0.1 and 4.1.0 (KAFKA-19444); it is refused
// here, as 4.0.0 does, which is the stricter broker. Metadata, FindCoordinator,
// Heartbeat, SyncGroup, LeaveGroup, DescribeGroups, ListGroups and
// ApiVersions lost no version.
var Kafka4Removed = map[int16]int16{
	0:  3, // Produce: v0-2 (still advertised from 0, see KAFKA-18659, but refused)
	1:  4, // Fetch: v0-3
	2:  1, // ListOffsets: v0
	8:  2, // OffsetCommit: v0-1
	9:  1, // OffsetFetch: v0
	11: 2, // JoinGroup: v0-1 (4.0.0)
	19: 2, // CreateTopics: v0-1
	20: 1, // DeleteTopics: v0
	23: 2, // OffsetForLeaderEpoch: v0-1
	29: 1, // DescribeAcls: v0
	30: 1, // CreateAcls: v0
	31: 1, // DeleteAcls: v0
	32: 1, // DescribeConfigs: v0
	34: 1, // AlterReplicaLogDirs: v0
	35: 1, // DescribeLogDirs: v0
	38: 1, // CreateDelegationToken: v0
	39: 1, // RenewDelegationToken: v0
	40: 1, // ExpireDelegationToken: v0
	41: 1, // DescribeDelegationToken: v0
}

// Refusal is a request a Kafka4 broker refused for its version.
type Refusal struct {
	Key, Version int16
	Name         string
}

func (r Refusal) String() string { return fmt.Sprintf("%s v%d", r.Name, r.Version) }

// Kafka4 is the embedded broker speaking as Apache Kafka 4.0 does about old
// protocol versions: its ApiVersions answer starts each API at the lowest
// version 4.0 keeps, and a request of a removed version closes the
// connection, as a 4.0 broker does (it logs UnsupportedVersionException and
// drops the client). Refused lists every such request, so a test can assert
// that a client sent none, rather than only that it got through.
type Kafka4 struct {
	Brokers []string
	mu      sync.Mutex
	refused []Refusal
}

// StartKafka4 runs a one-broker Kafka4 with the given topics, each of
// partitions partitions, and stops it when the test ends; opts are kfake's
// (GroupMinSessionTimeout, for instance).
func StartKafka4(t testing.TB, partitions int32, topics []string, opts ...kfake.Opt) *Kafka4 {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...)}, opts...)...)
	if err != nil {
		t.Fatalf("start embedded Kafka broker: %v", err)
	}
	t.Cleanup(c.Close)
	k := &Kafka4{Brokers: c.ListenAddrs()}
	// What the broker implements, asked before the control below is in
	// place: the answer the control then narrows.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := (&kafka.Client{Addr: kafka.TCP(k.Brokers...)}).ApiVersions(ctx, &kafka.ApiVersionsRequest{})
	if err != nil {
		t.Fatalf("ask the embedded broker its API versions: %v", err)
	}
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(resp.ApiKeys))
	for _, a := range resp.ApiKeys {
		key := kmsg.NewApiVersionsResponseApiKey()
		key.ApiKey, key.MinVersion, key.MaxVersion = int16(a.ApiKey), int16(a.MinVersion), int16(a.MaxVersion)
		if low, ok := Kafka4Removed[key.ApiKey]; ok && key.ApiKey != 0 {
			key.MinVersion = max(key.MinVersion, low)
		}
		if key.MinVersion <= key.MaxVersion {
			keys = append(keys, key)
		}
	}
	c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		key, version := req.Key(), req.GetVersion()
		if low, ok := Kafka4Removed[key]; ok && version < low {
			name := kmsg.NameForKey(key)
			k.mu.Lock()
			k.refused = append(k.refused, Refusal{Key: key, Version: version, Name: name})
			k.mu.Unlock()
			return nil, fmt.Errorf("%s v%d was removed in Kafka 4.0 (KIP-896)", name, version), true
		}
		if av, ok := req.(*kmsg.ApiVersionsRequest); ok && av.Version <= 5 {
			// The key list with 4.0's minima; no features (KIP-584),
			// which neither kafka-go nor librdkafka reads. A version
			// above kfake's is left to kfake, which answers it the way
			// a broker does (KIP-511).
			out := av.ResponseKind().(*kmsg.ApiVersionsResponse)
			out.ApiKeys = slices.Clone(keys)
			return out, nil, true
		}
		return nil, nil, false
	})
	return k
}

// Refused returns the requests refused so far for their version.
func (k *Kafka4) Refused() []Refusal {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.refused)
}
