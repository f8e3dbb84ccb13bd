package consumer

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/throttle"
)

// Config holds the consumer's settings. A zero field means its default:
// the production value DefaultConfig lists, or, where the field says so, a
// value derived from other settings or from the throttle's policy. New fills
// them in (WithDefaults shows the result); tests shrink the durations.
type Config struct {
	Brokers []string // bootstrap brokers; required
	Topic   string   // rows topic; dead letters go to bulkreg.DLQTopic(Topic); 0: "product-registrations"
	Group   string   // consumer group id; 0: "bulkreg-registrar"
	// KafkaDialer and KafkaTransport carry SASL and TLS to the brokers (the
	// group and readers dial, the dead-letter writer uses the transport);
	// nil: kafka-go's plain TCP defaults.
	KafkaDialer    *kafka.Dialer
	KafkaTransport kafka.RoundTripper

	// SessionTimeout is how long the coordinator waits without a heartbeat
	// before it moves a member's partitions: how soon a crashed consumer's
	// work resumes elsewhere. 0: 10 s.
	SessionTimeout time.Duration
	// HeartbeatInterval is how often a member tells the coordinator it is
	// alive, and so how soon it notices a rebalance. Keep it ≤
	// SessionTimeout/3. 0: 1 s, or SessionTimeout/3 when that is shorter.
	HeartbeatInterval time.Duration
	// RebalanceTimeout is how long the coordinator waits for members to
	// rejoin. A member drains before rejoining, so it must exceed
	// DrainTimeout. 0: 60 s.
	RebalanceTimeout time.Duration
	// CommitInterval is how often finished offsets are committed. A crash
	// redelivers at most this much finished work (harmless: replays). 0: 1 s.
	CommitInterval time.Duration
	// DrainTimeout bounds a rebalance or a shutdown: calls already made get
	// this long to be answered and recorded; then they are cancelled and
	// their rows given back. Rows still waiting for a slot give it back at
	// once. Heartbeats stop when the generation ends, so the drain must end
	// while the coordinator still counts the member in: DrainTimeout +
	// 2 × HeartbeatInterval ≤ SessionTimeout (MaxDrainTimeout), or another
	// member could be given the partitions, and call their rows, while this
	// one is still calling them. 0: MaxDrainTimeout (8 s by default).
	DrainTimeout time.Duration

	// MaxInFlight caps rows read and not finished, over all partitions. 0: 20,000.
	MaxInFlight int
	// MaxInFlightPerPartition caps rows read and not finished per
	// partition; reading that partition pauses at the cap. A seller's rows
	// behind other sellers' uploads on the same partition are reached only
	// within the cap, and a seller whose upload straddles it gets the rest
	// only as earlier rows finish, which stretches its run: keep it well
	// above the rows a partition holds at once. 0: 10,000.
	MaxInFlightPerPartition int
	// SellerConcurrency caps the rows of one seller's batch (its rows
	// holding a throttle slot or calling the API at once); the rest wait in
	// the seller's runner without costing Redis calls. 0: the throttle's limit per window; more slots
	// than that are at least one window away anyway.
	SellerConcurrency int

	// MaxConcurrentCalls caps calls to the registration API in progress at
	// once; give the registry client at least as many connections, so a call
	// never queues inside it. 0: 64.
	MaxConcurrentCalls int
	// MaxDueNow caps the slots due now that this consumer holds and has not
	// yet started calling (rows asking the throttle count too); the rest of
	// the rows wait without a slot. It should be about what the consumer
	// can call within MaxLateness: a slot due now that waits longer is lost
	// to its seller (the next window's slots are placed after it) and the
	// row takes another. 0: 64. It is never more than MaxConcurrentCalls.
	MaxDueNow int
	// MaxLateness is how late after its slot a call may still start (waiting
	// for one of MaxConcurrentCalls, or a late timer under load). The
	// throttle's margin absorbs the delay between the slot and the moment
	// the API counts the call, and a row confirms its slot one to two
	// MaxLateness before it, which the throttle's hold after a loss of
	// Redis's data must cover: 2 × MaxLateness ≤ LossHold − Window − Margin
	// (New checks it). 0: half the throttle's margin.
	MaxLateness time.Duration
	// CallTimeout is the registry client's timeout of one call
	// (registryclient.Options.Timeout, --registry-timeout): a call is
	// abandoned after it, but the API does not see the client leave and
	// counts the call when it gets to handle it, so a call may be counted up
	// to twice this long after it starts (countedWithin). The throttle's
	// log holds every call's latest count that far after its send
	// (ThrottlePolicy), whether or not its consumer lives to hear its
	// answer. 0: 10 s, the client's default.
	CallTimeout time.Duration
	// ClockSync is how often Redis's clock is read in a round trip of its
	// own (Deps.RedisTime), to place slots on this process's clock. 0:
	// 100 ms; negative: never.
	ClockSync time.Duration
	// UploadPresenceSlack is how long before a row was queued Redis must
	// have lost nothing of its upload's hash slot for an absent upload to
	// make the row a bad message (consumer/runstore.go, uploadDoor). 0:
	// uploadstatus.DefaultPresenceSlack (10 min).
	UploadPresenceSlack time.Duration
	// KeepWarm is how often, while calls pause and rows wait for their
	// slots, the connections the last calls used are used again (a request
	// that registers nothing, see Registry.Warm), so neither the API nor a proxy in
	// front closes them as idle between two windows. A call that must
	// connect first is late by the connect time, unseen. 0: 20 s; negative
	// turns it off.
	KeepWarm time.Duration

	// MaxRateLimited is how many 429s one row may receive before it is
	// dead-lettered. Each 429 blocks the seller for Retry-After, so this only
	// ends a disagreement with the API that does not go away. 0: 20.
	MaxRateLimited int
	// RedisRetryMin and RedisRetryMax bound the exponential backoff while
	// Redis does not answer (taking a slot, recording a result). 0: 100 ms
	// and 5 s.
	RedisRetryMin, RedisRetryMax time.Duration
	// RedisProbeInterval is how often Redis is pinged to learn that it is
	// down (no registry call is made then) or back. 0: 1 s.
	RedisProbeInterval time.Duration

	// SellerProbeMin and SellerProbeMax bound the growing interval between
	// the probes of a seller the API fails (runner path): its runner holds
	// it and calls one of its rows per interval until one is answered. 0:
	// 1 s and 15 s, as the fleet circuit's probes (rows resume within
	// about 15 s of the API answering the seller again), the longest at
	// most half the window and margin.
	SellerProbeMin, SellerProbeMax time.Duration
	// SellerHoldLimit is how long a row of a seller the API fails is held,
	// and how long the fleet's circuit may stay open, before the rows held
	// are dead-lettered for an operator (an alert fires then). 0: 1 h.
	SellerHoldLimit time.Duration

	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the production values, with the fields derived
// from the throttle's policy (SellerConcurrency, MaxLateness) for its
// production policy, 100 calls per minute with a 250 ms margin.
func DefaultConfig() Config {
	return Config{
		Topic:                   bulkreg.DefaultTopic,
		Group:                   "bulkreg-registrar",
		SessionTimeout:          10 * time.Second,
		HeartbeatInterval:       time.Second,
		RebalanceTimeout:        60 * time.Second,
		CommitInterval:          time.Second,
		DrainTimeout:            MaxDrainTimeout(10*time.Second, time.Second), // 8 s
		MaxInFlight:             20000,
		MaxInFlightPerPartition: 10000,
		SellerConcurrency:       100,
		MaxConcurrentCalls:      64,
		MaxDueNow:               64,
		MaxLateness:             125 * time.Millisecond,
		CallTimeout:             10 * time.Second,
		ClockSync:               100 * time.Millisecond,
		KeepWarm:                20 * time.Second,
		MaxRateLimited:          20,
		RedisRetryMin:           100 * time.Millisecond,
		RedisRetryMax:           5 * time.Second,
		RedisProbeInterval:      time.Second,
		SellerProbeMin:          time.Second,
		SellerProbeMax:          15 * time.Second,
		SellerHoldLimit:         time.Hour,
	}
}

// MaxDrainTimeout is the longest drain a session timeout allows: the
// coordinator last heard from the member up to one heartbeat interval before
// its generation ended, and one more interval is left for the last commit
// and the request that leaves or rejoins the group.
func MaxDrainTimeout(sessionTimeout, heartbeatInterval time.Duration) time.Duration {
	return sessionTimeout - 2*heartbeatInterval
}

// WithDefaults returns c with every zero field set to its default, for a
// throttle with policy p, as New does. With a zero p, the fields derived
// from it take DefaultConfig's values.
func (c Config) WithDefaults(p throttle.Policy) Config {
	d := DefaultConfig()
	if p.Limit > 0 {
		d.SellerConcurrency = p.Limit
		d.MaxLateness = max(p.Margin/2, time.Millisecond)
	}
	if w := p.Window + p.Margin; w > 0 {
		// The seller's page reads a seller's failed calls as failing until
		// a window and margin after the last (upload.HoldFailing): probes of
		// a held seller at most half that apart keep its notice up for as
		// long as it is held, under a short window too.
		d.SellerProbeMax = min(d.SellerProbeMax, w/2)
	}
	// cmp.Or: a zero field takes the default. The defaults of
	// HeartbeatInterval, DrainTimeout and RedisRetryMax follow the fields
	// set before them.
	c.Topic = cmp.Or(c.Topic, d.Topic)
	c.Group = cmp.Or(c.Group, d.Group)
	c.SessionTimeout = cmp.Or(c.SessionTimeout, d.SessionTimeout)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, min(d.HeartbeatInterval, c.SessionTimeout/3))
	c.RebalanceTimeout = cmp.Or(c.RebalanceTimeout, d.RebalanceTimeout)
	c.CommitInterval = cmp.Or(c.CommitInterval, d.CommitInterval)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, MaxDrainTimeout(c.SessionTimeout, c.HeartbeatInterval))
	c.MaxInFlight = cmp.Or(c.MaxInFlight, d.MaxInFlight)
	c.MaxInFlightPerPartition = cmp.Or(c.MaxInFlightPerPartition, d.MaxInFlightPerPartition)
	c.SellerConcurrency = cmp.Or(c.SellerConcurrency, d.SellerConcurrency)
	c.MaxConcurrentCalls = cmp.Or(c.MaxConcurrentCalls, d.MaxConcurrentCalls)
	// More slots due now than calls that can start at once would only wait.
	c.MaxDueNow = min(cmp.Or(c.MaxDueNow, d.MaxDueNow), c.MaxConcurrentCalls)
	c.MaxLateness = cmp.Or(c.MaxLateness, d.MaxLateness)
	c.CallTimeout = cmp.Or(c.CallTimeout, d.CallTimeout)
	c.ClockSync = cmp.Or(c.ClockSync, d.ClockSync)
	c.KeepWarm = cmp.Or(c.KeepWarm, d.KeepWarm)
	c.MaxRateLimited = cmp.Or(c.MaxRateLimited, d.MaxRateLimited)
	c.RedisRetryMin = cmp.Or(c.RedisRetryMin, d.RedisRetryMin)
	c.RedisRetryMax = cmp.Or(c.RedisRetryMax, max(d.RedisRetryMax, c.RedisRetryMin))
	c.RedisProbeInterval = cmp.Or(c.RedisProbeInterval, d.RedisProbeInterval)
	c.SellerProbeMin = cmp.Or(c.SellerProbeMin, d.SellerProbeMin)
	c.SellerProbeMax = cmp.Or(c.SellerProbeMax, max(d.SellerProbeMax, c.SellerProbeMin))
	c.SellerHoldLimit = cmp.Or(c.SellerHoldLimit, d.SellerHoldLimit)
	return c
}

