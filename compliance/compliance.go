// Package compliance keeps every call a consumer makes to the registration API
// in the seller's call history in Redis and reports, per seller, whether the
// API's limit was ever exceeded. The history is the evidence an operator shows:
// it is written by the consumers, not derived from the throttle's log, so a bug
// in the throttle shows up here instead of being hidden by it.
//
// Keys: bulkreg:{s:<seller>}:calls (ZSET, score = call time in µs on the Redis
// clock, bounded retention) and bulkreg:compliance:sellers (SET of the sellers
// with a history).
//
// A history lives in Redis, and Redis can lose it (a restart without
// persistence, FLUSHALL, a failover to a replica that missed the last writes).
// The report does not claim compliance for what it cannot see: the throttle's
// marker of each seller's hash slot (throttle.Markers) says since when the
// data there is whole, and a seller whose history does not cover the whole
// retention says so (SellerReport.Uncovered).
package compliance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/redisfail"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/lua"
	"github.com/bulkreg/bulkreg/throttle"
)

// DefaultRetention is how long a call stays in a seller's history: the
// operators' view asks for the maximum in any window over the last hour.
const DefaultRetention = time.Hour

// SellersKey is the set of sellers that have a call history.
const SellersKey = "bulkreg:compliance:sellers"

// CallsKey is a seller's call history. It shares the seller's hash tag with
// the throttle's keys.
func CallsKey(seller string) string { return "bulkreg:{s:" + seller + "}:calls" }

// Call is one call to the registration API.
type Call struct {
	// At is when the call was sent, on the Redis clock (the consumer derives it
	// from its throttle slot). Zero means "now" as Redis sees it when recording.
	At time.Time
	// Status is the HTTP status of the answer, 0 when there was none (timeout,
	// connection error).
	Status int
	// Class is the registry client's classification: "registered", "replayed",
	// "permanent", "rate-limited", "transient".
	Class string
	// Key is the row's Idempotency-Key.
	Key string
}

// Recorder writes and reads call histories.
type Recorder struct {
	rdb       redis.UniversalClient
	retention time.Duration
	batch     *scriptbatch.Runner // the combined scripts of RecordWith and RecordAll
	script    *redis.Script

	mu    sync.Mutex
	added map[string]time.Time // sellers added to SellersKey by this recorder, and when

	markers func() *throttle.Markers // computed on the first report

	// globalLimit and globalWindow are the API's app-wide limit
	// (SetGlobal); 0: Report has no app-wide line.
	globalLimit  int
	globalWindow time.Duration
}

// SetGlobal makes every Report judge the app-wide limit as well: limit
// accepted calls of all sellers together in any trailing window. A limit of
// 0 leaves the app-wide line out. Call it before the recorder is shared.
func (r *Recorder) SetGlobal(limit int, window time.Duration) *Recorder {
	r.globalLimit, r.globalWindow = limit, window
	return r
}

// sellerRefresh is how often a recorder adds a seller it already added to
// the sellers set again (the set may have been lost with a Redis restart).
const sellerRefresh = time.Minute

// NewRecorder keeps each call for retention (DefaultRetention when ≤ 0).
func NewRecorder(rdb redis.UniversalClient, retention time.Duration) *Recorder {
	if retention <= 0 {
		retention = DefaultRetention
	}
	return &Recorder{rdb: rdb, retention: retention, script: redis.NewScript(lua.Script("compliance_record.lua")), batch: scriptbatch.New(), added: map[string]time.Time{},
		markers: sync.OnceValue(throttle.NewMarkers)}
}

// recordItem is one call to record: its time, µs, and its member.
type recordItem struct {
	at     int64
	member string
}

