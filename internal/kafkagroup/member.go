// Package kafkagroup is a member of a Kafka consumer group that hands on the
// rows it reads one at a time and commits each partition only up to its
// lowest row not yet finished, naming the rows finished above it in the
// commit's metadata: no row is lost, and the partition's next owner passes
// over the rows finished above the commit point. A row finished after the
// last commit, or not finished at all, is read again.
//
// # Why kafka-go's ConsumerGroup/Generation API and not kafka.Reader
//
// kafka.Reader with a GroupID is the usual way to consume a group in kafka-go,
// and it is wrong for this workload on three counts:
//
//   - CommitMessages commits offset+1 of whatever message it is given. Rows
//     finish out of order (a seller waiting for its window, a retry in
//     backoff), so committing a finished row can step over an unfinished one
//     below it, and a crash then loses that row.
//   - It has no per-partition pause: reading stops for all partitions or none,
//     so a cap on rows in flight cannot be kept per partition.
//   - Its commits are sent by a background loop that can deliver an old
//     generation's commit after a rebalance, for a partition that another
//     member now owns.
//
// With ConsumerGroup/Generation, this package owns those three decisions: each
// generation gives the partitions assigned to this member with their committed
// offsets; one goroutine per partition (Generation.Start) reads it through a
// partition-bound kafka.Reader that stops being asked for messages when the
// partition's cap is reached; an offsets tracker per partition knows the
// lowest row not yet finished, and only that is committed (an OffsetCommit
// tagged with this generation's id and member, which the broker refuses once
// the generation is over), with the rows finished above it named in the
// commit's metadata so the next owner passes over them (offsets.go). The
// generation's context ends at a rebalance: the rows handed on are told
// (Partition.Ctx), work begun on them gets DrainTimeout to finish
// (Partition.FinishCtx), a last commit is made while the generation is
// still current, and only then does the member rejoin. No heartbeat is sent
// meanwhile, so the caller keeps DrainTimeout + 2 × HeartbeatInterval
// within SessionTimeout (the consumer's Config.Validate does): the member is
// never evicted while a row is still being worked on. Rows not finished by
// then are read again by the next owner.
package kafkagroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// Config is what a member needs to know; every field but Dialer and
// Transport is required.
type Config struct {
	Brokers []string
	Topic   string
	Group   string
	// Dialer and Transport carry SASL and TLS to the brokers (nil: plain).
	Dialer    *kafka.Dialer
	Transport kafka.RoundTripper

	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration
	// DrainTimeout is how long a revoked partition waits for its rows to
	// finish or be given back before its last commit.
	DrainTimeout   time.Duration
	CommitInterval time.Duration

	// MaxInFlight and MaxInFlightPerPartition cap the rows read and not
	// finished; reading pauses at either.
	MaxInFlight             int
	MaxInFlightPerPartition int
}

// Metrics are the member's own; the caller names and registers them. Every
// field is required.
type Metrics struct {
	InFlight   prometheus.Gauge       // rows handed on and not finished or given back
	Abandoned  prometheus.Counter     // rows given back
	Rebalances prometheus.Counter     // generations joined
	Commits    *prometheus.CounterVec // by one label: "ok" or "error"
}

// Hooks are how rows leave the member. Both are required.
type Hooks struct {
	// Handle takes a row and must, in time, finish it or give it back.
	Handle func(*Row)
	// Ready is asked for each message fetched before it is handed on, next
	// to the in-flight caps: reading pauses until it answers (the fleet's
	// circuit breaker); false when ctx ended.
	Ready func(ctx context.Context) bool
}

