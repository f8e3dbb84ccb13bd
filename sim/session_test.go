package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/bulkreg/bulkreg/internal/testwait"
)

// sessionTimer does what a Kafka coordinator's timers do and kfake, the
// broker under the simulation, misses in two cases.
//
//   - A member whose JoinGroup answer cannot be delivered (its consumer was
//     killed while the join waited, or its own join timed out and it rejoined
//     under a new id) stays in the group with no session timer; once the
//     others have synced, the group is Stable with that member's partitions
//     assigned to it, and no consumer reads them again. A coordinator starts
//     every member's session timer when a join completes, so such a member is
//     dropped one session timeout later. Here a member of a Stable group that
//     has sent nothing for a session timeout (no join, sync, heartbeat or
//     commit) is made to leave (LeaveGroup on its behalf), which begins the
//     rebalance the coordinator would.
//   - kfake restarts a rebalance's deadline at every join and leave, so while
//     members keep coming (each one whose join outlasted its client's
//     deadline rejoins under a new id) a rebalance never ends. A coordinator
//     ends it one rebalance timeout after it began, without the members that
//     have not rejoined. Here the members that have sent no JoinGroup since
//     a rebalance began are made to leave once it has lasted that long; kfake
//     then completes it with those that have. A member first described
//     during the rebalance has joined it: its first join is the one request
//     that cannot name it.
//
// A Stable group's live members heartbeat every heartbeat interval, a
// member that cannot (a paused consumer) is dropped by a coordinator too,
// and a live member rejoins within its drain: nothing a consumer does is
// judged under other rules than Kafka's.
type sessionTimer struct {
	mu     sync.Mutex
	seen   map[string]time.Time // member id → its last request, or when it was first described
	joined map[string]time.Time // member id → its last JoinGroup
}

func newSessionTimer() *sessionTimer {
	return &sessionTimer{seen: map[string]time.Time{}, joined: map[string]time.Time{}}
}

// observe notes a request of a member of the group.
func (s *sessionTimer) observe(req kmsg.Request) {
	var id string
	join := false
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		id, join = r.MemberID, true
	case *kmsg.SyncGroupRequest:
		id = r.MemberID
	case *kmsg.HeartbeatRequest:
		id = r.MemberID
	case *kmsg.OffsetCommitRequest:
		id = r.MemberID
	}
	if id == "" {
		return
	}
	now := time.Now()
	s.mu.Lock()
	s.seen[id] = now
	if join {
		s.joined[id] = now
	}
	s.mu.Unlock()
}

// run looks at the group every interval until ctx ends and drops the members
// a coordinator would have (dropped is told each, with why).
func (s *sessionTimer) run(ctx context.Context, brokers []string, session, rebalance, every time.Duration, dropped func(member, why string)) {
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	t := time.NewTicker(every)
	defer t.Stop()
	var preparing time.Time // when the rebalance under way was first seen
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g, err := theGroup(brokers)
		if err != nil {
			continue
		}
		now := time.Now()
		if g.GroupState != "PreparingRebalance" {
			preparing = time.Time{}
		} else if preparing.IsZero() {
			preparing = now
		}
		ids := make([]string, len(g.Members))
		for i, m := range g.Members {
			ids[i] = m.MemberID
		}
		gone, whys := s.judge(g.GroupState, ids, now, preparing, session, rebalance, every)
		drop := make([]kafka.LeaveGroupRequestMember, len(gone))
		for i, id := range gone {
			drop[i] = kafka.LeaveGroupRequestMember{ID: id}
		}
		if len(drop) == 0 {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := client.LeaveGroup(lctx, &kafka.LeaveGroupRequest{GroupID: group, Members: drop})
		cancel()
		if err != nil || resp.Error != nil {
			continue // the next look tries again
		}
		for i, m := range drop {
			dropped(m.ID, whys[i])
		}
	}
}

// judge answers which of the group's members (ids, as the broker describes
// them in state) a coordinator would drop now, and why; preparing is when
// the rebalance under way was first seen (zero: none is).
func (s *sessionTimer) judge(state string, ids []string, now, preparing time.Time, session, rebalance, every time.Duration) (drop, whys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		last, ok := s.seen[id]
		if !ok {
			// A member described before any request of its own named it:
			// its first join, which waits for the id its answer carries. In
			// a rebalance that join is one of this rebalance's.
			s.seen[id], last = now, now
			if state == "PreparingRebalance" {
				s.joined[id] = now
			}
		}
		switch {
		case state == "Stable" && now.Sub(last) > session:
			whys = append(whys, fmt.Sprintf("silent %.1fs in a stable group", now.Sub(last).Seconds()))
		case !preparing.IsZero() && now.Sub(preparing) > rebalance && s.joined[id].Before(preparing.Add(-every)):
			// The rebalance began after the last look before preparing: a
			// join before that is not one of this rebalance.
			whys = append(whys, fmt.Sprintf("not rejoined in a rebalance of %.1fs", now.Sub(preparing).Seconds()))
		default:
			continue
		}
		drop = append(drop, id)
	}
	return drop, whys
}