// writeRecords records the calls of one seller in one script: all of them
// in the history at once, then steps. A consumer's calls of one seller's
// window are answered within milliseconds of each other, and a script of its
// own for each would make that script's fixed cost, not its commands, most
// of Redis's work per row. isNew tells that the seller's history was new.
func (r *Recorder) writeRecords(ctx context.Context, seller string, items []recordItem, steps []scriptbatch.Step) (isNew bool, err error) {
	keys := []string{CallsKey(seller)}
	// ARGV: the first call's time and member, the retention, then the
	// other calls' times and members.
	args := make([]any, 0, 1+2*len(items))
	for i := range items {
		it := &items[i] // pointed to: the client boxes no value of each call
		args = append(args, &it.at, &it.member)
		if i == 0 {
			args = append(args, r.retention.Microseconds())
		}
	}
	if len(steps) == 0 {
		v, err := r.script.Run(ctx, r.rdb, keys, args...).Slice()
		return newHistory(v), err
	}
	all := make([]scriptbatch.Step, 0, 1+len(steps))
	all = append(all, scriptbatch.Step{Script: "compliance_record.lua", Keys: keys, Args: args,
		Reply: func(reply any) error { v, _ := reply.([]any); isNew = newHistory(v); return nil }})
	all = append(all, steps...)
	err = r.batch.Run(ctx, r.rdb, all...)
	return isNew, err
}

// newHistory reads compliance_record.lua's reply {score, new}.
func newHistory(v []any) bool { return len(v) == 2 && v[1] == int64(1) }

// Record appends c to the seller's history and trims it to the retention.
func (r *Recorder) Record(ctx context.Context, seller string, c Call) error {
	return r.RecordWith(ctx, seller, c)
}

// RecordWith is Record, running steps after it in the same script: the
// call's other writes on the seller's hash tag (its slot settled, its SKU
// marked in the ledger), one command instead of one each; RecordAll for one
// call.
func (r *Recorder) RecordWith(ctx context.Context, seller string, c Call, steps ...scriptbatch.Step) error {
	return r.RecordAll(ctx, seller, []Call{c}, steps...)
}

// item is the record of call c.
func (r *Recorder) item(c Call) recordItem {
	var atMicros int64
	if !c.At.IsZero() {
		atMicros = c.At.UnixMicro()
	}
	// A call with its time is named by that time: recording it again after
	// an answer was lost (the consumer retries on timeouts) rewrites the same
	// member instead of adding a second call that could show a seller over
	// its limit. Only a call timed by Redis itself needs a nonce.
	class, key := sanitize(c.Class), sanitize(c.Key)
	var b strings.Builder // the member, made in one allocation
	var num [20]byte
	b.Grow(3 + 1 + len(class) + 1 + len(key) + 1 + 16)
	b.Write(strconv.AppendInt(num[:0], int64(c.Status), 10))
	b.WriteByte('|')
	b.WriteString(class)
	b.WriteByte('|')
	b.WriteString(key)
	b.WriteByte('|')
	if atMicros == 0 {
		b.WriteString(nonce())
	} else {
		b.Write(strconv.AppendInt(num[:0], atMicros, 10))
	}
	return recordItem{at: atMicros, member: b.String()}
}

// listSeller adds seller to the set of sellers with a history. A separate
// command: the set is not under the seller's hash tag, and a script may only
// touch one cluster slot. Sent once a minute per seller, not once per call,
// and at once when the history was new: after Redis lost its data the
// seller must not wait a minute to be listed again.
func (r *Recorder) listSeller(ctx context.Context, seller string, isNew bool) error {
	r.mu.Lock()
	last, ok := r.added[seller]
	r.mu.Unlock()
	if ok && time.Since(last) < sellerRefresh && !isNew {
		return nil
	}
	if err := r.rdb.SAdd(ctx, SellersKey, seller).Err(); err != nil {
		return fmt.Errorf("add seller %q to the compliance sellers: %w", seller, redisfail.Wrap(err))
	}
	r.mu.Lock()
	if len(r.added) > 100_000 {
		clear(r.added) // bounded: forgetting only costs a repeated SADD
	}
	r.added[seller] = time.Now()
	r.mu.Unlock()
	return nil
}