// Member is one member of the group: one reader per assigned partition, the
// in-flight caps and the commits.
type Member struct {
	cfg   Config
	log   *slog.Logger
	m     Metrics
	hooks Hooks

	global chan struct{} // one token per row in flight, over all partitions
	// rows counts the rows handed on and not finished or given back (the
	// tokens count the partition readers waiting for a message too).
	rows  atomic.Int64
	kafka *kafka.Client // commits with their metadata (offsets.go)

	mu    sync.Mutex
	parts map[int]*Partition // partitions of the current generation
	// finished holds, per partition this member owned, the rows it finished
	// above its last commit point: a row below them was unfinished when the
	// partition was revoked, so the commit stopped there. When the
	// partition comes back, those rows are read again and passed over
	// instead of handled twice (for the consumer, a row dead-lettered after
	// its attempts would otherwise be called again and could register,
	// leaving it both registered and in the dead-letter topic).
	finished map[int][]int64

	// generation is the ID of the group generation this member is in; 0
	// between generations (joining, rebalancing, or cut off from the
	// coordinator): Kafka numbers generations from 1.
	generation atomic.Int32

	// closing counts the partition readers of ended generations still
	// closing: Run waits for them, so nothing of the member outlives it.
	closing sync.WaitGroup
}

// Partition is one assigned partition within one generation.
type Partition struct {
	topic string
	id    int
	offs  *offsets

	tokens chan struct{} // one per row in flight on this partition
	// hwm is the partition's high watermark as of the last fetch (-1 before
	// the first), for the lag metric.
	hwm atomic.Int64

	// ctx ends when the partition is revoked (rebalance) or the member
	// stops: its rows stop waiting.
	ctx    context.Context
	cancel context.CancelFunc
	// finishCtx ends at most DrainTimeout later: work begun on a row must
	// end by then, or the row is left unfinished.
	finishCtx    context.Context
	finishCancel context.CancelFunc

	rows sync.WaitGroup // rows handed out and not yet finished or given back
}

// ID is the partition's number.
func (p *Partition) ID() int { return p.id }

// Ctx ends when the partition is revoked (rebalance) or the member stops:
// its rows stop waiting.
func (p *Partition) Ctx() context.Context { return p.ctx }

// FinishCtx ends at most DrainTimeout after Ctx (sooner once every row let
// go): work already begun on a row must end by then, or the row is left
// unfinished and read again by the partition's next owner.
func (p *Partition) FinishCtx() context.Context { return p.finishCtx }

// Lag is the partition's high watermark as of its last fetch less its
// commit point; ok is false before the first fetch.
func (p *Partition) Lag() (lag int64, ok bool) {
	hwm := p.hwm.Load()
	cp, cpOK := p.offs.commitPoint()
	if hwm < 0 || !cpOK {
		return 0, false
	}
	return max(hwm-cp, 0), true
}

// Row is one message read from a partition, from reading until it is
// finished (its offset may be committed) or given back (it will be read
// again).
type Row struct {
	Msg  kafka.Message
	part *Partition
	g    *Member
	once sync.Once
}

// Partition is the partition the row was read from.
func (r *Row) Partition() *Partition { return r.part }

// Finish marks the row done: its offset may be committed.
func (r *Row) Finish() {
	r.once.Do(func() {
		if !r.part.offs.finish(r.Msg.Offset) {
			r.g.log.Error("finished a row the offsets tracker does not hold; this is a bug",
				"partition", r.part.id, "offset", r.Msg.Offset)
		}
		r.g.done(r.part)
	})
}

// GiveBack leaves the row unfinished: its offset is not committed past it,
// and the partition's next owner reads it again.
func (r *Row) GiveBack() {
	r.once.Do(func() {
		r.g.m.Abandoned.Inc()
		r.g.done(r.part)
	})
}

func (g *Member) done(p *Partition) {
	g.release(p)
	g.rows.Add(-1)
	g.m.InFlight.Dec()
	p.rows.Done()
}

// RowsInFlight counts the rows handed on and not yet finished or given back.
func (g *Member) RowsInFlight() int { return int(g.rows.Load()) }

// New makes a member; Run joins the group.
func New(cfg Config, log *slog.Logger, m Metrics, h Hooks) *Member {
	return &Member{cfg: cfg, log: log, m: m, hooks: h, global: make(chan struct{}, cfg.MaxInFlight), parts: map[int]*Partition{}, finished: map[int][]int64{},
		kafka: &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: cfg.Transport}}
}