// TestSessionTimerJudges: the timers' rules, look by look, without a
// broker: a stable group's silent member goes, a rebalance older than its
// timeout loses the members that did not join it, and a member first
// described during a rebalance (its first join, whose id no request has
// named yet) has joined it, at that look and at the next.
func TestSessionTimerJudges(t *testing.T) {
	const session, rebalance, every = 3 * time.Second, 15 * time.Second, 100 * time.Millisecond
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type look struct {
		state     string
		at        float64 // s after t0
		preparing float64 // s after t0 the rebalance was first seen; < 0: none under way
		want      []string
	}
	for _, tc := range []struct {
		name   string
		heard  map[string]float64 // member → its last request, s after t0; absent: never heard
		joined map[string]float64 // member → its last JoinGroup, s after t0
		looks  []look
	}{
		{name: "a stable group's silent member goes, a heard one stays",
			heard: map[string]float64{"quiet": 0, "talks": 3.5},
			looks: []look{{"Stable", 2, -1, nil}, {"Stable", 4, -1, []string{"quiet"}}}},
		{name: "an old rebalance loses the members that did not join it",
			heard:  map[string]float64{"rejoined": 5, "gone": 5},
			joined: map[string]float64{"rejoined": 5, "gone": 0},
			looks:  []look{{"PreparingRebalance", 10, 1, nil}, {"PreparingRebalance", 16.5, 1, []string{"gone"}}}},
		{name: "a member first described during a rebalance has joined it",
			looks: []look{{"PreparingRebalance", 10, 1, nil}, {"PreparingRebalance", 16.5, 1, nil}, {"PreparingRebalance", 17, 1, nil}}},
		{name: "a member first described in a stable group joins the next rebalance",
			looks: []look{{"Stable", 0.5, -1, nil}, {"PreparingRebalance", 2, 1.9, nil}, {"PreparingRebalance", 17.5, 1.9, []string{"new"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSessionTimer()
			ids := []string{}
			for id, h := range tc.heard {
				s.seen[id] = at(h)
				ids = append(ids, id)
			}
			for id, j := range tc.joined {
				s.joined[id] = at(j)
			}
			if len(ids) == 0 {
				ids = []string{"new"} // a member no request has named
			}
			slices.Sort(ids)
			for _, l := range tc.looks {
				var preparing time.Time
				if l.preparing >= 0 {
					preparing = at(l.preparing)
				}
				got, whys := s.judge(l.state, ids, at(l.at), preparing, session, rebalance, every)
				if !slices.Equal(got, l.want) {
					t.Fatalf("%s at %.1fs: dropped %v (%v), want %v", l.state, l.at, got, whys, l.want)
				}
			}
		})
	}
}

// TestSessionTimerDropsAMemberTheBrokerKept makes the member kfake keeps:
// a JoinGroup whose connection is closed before its answer, while a live
// member is in the group. The join completes with both, the answer to the
// closed connection is lost, the live member (the leader) gives the gone
// one a partition, and the group is Stable. sessionTimer must drop the gone
// member a session timeout later, so the live one is given every partition,
// and must never drop the live one.
func TestSessionTimerDropsAMemberTheBrokerKept(t *testing.T) {
	const topic, session = "session-timer", time.Second
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topic), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	timer := newSessionTimer()
	c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		timer.observe(req)
		return nil, nil, false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var dropped []string
	var mu sync.Mutex
	go timer.run(ctx, brokers, session, 2*time.Second, 100*time.Millisecond, func(member, _ string) {
		mu.Lock()
		dropped = append(dropped, member)
		mu.Unlock()
	})

	// The live member rejoins at its next heartbeat, by when the broker has
	// read the gone member's closed connection: the answer to its join is
	// then the one that cannot be delivered.
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{ID: group, Brokers: brokers, Topics: []string{topic},
		SessionTimeout: session, HeartbeatInterval: 400 * time.Millisecond, RebalanceTimeout: 2 * time.Second, JoinGroupBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	type held struct {
		member string
		parts  int
	}
	gens := make(chan held, 16)
	go func() {
		for {
			gen, err := cg.Next(ctx)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
					return
				}
				continue
			}
			gens <- held{gen.MemberID, len(gen.Assignments[topic])}
		}
	}()
	next := func(what string) held {
		t.Helper()
		select {
		case h := <-gens:
			return h
		case <-ctx.Done():
			t.Fatalf("no generation %s", what)
			return held{}
		}
	}
	if h := next("with the live member alone"); h.parts != 2 {
		t.Fatalf("the live member alone holds %d partitions, want 2", h.parts)
	}

	// The gone member: a join written, its connection closed at once.
	conn, err := net.Dial("tcp", brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	meta := (&kmsg.ConsumerMemberMetadata{Topics: []string{topic}}).AppendTo(nil)
	join := &kmsg.JoinGroupRequest{Version: 3, Group: group, SessionTimeoutMillis: int32(session / time.Millisecond), RebalanceTimeoutMillis: 2000,
		ProtocolType: "consumer", Protocols: []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta}, {Name: "roundrobin", Metadata: meta}}}
	if _, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("gone")).AppendRequest(nil, join, 1)); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	live := next("after the gone member's join")
	if live.parts != 1 {
		t.Fatalf("with the gone member in the group the live one holds %d partitions, want 1 (the broker kept it with the other)", live.parts)
	}
	if h := next("after the gone member was dropped"); h.parts != 2 {
		t.Fatalf("after the gone member was dropped the live one holds %d partitions, want 2", h.parts)
	}
	// dropped is told once the LeaveGroup is answered, which may be after
	// the live member's next generation began.
	testwait.For(t, 5*time.Second, "sessionTimer to tell the gone member dropped", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(dropped) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(dropped) != 1 || dropped[0] == live.member {
		t.Fatalf("sessionTimer dropped %v, want the gone member only (the live one is %s)", dropped, live.member)
	}
}