// RecordAll records calls of one seller, and runs steps after them, in one
// script: the calls' other writes on the seller's hash tag (their slots
// settled or given back, their SKUs marked in the ledger). With no call it
// runs the steps alone. A call that fails on a step has its calls recorded
// and the steps before it run (scriptbatch runs them in order).
func (r *Recorder) RecordAll(ctx context.Context, seller string, calls []Call, steps ...scriptbatch.Step) error {
	if seller == "" {
		return errors.New("record calls: the seller id is empty")
	}
	if len(calls) == 0 {
		if err := r.batch.Run(ctx, r.rdb, steps...); err != nil {
			return fmt.Errorf("write the steps of seller %q's calls: %w", seller, redisfail.Wrap(err))
		}
		return nil
	}
	items := make([]recordItem, len(calls))
	for i, c := range calls {
		items[i] = r.item(c)
	}
	isNew, err := r.writeRecords(ctx, seller, items, steps)
	if err != nil {
		what := fmt.Sprintf("%d calls", len(calls))
		if len(calls) == 1 {
			what = "a call"
		}
		return fmt.Errorf("record %s of seller %q in the compliance history: %w", what, seller, redisfail.Wrap(err))
	}
	return r.listSeller(ctx, seller, isNew)
}

// sanitize keeps the member's separator out of its fields.
func sanitize(s string) string { return strings.ReplaceAll(s, "|", "/") }

func nonce() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// SellerReport is one seller's line in the report.
type SellerReport struct {
	Seller string `json:"seller"`
	// Calls is every call in the retained history, whatever its answer.
	Calls int `json:"calls"`
	// Accepted counts the 201 answers: the registrations the API counts.
	// Replays (200) are not counted, as the API does not count them.
	Accepted int `json:"accepted"`
	// MaxInWindow is the most accepted calls inside any trailing window over the
	// retained history, by the time each call was sent.
	MaxInWindow int `json:"max_in_window"`
	// MaxCounted is the most the API's policy counted against its limit at
	// once: sliding, MaxInWindow; fixed, the most accepted calls in one
	// window aligned to the Unix epoch; token-bucket, the most tokens taken
	// at once (the smallest bucket that would have accepted every call).
	MaxCounted int `json:"max_counted"`
	// CurrentWindow is the accepted calls in the window ending now (fixed:
	// in the aligned window holding now).
	CurrentWindow int `json:"current_window"`
	// RateLimited counts the 429 answers.
	RateLimited int `json:"rate_limited"`
	// Exceeded is MaxCounted > the limit (the bucket's capacity for
	// token-bucket).
	Exceeded bool `json:"exceeded"`
	// First and Last are the first and last call in the history.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	// Uncovered is the part of the report's period this seller's history
	// cannot vouch for, because Redis lost (or may have lost) the seller's
	// data; nil when the history covers the whole retention. The counts
	// above are of the calls the history holds: none of them speaks for the
	// gap.
	Uncovered *Gap `json:"uncovered,omitempty"`
}

// Gap is a period a history does not cover.
type Gap struct {
	From time.Time `json:"from"` // the start of the report's period (At − Retention)
	To   time.Time `json:"to"`   // the history is whole from here on (Redis clock)
	// Cause is the marker's cause (throttle.CauseMissing,
	// throttle.CauseNewServer), or "unknown" when Redis holds no marker.
	Cause  string `json:"cause"`
	Reason string `json:"reason"` // in words, for the operator
}

// CauseUnknown is a Gap's cause when Redis holds no marker for the data's
// hash slot: it lost the data and nothing wrote there since, or it was never
// initialised.
const CauseUnknown = "unknown"