// Run is a member of the group until ctx ends, then drains its partitions,
// makes a last commit and leaves. A join that fails is tried again, after a
// heartbeat interval, until ctx ends: Run never returns for it.
func (g *Member) Run(ctx context.Context) error {
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                g.cfg.Group,
		Brokers:           g.cfg.Brokers,
		Dialer:            g.cfg.Dialer,
		Topics:            []string{g.cfg.Topic},
		SessionTimeout:    g.cfg.SessionTimeout,
		HeartbeatInterval: g.cfg.HeartbeatInterval,
		RebalanceTimeout:  g.cfg.RebalanceTimeout,
		JoinGroupBackoff:  g.cfg.HeartbeatInterval,
		StartOffset:       kafka.FirstOffset,
		ErrorLogger:       kafka.LoggerFunc(func(format string, args ...any) { g.log.Debug("kafka-go: " + fmt.Sprintf(format, args...)) }),
	})
	if err != nil {
		return fmt.Errorf("join consumer group %q: %w", g.cfg.Group, err)
	}
	// Closing the group ends the current generation: its partitions drain
	// and make their last commit before Close returns and the member leaves.
	closed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		cg.Close()
		close(closed)
	})
	defer func() {
		if stop() { // ctx never ended: Run is returning on its own
			cg.Close()
			close(closed)
		}
		<-closed
		g.closing.Wait()
	}()
	for {
		gen, err := cg.Next(ctx)
		switch {
		case errors.Is(err, kafka.ErrGroupClosed) || ctx.Err() != nil:
			return nil
		case err != nil:
			// kafka-go retries joining by itself, after JoinGroupBackoff.
			g.log.Warn("consumer group: could not join, retrying", "group", g.cfg.Group, "err", err)
			continue
		}
		g.startGeneration(gen)
	}
}

// startGeneration starts one reader per assigned partition and the
// committer, all bound to the generation.
func (g *Member) startGeneration(gen *kafka.Generation) {
	g.m.Rebalances.Inc()
	assigned := gen.Assignments[g.cfg.Topic]
	ids := make([]int, 0, len(assigned))
	var readers sync.WaitGroup
	parts := make([]*Partition, 0, len(assigned))
	// What the group has committed is the assignment's offset. Taken here,
	// before any reader starts: a commit loop that read the commit points
	// when it got to run could find rows already finished and never commit
	// them.
	committed := map[int]int64{}
	metas := map[int]string{}
	all := make([]int, 0, len(assigned))
	for _, pa := range assigned {
		all = append(all, pa.ID)
	}
	done := g.committedDone(context.Background(), all)
	for _, pa := range assigned {
		p := g.newPartition(pa, done[pa.ID])
		metas[pa.ID] = encodeDone(done[pa.ID])
		parts = append(parts, p)
		ids = append(ids, pa.ID)
		if pa.Offset >= 0 {
			committed[pa.ID] = pa.Offset
		}
		readers.Add(1)
		gen.Start(func(ctx context.Context) {
			defer readers.Done()
			g.readPartition(ctx, p, pa.Offset)
		})
	}
	g.mu.Lock()
	g.parts = map[int]*Partition{}
	for _, p := range parts {
		g.parts[p.id] = p
	}
	g.mu.Unlock()
	g.log.Info("consumer group: generation started", "group", g.cfg.Group, "generation", gen.ID, "member", gen.MemberID, "partitions", ids)
	gen.Start(func(ctx context.Context) { g.commitLoop(ctx, gen, parts, committed, metas, &readers) })
	// The generation ends when its heartbeat fails (the coordinator does
	// not answer, or has moved on) or a rebalance begins.
	g.generation.Store(gen.ID)
	gen.Start(func(ctx context.Context) {
		<-ctx.Done()
		g.generation.CompareAndSwap(gen.ID, 0)
	})
}

// InGroup is nil while this member is in a current generation of the group.
func (g *Member) InGroup() error {
	if g.generation.Load() == 0 {
		return fmt.Errorf("not a member of consumer group %s: joining, rebalancing or cut off from the group coordinator", g.cfg.Group)
	}
	return nil
}