// ThrottlePolicy is the throttle policy for limit calls per window with
// margin that a consumer with these settings needs:
//   - MaxWait is the session timeout: slots a crashed consumer reserved
//     stay in the log at their latest counts (it may have made those calls),
//     and reserving at most a session timeout ahead keeps them from delaying
//     the partition's next owner by more than the session timeout, the
//     reach (SendWithin + CallTimeout) and one window (W′) after the crash;
//   - LossHold covers the calls whose slots were confirmed just before Redis
//     lost its data: W′ + 2 × MaxLateness, at least the throttle's default;
//   - SendWithin is MaxLateness: a call starts no later than that after
//     its slot, or not at all;
//   - CallTimeout is how long after it starts a call may still be counted,
//     two call timeouts (countedWithin). With SendWithin it places every
//     call's latest count, which the throttle's log holds from the
//     reservation on, and the throttle adds it to the hold after a loss,
//     for the calls in flight then. With the defaults the latest count is
//     the slot + 20.125 s, and the hold after a loss is W + 2 × margin +
//     20 s.
func (c Config) ThrottlePolicy(limit int, window, margin time.Duration) throttle.Policy {
	p := throttle.Policy{Kind: throttle.Sliding, Limit: limit, Window: window, Margin: margin}
	c = c.WithDefaults(p)
	p.MaxWait = c.SessionTimeout
	p.LossHold = window + margin + max(margin, 2*c.MaxLateness)
	p.CallTimeout = countedWithin(c.CallTimeout)
	p.SendWithin = c.MaxLateness
	return p
}