// Report is the compliance report of every seller with a history.
type Report struct {
	At        time.Time      `json:"at"` // Redis clock
	Limit     int            `json:"limit"`
	Window    time.Duration  `json:"window_ns"`
	Policy    throttle.Kind  `json:"policy"`          // how the API counts the limit
	Burst     int            `json:"burst,omitempty"` // token-bucket: the bucket's capacity
	Retention time.Duration  `json:"retention_ns"`
	Sellers   []SellerReport `json:"sellers"` // by seller id
	Exceeded  bool           `json:"exceeded"`
	// Complete: every history, and the list of sellers itself, covers the
	// whole retention. When false, Exceeded only speaks for the calls the
	// histories hold: see each seller's Uncovered and SellersUncovered.
	Complete bool `json:"complete"`
	// SellersUncovered is set when the list of sellers with a history
	// (SellersKey) may miss sellers: a seller whose history survived
	// elsewhere on Redis Cluster but who made no call since is not listed.
	SellersUncovered *Gap `json:"sellers_uncovered,omitempty"`
	// App is the app-wide limit's line, from every seller's history
	// together; nil when no app-wide limit is configured (SetGlobal). Its
	// Exceeded counts in the report's.
	App *AppReport `json:"app,omitempty"`
}

// AppReport judges the calls of all sellers together against the API's
// app-wide limit.
type AppReport struct {
	Limit  int           `json:"limit"`
	Window time.Duration `json:"window_ns"`
	// Accepted counts the 201 answers of every seller in the histories.
	Accepted int `json:"accepted"`
	// MaxInWindow is the most accepted calls of all sellers inside any
	// trailing Window over the retained histories.
	MaxInWindow int `json:"max_in_window"`
	// CurrentWindow is the accepted calls of all sellers in the Window ending now.
	CurrentWindow int  `json:"current_window"`
	Exceeded      bool `json:"exceeded"` // MaxInWindow > Limit
}

// Report computes, for every seller, the counts above against the API's
// limit as policy counts it: its Kind, Limit, Window and Burst (the
// throttle's margin plays no part: the API counts calls, not slots); with
// SetGlobal also the app-wide line (Report.App), always a sliding window.
func (r *Recorder) Report(ctx context.Context, policy throttle.Policy) (Report, error) {
	limit, window := policy.Limit, policy.Window
	if limit <= 0 || window <= 0 {
		return Report{}, fmt.Errorf("compliance report: limit (%d) and window (%s) must be greater than 0", limit, window)
	}
	if policy.Kind == "" {
		policy.Kind = throttle.Sliding
	}
	if policy.Kind != throttle.TokenBucket {
		policy.Burst = 0
	} else if policy.Burst <= 0 {
		policy.Burst = limit
	}
	now, err := r.rdb.Time(ctx).Result()
	if err != nil {
		return Report{}, fmt.Errorf("compliance report: read the Redis clock: %w", redisfail.Wrap(err))
	}
	sellers, err := r.rdb.SMembers(ctx, SellersKey).Result()
	if err != nil {
		return Report{}, fmt.Errorf("compliance report: list the sellers: %w", redisfail.Wrap(err))
	}
	slices.Sort(sellers)
	rep := Report{At: now, Limit: limit, Window: window, Policy: policy.Kind, Burst: policy.Burst, Retention: r.retention, Complete: true}
	keys := []string{SellersKey}
	for _, seller := range sellers {
		keys = append(keys, CallsKey(seller))
	}
	markers, err := r.markers().Read(ctx, r.rdb, keys...)
	if err != nil {
		return Report{}, fmt.Errorf("compliance report: %w", err)
	}
	from := now.Add(-r.retention)
	if g := gap(markers[0], from, now); g != nil {
		g.Reason = "the list of sellers with a history: " + g.Reason + "; a seller who made no call since is missing from this report"
		rep.SellersUncovered, rep.Complete = g, false
	}
	var accepted []time.Time // every seller's, for the app-wide line
	for i, seller := range sellers {
		calls, err := r.history(ctx, seller, now)
		if err != nil {
			return Report{}, err
		}
		if len(calls) == 0 {
			// The history expired: forget the seller so the set stays bounded.
			if err := r.rdb.SRem(ctx, SellersKey, seller).Err(); err != nil {
				return Report{}, fmt.Errorf("compliance report: drop seller %q with an expired history: %w", seller, redisfail.Wrap(err))
			}
			continue
		}
		sr := summarize(seller, calls, policy, now)
		sr.Uncovered = gap(markers[i+1], from, now)
		rep.Complete = rep.Complete && sr.Uncovered == nil
		rep.Exceeded = rep.Exceeded || sr.Exceeded
		rep.Sellers = append(rep.Sellers, sr)
		if r.globalLimit > 0 {
			for _, c := range calls {
				if c.Status == 201 {
					accepted = append(accepted, c.At)
				}
			}
		}
	}
	if r.globalLimit > 0 {
		rep.App = summarizeApp(accepted, r.globalLimit, r.globalWindow, now)
		rep.Exceeded = rep.Exceeded || rep.App.Exceeded
	}
	return rep, nil
}