// newPartition starts the partition of pa; committedDone are the rows its
// last commit named finished above its offset.
func (g *Member) newPartition(pa kafka.PartitionAssignment, committedDone []int64) *Partition {
	p := &Partition{topic: g.cfg.Topic, id: pa.ID, offs: newOffsets(pa.Offset), tokens: make(chan struct{}, g.cfg.MaxInFlightPerPartition)}
	p.hwm.Store(-1)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.finishCtx, p.finishCancel = context.WithCancel(context.Background())
	g.mu.Lock()
	kept := g.finished[pa.ID]
	delete(g.finished, pa.ID)
	g.mu.Unlock()
	// A negative Offset (nothing committed yet) starts before them all.
	if n := p.offs.finishedBefore(pa.Offset, append(kept, committedDone...)); n > 0 {
		g.log.Info("consumer: rows finished before this assignment (kept by this member or named by the last commit) are passed over, not handled again", "partition", pa.ID, "from", pa.Offset, "rows", n)
	}
	return p
}

// fetchWait bounds how long a fetch may wait for rows to arrive: the broker
// answers as soon as one does, so a long wait costs no latency, while a
// short one costs every idle reader a round trip and a wake several times a
// second, a large share of an idle consumer's CPU. kafka-go asks the broker
// to wait a second less than this (a quarter less, for a wait under two
// seconds) and gives up on its answer at fetchWait.
const fetchWait = 2 * time.Second

