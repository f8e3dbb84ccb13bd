package sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
)

func describeGroup(brokers []string) (state string, members int, err error) {
	g, err := theGroup(brokers)
	return g.GroupState, len(g.Members), err
}

func theGroup(brokers []string) (kafka.DescribeGroupsResponseGroup, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	resp, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil {
		return kafka.DescribeGroupsResponseGroup{}, err
	}
	if len(resp.Groups) != 1 {
		return kafka.DescribeGroupsResponseGroup{}, fmt.Errorf("%d groups described", len(resp.Groups))
	}
	return resp.Groups[0], resp.Groups[0].Error
}

// groupSays is the group as the broker describes it: its state and each
// member with the partitions it is assigned. A partition left behind is
// then told apart: assigned to no member, to a member no live consumer
// logged as its own (the broker kept one that is gone), or to a live one.
func groupSays(brokers []string) string {
	g, err := theGroup(brokers)
	if err != nil {
		return "the group could not be described: " + err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the group is %s with %d members", g.GroupState, len(g.Members))
	for _, m := range g.Members {
		var parts []int
		for _, t := range m.MemberAssignments.Topics {
			parts = append(parts, t.Partitions...)
		}
		fmt.Fprintf(&b, "; %s from %s, partitions %v", m.MemberID, m.ClientHost, parts)
	}
	return b.String()
}

// partitionOffsets is, per partition of the rows topic, the group's
// committed offset (-1: none) and the end offset.
type partitionOffsets struct {
	committed, end map[int]int64
}

func offsets(ctx context.Context, brokers []string, partitions int) (partitionOffsets, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	topic := bulkreg.DefaultTopic
	var parts []int
	var reqs []kafka.OffsetRequest
	for p := range partitions {
		parts = append(parts, p)
		reqs = append(reqs, kafka.LastOffsetOf(p))
	}
	ends, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return partitionOffsets{}, fmt.Errorf("list offsets: %w", err)
	}
	fetched, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err != nil {
		return partitionOffsets{}, fmt.Errorf("fetch committed offsets: %w", err)
	}
	if fetched.Error != nil {
		return partitionOffsets{}, fmt.Errorf("fetch committed offsets: %w", fetched.Error)
	}
	po := partitionOffsets{committed: map[int]int64{}, end: map[int]int64{}}
	for _, e := range ends.Topics[topic] {
		if e.Error != nil {
			return po, fmt.Errorf("end offset of partition %d: %w", e.Partition, e.Error)
		}
		po.end[e.Partition] = e.LastOffset
	}
	for _, p := range parts {
		po.committed[p] = -1
	}
	for _, c := range fetched.Topics[topic] {
		if c.Error == nil {
			po.committed[c.Partition] = c.CommittedOffset
		}
	}
	return po, nil
}

// groupLag is how many rows lie between the committed offsets and the ends.
func groupLag(ctx context.Context, brokers []string, partitions int) (int64, error) {
	po, err := offsets(ctx, brokers, partitions)
	if err != nil {
		return 0, err
	}
	var lag int64
	for p, end := range po.end {
		lag += end - max(0, po.committed[p])
	}
	return lag, nil
}