// summarizeApp judges every seller's accepted calls together.
func summarizeApp(accepted []time.Time, limit int, window time.Duration, now time.Time) *AppReport {
	slices.SortFunc(accepted, func(a, b time.Time) int { return a.Compare(b) })
	a := &AppReport{Limit: limit, Window: window, Accepted: len(accepted), MaxInWindow: MaxInWindow(accepted, window)}
	for _, at := range accepted {
		if at.After(now.Add(-window)) && !at.After(now) {
			a.CurrentWindow++
		}
	}
	a.Exceeded = a.MaxInWindow > limit
	return a
}

// gap is the part of [from, now] that data in the hash slot of marker m
// does not cover; nil when it covers all of it.
func gap(m throttle.Marker, from, now time.Time) *Gap {
	switch {
	case !m.Found:
		return &Gap{From: from, To: now, Cause: CauseUnknown,
			Reason: "Redis holds no marker for this data's hash slot: it lost the data and no consumer has reserved a slot there since, or it was never initialised (producer redis-init); nothing in the period can be vouched for"}
	case m.Cause == throttle.CauseInit || !m.Since.After(from):
		return nil
	case m.Cause == throttle.CauseNewServer:
		return &Gap{From: from, To: m.Since, Cause: m.Cause,
			Reason: fmt.Sprintf("at %s the data came from another redis-server process (a restart from disk or a failover), which may have missed the last writes before it; calls before then may be missing", m.Since.UTC().Format(time.RFC3339))}
	default:
		return &Gap{From: from, To: m.Since, Cause: m.Cause,
			Reason: fmt.Sprintf("Redis had lost this data when a consumer found it at %s (a restart without persistence, FLUSHALL, or a failover to a replica that had not received it); calls before then are missing", m.Since.UTC().Format(time.RFC3339))}
	}
}

// History returns a seller's retained calls, oldest first.
func (r *Recorder) History(ctx context.Context, seller string) ([]Call, error) {
	now, err := r.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("read the Redis clock: %w", redisfail.Wrap(err))
	}
	return r.history(ctx, seller, now)
}