// Validate reports every setting that cannot work, naming the flag where
// the timeouts must agree. Zero fields are checked as New fills them in, for
// a throttle with the production policy.
func (c Config) Validate() error { return c.validate(throttle.Policy{}) }

func (c Config) validate(p throttle.Policy) error {
	c = c.WithDefaults(p)
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("no Kafka broker address given"))
	}
	for name, d := range map[string]time.Duration{"session timeout": c.SessionTimeout, "heartbeat interval": c.HeartbeatInterval,
		"rebalance timeout": c.RebalanceTimeout, "commit interval": c.CommitInterval, "drain timeout": c.DrainTimeout,
		"maximum lateness": c.MaxLateness, "call timeout": c.CallTimeout, "minimum Redis retry": c.RedisRetryMin, "maximum Redis retry": c.RedisRetryMax, "Redis probe interval": c.RedisProbeInterval,
		"seller probe interval": c.SellerProbeMin, "longest seller probe interval": c.SellerProbeMax, "seller hold limit": c.SellerHoldLimit} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("the %s must not be negative (0 means its default), got %s", name, d))
		}
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		errs = append(errs, fmt.Errorf("the heartbeat interval (%s) must be shorter than the session timeout (%s)", c.HeartbeatInterval, c.SessionTimeout))
	} else if MaxDrainTimeout(c.SessionTimeout, c.HeartbeatInterval) <= 0 {
		errs = append(errs, fmt.Errorf("--session-timeout (%s) must be longer than two --heartbeat-interval (%s), so a member has time to drain before the group evicts it",
			c.SessionTimeout, c.HeartbeatInterval))
	} else if c.DrainTimeout > MaxDrainTimeout(c.SessionTimeout, c.HeartbeatInterval) {
		errs = append(errs, fmt.Errorf("--drain-timeout (%s) plus two --heartbeat-interval (%s) must not exceed --session-timeout (%s): "+
			"heartbeats stop while a member drains, so the group would evict it and give its partitions to another member while its calls are still in progress; "+
			"shorten --drain-timeout to at most %s or lengthen --session-timeout",
			c.DrainTimeout, c.HeartbeatInterval, c.SessionTimeout, MaxDrainTimeout(c.SessionTimeout, c.HeartbeatInterval)))
	}
	if c.DrainTimeout > 0 && c.RebalanceTimeout <= c.DrainTimeout {
		errs = append(errs, fmt.Errorf("--rebalance-timeout (%s) must be longer than --drain-timeout (%s): a member drains before it rejoins the group",
			c.RebalanceTimeout, c.DrainTimeout))
	}
	if c.MaxRateLimited < 0 {
		errs = append(errs, fmt.Errorf("the most 429s per row must not be negative (0 means 20), got %d", c.MaxRateLimited))
	}
	if c.SellerProbeMax < c.SellerProbeMin {
		errs = append(errs, fmt.Errorf("--seller-probe-max (%s) must not be below --seller-probe-min (%s)", c.SellerProbeMax, c.SellerProbeMin))
	}
	if c.MaxDueNow < 0 {
		errs = append(errs, fmt.Errorf("the most slots due now must not be negative (0 means its default), got %d", c.MaxDueNow))
	}
	if c.MaxInFlight < 0 || c.MaxInFlightPerPartition < 0 || c.SellerConcurrency < 0 || c.MaxConcurrentCalls < 0 {
		errs = append(errs, fmt.Errorf("the in-flight caps, the seller concurrency and the concurrent calls must not be negative (0 means their defaults), got %d, %d, %d and %d",
			c.MaxInFlight, c.MaxInFlightPerPartition, c.SellerConcurrency, c.MaxConcurrentCalls))
	}
	if g := p.Global; g.On() && c.MaxLateness <= g.Tolerance {
		errs = append(errs, fmt.Errorf("--max-lateness (%s) must be longer than the app-wide limit's tolerance (%s, a quarter of the margin): "+
			"a call is made at the later of its seller and app-wide slots, up to that much after the earlier, and that counts in its lateness; "+
			"leave --max-lateness at its default (half the margin) or raise it", c.MaxLateness, g.Tolerance))
	}
	if p.LossHold > 0 && 2*c.MaxLateness > p.LossHold-p.Window-p.Margin {
		errs = append(errs, fmt.Errorf("two --max-lateness (%s) must not exceed the throttle's hold after a loss of Redis's data beyond its window and margin (%s): "+
			"a row confirms its slot up to that long before calling, so a call confirmed just before a loss could share a window with the first calls after it; "+
			"shorten --max-lateness to at most %s (half the margin is the default)",
			c.MaxLateness, p.LossHold-p.Window-p.Margin, (p.LossHold-p.Window-p.Margin)/2))
	}
	if need := countedWithin(c.CallTimeout); p.Limit > 0 && p.CallTimeout < need {
		errs = append(errs, fmt.Errorf("the throttle's log holds each call's latest count %s after its send, "+
			"but with --registry-timeout %s a call may be counted up to %s after it: "+
			"build the throttle's policy with Config.ThrottlePolicy, or shorten --registry-timeout", p.CallTimeout, c.CallTimeout, need))
	}
	return errors.Join(errs...)
}