// readPartition reads one partition until the generation ends, then drains it.
func (g *Member) readPartition(ctx context.Context, p *Partition, start int64) {
	defer g.drain(p)
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:        g.cfg.Brokers,
		Dialer:         g.cfg.Dialer,
		Topic:          p.topic,
		Partition:      p.id,
		MinBytes:       1,
		MaxBytes:       1 << 20,
		MaxWait:        fetchWait,
		QueueCapacity:  64,
		ReadBackoffMin: 50 * time.Millisecond,
		ReadBackoffMax: time.Second,
		ErrorLogger:    kafka.LoggerFunc(func(format string, args ...any) { g.log.Debug("kafka-go reader: " + fmt.Sprintf(format, args...)) }),
	})
	// Close waits for the fetch in flight (the broker's wait; fetchWait on a
	// link gone dark; kafka-go's own 10 s bounds mid-batch): it runs beside
	// the drain, which must not wait for it, and Run waits for it. No row is
	// handed on once the loop below returns.
	defer g.closing.Go(func() { _ = r.Close() })
	if err := r.SetOffset(start); err != nil {
		g.log.Error("consumer: could not position the partition reader; the partition waits for the next rebalance",
			"partition", p.id, "offset", start, "err", err)
		<-ctx.Done()
		return
	}
	for {
		if !g.acquire(ctx, p) {
			return
		}
		msg, err := r.FetchMessage(ctx)
		if err != nil {
			g.release(p)
			if ctx.Err() != nil {
				return
			}
			g.log.Warn("consumer: reading a partition failed, retrying", "partition", p.id, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		// Checked after the fetch, which may have waited long for the
		// message: the row is handed on only when ready says so, and left
		// for the partition's next owner if the generation ends first.
		if !g.hooks.Ready(ctx) {
			g.release(p)
			return
		}
		since := msg.Time
		if since.IsZero() {
			since = time.Now()
		}
		if p.offs.read(msg.Offset, since) {
			g.release(p) // finished before this assignment
			continue
		}
		p.hwm.Store(msg.HighWaterMark)
		p.rows.Add(1)
		// A row is in flight from here until it is finished or given
		// back; a reader waiting for a message holds its tokens, not a row.
		g.rows.Add(1)
		g.m.InFlight.Inc()
		g.hooks.Handle(&Row{Msg: msg, part: p, g: g})
	}
}

// acquire takes an in-flight token of the partition and one of the
// consumer; it blocks (reading pauses) while either cap is reached.
func (g *Member) acquire(ctx context.Context, p *Partition) bool {
	select {
	case p.tokens <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	select {
	case g.global <- struct{}{}:
		return true
	case <-ctx.Done():
		<-p.tokens
		return false
	}
}

// release gives back the tokens acquire took.
func (g *Member) release(p *Partition) {
	<-g.global
	<-p.tokens
}

// drain ends a partition's ownership: its rows are told (Ctx) and get
// until a heartbeat before DrainTimeout (at most half of it) to be finished
// or given back. Then FinishCtx ends, and the drain waits that heartbeat at
// most for the rows to let go: work begun before may be bounded only by a
// client's own timeout (a Redis read on a dark link). The final commit so
// comes within DrainTimeout of the generation's end, which came up to a
// heartbeat after the coordinator last heard from the member, and a
// heartbeat is left for the commit itself (drain + 2 × heartbeat ≤ session).
// A row still busy then is left unfinished and read again by the
// partition's next owner.
func (g *Member) drain(p *Partition) {
	p.cancel()
	done := make(chan struct{})
	go func() { p.rows.Wait(); close(done) }()
	grace := min(g.cfg.HeartbeatInterval, g.cfg.DrainTimeout/2)
	timer := time.NewTimer(g.cfg.DrainTimeout - grace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		g.log.Warn("consumer: rows still in progress as the drain nears its timeout; their work is ended, they will be read again",
			"partition", p.id, "unfinished", p.offs.unfinished())
		p.finishCancel()
		timer.Reset(grace)
		select {
		case <-done:
		case <-timer.C:
			g.log.Warn("consumer: rows still in progress at the drain timeout; committing without them, they will be read again",
				"partition", p.id, "unfinished", p.offs.unfinished())
		}
	}
	p.finishCancel()
	// Every row has finished or been given back: what finished above the
	// first unfinished row is kept for the partition's return. Rows passed
	// over here that are not read again this time stay kept too.
	above := p.offs.finishedAbove()
	g.mu.Lock()
	if len(above) > 0 {
		g.finished[p.id] = above
	} else {
		delete(g.finished, p.id)
	}
	g.mu.Unlock()
}

// commitLoop commits each partition's commit point every CommitInterval
// and once more after the partitions drained, while the generation still
// holds them. committed holds what the group has committed already.
func (g *Member) commitLoop(ctx context.Context, gen *kafka.Generation, parts []*Partition, committed map[int]int64, metas map[int]string, readers *sync.WaitGroup) {
	tick := time.NewTicker(g.cfg.CommitInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			readers.Wait()
			g.commit(gen, parts, committed, metas, true)
			return
		case <-tick.C:
			g.commit(gen, parts, committed, metas, false)
		}
	}
}

// commit commits each partition whose commit point moved, or whose rows
// finished above it changed, with those rows in the metadata.
func (g *Member) commit(gen *kafka.Generation, parts []*Partition, committed map[int]int64, metas map[int]string, final bool) {
	offsets, meta := map[int]int64{}, map[int]string{}
	for _, p := range parts {
		cp, ok := p.offs.commitPoint()
		if !ok {
			continue
		}
		m := encodeDone(p.offs.finishedAbove())
		if last, seen := committed[p.id]; !seen || cp > last || (cp == last && m != metas[p.id]) {
			offsets[p.id], meta[p.id] = cp, m
		}
	}
	if len(offsets) == 0 {
		return
	}
	took, err := g.commitOffsets(gen, offsets, meta)
	for id := range took {
		committed[id], metas[id] = offsets[id], meta[id]
	}
	if err != nil {
		g.m.Commits.WithLabelValues("error").Inc()
		// After a rebalance the broker refuses this generation's commit; the
		// rows are then read again by the new owner and replayed.
		g.log.Warn("consumer: offset commit refused", "generation", gen.ID, "offsets", offsets, "final", final, "err", err)
		return
	}
	g.m.Commits.WithLabelValues("ok").Inc()
	g.log.Debug("consumer: committed", "generation", gen.ID, "offsets", offsets, "final", final)
}

// Partitions are the partitions of the current generation.
func (g *Member) Partitions() []*Partition {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*Partition, 0, len(g.parts))
	for _, p := range g.parts {
		out = append(out, p)
	}
	return out
}

// OldestUnfinished is the produce time of the oldest row read and not
// finished, zero when there is none.
func (g *Member) OldestUnfinished() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	var oldest time.Time
	for _, p := range g.parts {
		if t := p.offs.oldest(); !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
	}
	return oldest
}