func (r *Recorder) history(ctx context.Context, seller string, now time.Time) ([]Call, error) {
	min := strconv.FormatInt(now.Add(-r.retention).UnixMicro(), 10)
	zs, err := r.rdb.ZRangeByScoreWithScores(ctx, CallsKey(seller), &redis.ZRangeBy{Min: min, Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("read the call history of seller %q: %w", seller, redisfail.Wrap(err))
	}
	calls := make([]Call, 0, len(zs))
	for _, z := range zs {
		member, _ := z.Member.(string)
		c, ok := parseMember(member)
		if !ok {
			continue // not written by Record; a report never fails on one odd member
		}
		c.At = time.UnixMicro(int64(z.Score))
		calls = append(calls, c)
	}
	return calls, nil
}

func parseMember(m string) (Call, bool) {
	parts := strings.SplitN(m, "|", 4)
	if len(parts) != 4 {
		return Call{}, false
	}
	status, err := strconv.Atoi(parts[0])
	if err != nil {
		return Call{}, false
	}
	return Call{Status: status, Class: parts[1], Key: parts[2]}, true
}

// summarize computes one seller's line from its calls, oldest first, as
// p counts them (its Kind and Burst filled in).
func summarize(seller string, calls []Call, p throttle.Policy, now time.Time) SellerReport {
	window := p.Window
	sr := SellerReport{Seller: seller, Calls: len(calls)}
	if len(calls) > 0 {
		sr.First, sr.Last = calls[0].At, calls[len(calls)-1].At
	}
	var accepted []time.Time
	for _, c := range calls {
		switch c.Status {
		case 201:
			accepted = append(accepted, c.At)
		case 429:
			sr.RateLimited++
		}
	}
	sr.Accepted = len(accepted)
	sr.MaxInWindow = MaxInWindow(accepted, window)
	from := now.Add(-window)
	if p.Kind == throttle.Fixed {
		from = time.Unix(0, alignedWindow(now, window)*window.Nanoseconds()-1)
	}
	for _, at := range accepted {
		if at.After(from) && !at.After(now) {
			sr.CurrentWindow++
		}
	}
	capacity := p.Limit
	switch p.Kind {
	case throttle.Fixed:
		sr.MaxCounted = maxInAlignedWindow(accepted, window)
	case throttle.TokenBucket:
		sr.MaxCounted, capacity = maxTokens(accepted, window, p.Limit), p.Burst
	default:
		sr.MaxCounted = sr.MaxInWindow
	}
	sr.Exceeded = sr.MaxCounted > capacity
	return sr
}

// maxInAlignedWindow is the most of the sorted times in one window [kW,
// (k+1)W) aligned to the Unix epoch, as a fixed-window API counts.
func maxInAlignedWindow(times []time.Time, window time.Duration) int {
	best, n := 0, 0
	for i, t := range times {
		if i > 0 && alignedWindow(t, window) == alignedWindow(times[i-1], window) {
			n++
		} else {
			n = 1
		}
		best = max(best, n)
	}
	return best
}

// alignedWindow is the number of the window of t, counted from the Unix
// epoch (time.Truncate counts from year 1, which only agrees for windows
// that divide a day).
func alignedWindow(t time.Time, window time.Duration) int64 {
	ns, w := t.UnixNano(), window.Nanoseconds()
	k := ns / w
	if ns%w < 0 {
		k--
	}
	return k
}

// maxTokens is the most tokens a bucket refilled at limit per window had
// taken at once over the sorted times, each call's own included: the
// smallest bucket that accepts them all. It replays the calls as GCRA, the
// bucket's other form: each call moves the theoretical arrival time a
// token's worth past the later of itself and the call, which is then as
// many tokens ahead of the call as are taken.
func maxTokens(times []time.Time, window time.Duration, limit int) int {
	if len(times) == 0 {
		return 0
	}
	perToken := window.Seconds() / float64(limit)
	best, tat := 0, 0.0
	for _, t := range times {
		at := t.Sub(times[0]).Seconds()
		tat = math.Max(tat, at) + perToken
		best = max(best, int(math.Ceil((tat-at)/perToken-1e-9))) // the epsilon forgives float rounding
	}
	return best
}

// MaxInWindow is the most times inside any half-open window [t, t+window),
// the way a strict sliding-window API counts: two calls exactly window apart
// are not in the same window. times must be sorted.
func MaxInWindow(times []time.Time, window time.Duration) int {
	best, lo := 0, 0
	for hi := range times {
		for times[hi].Sub(times[lo]) >= window {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}
