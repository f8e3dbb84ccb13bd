// Package throttle admits calls to the registration API per seller, across
// any number of consumers, through Lua scripts in Redis (package lua).
//
// # One invariant for late counting
//
// The API may count a call at any instant between its send and its latest
// possible count. A call is sent no earlier than its slot and no later than
// Policy.SendWithin after it (Reservation.SendBy: a caller that cannot send
// by then does not send at all), and the API counts it within
// Policy.CallTimeout of its send, so its count lies in [slot, slot + reach],
// reach = SendWithin + CallTimeout. Under the sliding log, the default
// policy:
//
//   - the seller's log in Redis holds each call's latest possible count, and
//     holds it before the call is sent: the reservation itself writes
//     slot + reach (lua/reserve.lua), no round trip of its own;
//   - a settle can only move it earlier: the API counted the call by its
//     answer, and the entry goes to the answer less the margin, never
//     before the slot; a release removes it only for a call that was not
//     sent or that the API says it did not count;
//   - a call gets a slot t only if the window ending at its latest count
//     holds fewer than Limit latest counts, and so does every later window
//     that would hold it; a window of latest counts is W′ + reach long
//     (W′ = Window + Margin), since two calls counted a Window apart may
//     have latest counts up to Window + reach apart. Appending after the
//     last Limit calls is t = e(n−L+1) + W′ + 1µs over the log's sorted
//     latest counts e; a slot given back leaves room before them
//     (lua/reserve.lua, lua/fits.lua).
//
// Why no trailing Window then holds Limit + 1 counts: say L + 1 calls are
// counted within [x, x + Window], and j is the one whose reservation ran
// last (scripts run one at a time). When it ran, each of the L others was
// in the log with an entry e no earlier than its count less the margin (a
// latest count, or an answer less the margin) and no later than its slot +
// reach, so x − Margin ≤ e ≤ x + Window + reach; and so is j's own,
// t + reach, since j is counted in [t, t + reach]. That is L + 1 entries in
// one window of W′ + reach holding j's: the rule refused it. The proof uses
// each entry only as a bound of its call's count, never the caller's
// presence, so nothing depends on the caller surviving: a consumer that
// dies, is paused or loses its link to Redis after its reservation leaves
// a log that is already safe, and the partition's next owner places its
// calls a window after the dead calls' latest counts. The margin is what a
// settled entry may lag its call's count: a burst's calls answered within
// it keep one place, their slot, and so do the next window's. All
// Throttles of a seller must share one Policy, reach included.
//
// What the caller must do is only SendBy: look at the clock immediately
// before writing the request and not send after it. The time between that
// look and the write (microseconds, unless the process is stopped right
// there) is the one window the log cannot cover: a process stopped in it
// sends late by its pause, and the API may count that call up to the pause
// past its latest count.
//
// Every other rule follows from the invariant: a slot once granted never
// needs counting again (Check asks only whether Redis lost it); a settle
// gives nothing back, since moving a latest count earlier only frees room;
// a call without an answer needs no settle, its latest count is in the log
// already; the next window of a seller waits for nothing but the log.
//
// The other policies say the same sentence their way.
//
//   - Fixed (lua/reserve_fixed.lua): the API may count the call in any
//     aligned window from its slot's to its latest count's, so the
//     reservation takes a place for it in each of them before it is sent,
//     and a call gets a slot only where each of those windows holds fewer
//     than Limit places; a settle gives back the places in the windows after
//     the answer's, never one before it.
//   - TokenBucket (lua/reserve_token_bucket.lua): the log holds each call's
//     latest count, written by the reservation, and tat covers it (the
//     bucket replayed with the call counted there); a call gets a slot only
//     where that bucket has a token; a settle moves the entry to the answer
//     and tat down to the bucket replayed over the entries, each at or
//     after its call's count, from the bucket the entries that left the log
//     left behind (kept with tat), so the replay never frees a token the
//     API's bucket spent. A slot booked behind a call not yet answered goes after
//     that call's latest count, up to a reach later than after its answer,
//     and no settle brings it earlier: a slot such calls push back by more
//     than an interval is not taken, and the reservation says to ask again
//     when their answers may have come.
//
// The app-wide log (Global) is a sliding log of latest counts too, with its
// own limit and window: the reservation writes the call's latest count
// (lua/reserve_global.lua), a settle moves it only earlier, and the proof
// above holds for it word for word. The call is sent at the later of its
// two slots and by SendBy, counted from the earlier, so each log's entry is
// a latest count for it.
//
// The sliding log is the only policy exact against an API that refuses the
// (L+1)-th call inside any trailing window, and it keeps the two other ways
// an API may count too. Fixed and TokenBucket are for an API that counts one
// of those ways: they mirror its count exactly, so they are faster, and
// against a strict sliding window they are refused.
//
// A seller's keys share the hash tag {s:<seller>}: bulkreg:{s:<seller>}:log
// (the sliding log; :fixed and :tb for the other policies) and :block (set
// after a 429). Each expires once its newest entry has left the window, so an
// idle seller costs nothing. Every Throttle of a seller must use the same
// Policy: they share the log and each reads it by its own limit.
//
// Losing Redis's data: a slot is a promise only the Redis that granted it
// keeps, and a log that is gone cannot tell who called in the last window.
// Every Redis Cluster hash slot has a marker (Markers) that, unlike the
// logs, never expires; each reserve script reads the marker of its seller's
// hash slot first, in the same script. A marker that is gone (a restart
// without persistence, FLUSHALL, a failover to a replica that had not
// received it) or that another redis-server process wrote (a restart from
// disk, a failover: either may miss the last writes) means the state may be
// incomplete: the script starts a new epoch and holds every seller of that
// hash slot for Policy.LossHold plus the reach beyond the margin from that
// moment (the latest counts the loss took), so every call made before the
// loss is more than a window before any slot granted after it, whether or
// not the consumer that made it still runs; a call answered later than
// that (an API slower than CallTimeout) holds its seller longer when it is
// settled. A new Redis looks lost too:
// Initialize it once. Every admitted Reservation carries its epoch, and
// Check, shortly before the call, tells whether that epoch is still current
// and the slot still in the log.
//
// Failing closed: when Redis does not answer, no slot is granted and the
// error wraps ErrUnavailable.
package throttle

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/redisfail"
	"github.com/bulkreg/bulkreg/lua"
)

// ErrUnavailable is wrapped in every error caused by Redis not answering (or
// answering with an error). No slot is granted then: the caller must not call
// the API and should try again later. It wraps redisfail.ErrUnavailable, the
// error every package that talks to Redis gives when Redis is unavailable.
var ErrUnavailable = redisfail.Named("the throttle's Redis could not answer, so no slot was granted")

// Kind names a counting policy.
type Kind string

const (
	// Sliding is a sliding log with reservations: never more than Limit
	// slots in any trailing Window + Margin. The default, and the
	// registration API's contract.
	Sliding Kind = "sliding"
	// Fixed mirrors an API that counts Limit calls per window [kW, (k+1)W)
	// aligned to the Unix epoch on its clock, as INCR + EXPIRE on a key
	// named by ⌊now / W⌋ does. Slots of window k fall in [kW, (k+1)W −
	// Margin), and a call takes a place in every later window up to the one
	// holding its latest count (see the package doc). The API's clock and Redis's must agree (NTP) to well
	// within Margin. Up to 2 × Limit calls can fall inside one trailing
	// window: a sliding-window API refuses them.
	Fixed Kind = "fixed"
	// TokenBucket mirrors an API with a bucket of Burst tokens refilled at
	// Limit per Window, full when idle: GCRA at the bucket's own rate, with
	// Margin taken off its burst tolerance, so calls that reach the API up
	// to Margin apart from their slots' spacing never find it empty.
	TokenBucket Kind = "token-bucket"
)

// Policy is how many calls a seller may make and how they are spread.
type Policy struct {
	Kind    Kind          // counting policy; "" means Sliding
	Limit   int           // calls per Window; > 0
	Window  time.Duration // the API's trailing window; > 0
	Margin  time.Duration // added to Window (W′ = Window + Margin) to cover the spread of network delay between consumers and the API; >= 0
	MaxWait time.Duration // a slot farther ahead than this is not taken and the answer says when to ask again; 0 = 2 × W′
	Burst   int           // TokenBucket only: the bucket's capacity, calls admitted back to back when full; 0 = Limit, at most Limit
	// ReleaseTimeout bounds the give-back of a slot whose caller's context
	// ended or whose answer was lost to a timeout; 0 = 1 s.
	ReleaseTimeout time.Duration
	// LossHold is how long, from the moment a reservation finds that Redis
	// lost (or may have lost) the state of a hash slot, no seller in that
	// hash slot gets a slot; 0 = Window + 2 × Margin, at least Window +
	// Margin. Calls whose slots were confirmed just before the loss are
	// still made after it: a consumer confirms a slot up to 2 ×
	// MaxLateness before it (consumer.Config), so the hold must be W′ + 2 ×
	// MaxLateness or more; with MaxLateness at its default (Margin / 2) the
	// default is exactly that. It covers calls the API counts within Margin
	// of their slots: a Throttle asks for the reach beyond the margin
	// longer (the latest counts the loss took), and a call made before the
	// loss and answered after it holds its seller until a window after its
	// answer by itself (Settle).
	LossHold time.Duration
	// CallTimeout is how long after it is sent a call may still be counted
	// by the API: twice the registry client's timeout (a call is abandoned
	// after one, but the API does not see its client leave and counts the
	// call when it gets to handle it; consumer.Config.ThrottlePolicy sets
	// this field so). A sliding log holds each call's latest count, its slot
	// + SendWithin + this (see the package doc). The hold after a loss is
	// LossHold plus this (and SendWithin beyond the margin), so a call in
	// flight at the loss is out of the window before
	// the first slot after it, even when the process that made it died
	// before its answer and the one that finds the loss never heard of it.
	// 0: calls are counted as soon as they are sent.
	CallTimeout time.Duration
	// SendWithin is how long after its slot a call may still be sent: a
	// caller that cannot send it by then does not send it at all
	// (Reservation.SendBy). With CallTimeout it places a call's latest
	// possible count, which a sliding log holds from the reservation on
	// (see the package doc). 0 = Margin / 2.
	SendWithin time.Duration
	// Global is the app-wide limit, besides this per-seller one: a call
	// needs a slot under both. Its zero value is no app-wide limit.
	Global Global
}

// PerMinute is n calls per seller in any trailing minute, with a 250 ms
// margin: the registration API's contract.
func PerMinute(n int) Policy {
	return Policy{Kind: Sliding, Limit: n, Window: time.Minute, Margin: 250 * time.Millisecond}
}

// Validate reports the first field that is out of range, by name.
func (p Policy) Validate() error {
	switch {
	case p.Kind != "" && p.Kind != Sliding && p.Kind != Fixed && p.Kind != TokenBucket:
		return fmt.Errorf("throttle: Policy.Kind must be %q, %q or %q, got %q", Sliding, Fixed, TokenBucket, p.Kind)
	case p.Limit <= 0:
		return fmt.Errorf("throttle: Policy.Limit (calls per window) must be greater than 0, got %d", p.Limit)
	case p.Window <= 0:
		return fmt.Errorf("throttle: Policy.Window must be greater than 0, got %s", p.Window)
	case p.Margin < 0:
		return fmt.Errorf("throttle: Policy.Margin must not be negative, got %s", p.Margin)
	case p.MaxWait < 0:
		return fmt.Errorf("throttle: Policy.MaxWait must not be negative (0 means 2 × (Window + Margin)), got %s", p.MaxWait)
	case p.Burst < 0:
		return fmt.Errorf("throttle: Policy.Burst must not be negative (0 means Limit), got %d", p.Burst)
	case p.Burst > p.Limit:
		// A loss of Redis's data holds sellers one window (LossHold): a
		// bucket larger than Limit would not be full again by then. The same
		// bucket fits with Limit = Burst and Window scaled alike.
		return fmt.Errorf("throttle: Policy.Burst (%d) must not exceed Policy.Limit (%d): for a bucket of C tokens refilled at R per second use Limit C and Window C/R", p.Burst, p.Limit)
	case p.Burst != 0 && p.Kind != TokenBucket:
		return fmt.Errorf("throttle: Policy.Burst is for the %q policy only, got %d with %q", TokenBucket, p.Burst, p.kind())
	case p.Kind == Fixed && p.Margin >= p.Window:
		return fmt.Errorf("throttle: Policy.Margin (%s) must be shorter than Policy.Window (%s) with the %q policy: slots keep Margin clear of each window's end", p.Margin, p.Window, Fixed)
	case p.ReleaseTimeout < 0:
		return fmt.Errorf("throttle: Policy.ReleaseTimeout must not be negative (0 means 1 s), got %s", p.ReleaseTimeout)
	case (p.Window+p.Margin)/time.Microsecond < 1:
		return fmt.Errorf("throttle: Policy.Window + Policy.Margin must be at least 1µs, got %s", p.Window+p.Margin)
	case p.SendWithin < 0:
		return fmt.Errorf("throttle: Policy.SendWithin must not be negative (0 means Margin / 2), got %s", p.SendWithin)
	case p.CallTimeout < 0:
		return fmt.Errorf("throttle: Policy.CallTimeout must not be negative (0 means calls are counted within Margin of their slots), got %s", p.CallTimeout)
	case p.Global.Limit > 0 && p.Margin == 0 && p.SendWithin == 0:
		// The two slots are taken a round trip apart, and a call may be
		// sent no later than SendWithin after the earlier.
		return fmt.Errorf("throttle: Policy.Margin (or Policy.SendWithin) must be greater than 0 with an app-wide limit: a call's seller slot and app-wide slot are taken a round trip apart, and the call may be sent only within SendWithin of the earlier")
	case p.LossHold != 0 && p.LossHold < p.span():
		return fmt.Errorf("throttle: Policy.LossHold must be 0 (Window + 2 × Margin) or at least Window + Margin (%s): calls made before a loss must leave the window first, got %s", p.span(), p.LossHold)
	}
	return p.Global.validate(p.Margin)
}

// span is W′ = Window + Margin.
func (p Policy) span() time.Duration { return p.Window + p.Margin }

// reach is how far after its slot the API may count a call at the latest:
// it is sent within SendWithin of the slot or not at all, and counted within
// CallTimeout of its send.
func (p Policy) reach() time.Duration { return p.SendWithin + p.CallTimeout }

// BucketSize is a token bucket's capacity: Burst, or Limit when Burst is 0.
func (p Policy) BucketSize() int {
	if p.Burst == 0 {
		return p.Limit
	}
	return p.Burst
}

func (p Policy) kind() Kind {
	if p.Kind == "" {
		return Sliding
	}
	return p.Kind
}

// gcra is the token bucket's schedule in µs: one slot every interval, up to
// tolerance ahead of that pace. The API's bucket is GCRA with T = W/L and a
// tolerance of (Burst − 1)T; calls reach it with up to Margin of spread
// between them, which the throttle takes off the tolerance, or, when the
// tolerance is smaller than Margin, adds to the interval.
func (p Policy) gcra() (interval, tolerance float64) {
	burst := p.BucketSize()
	t := float64(p.Window.Microseconds()) / float64(p.Limit)
	tau, m := float64(burst-1)*t, float64(p.Margin.Microseconds())
	return t + max(0, m-tau), max(0, tau-m)
}

// kindArgs are the arguments the reserve, peek, forecast and settle scripts
// take after their own for the policy's kind: the API's window for Fixed,
// the GCRA interval and tolerance for TokenBucket, then for every kind the
// reach from a slot to its call's latest count.
func (p Policy) kindArgs() []any {
	reach := p.reach().Microseconds()
	switch p.Kind {
	case Fixed:
		return []any{p.Window.Microseconds(), reach}
	case TokenBucket:
		interval, tolerance := p.gcra()
		return []any{strconv.FormatFloat(interval, 'f', 3, 64), strconv.FormatFloat(tolerance, 'f', 3, 64), reach}
	}
	return []any{reach}
}

// Reservation is the throttle's answer to one request for a slot.
type Reservation struct {
	Seller   string        // the seller the slot belongs to
	Admitted bool          // a slot is held at At
	At       time.Time     // the slot (Redis clock); when !Admitted, when to ask again
	Wait     time.Duration // At − now as Redis saw it
	// SendBy is the latest instant (Redis clock) the call may be sent: a
	// caller that cannot send it by then must not send it (the log's
	// latest count for it assumes so; see the package doc). Zero when
	// !Admitted. With an app-wide limit it counts from the earlier of the
	// two slots (At − Spread).
	SendBy   time.Time
	InWindow int // the window the slot was placed in: a sliding log's latest counts in [At − W′, At + reach], this call's included (0 when !Admitted)
	// Room is how many more of the seller's rows may ask now and be
	// admitted near this slot: the places its window has left under a
	// sliding log or a fixed window; none under a token bucket, whose next
	// slot waits for this call's answer or its latest count (0 when
	// !Admitted).
	Room int
	ID   string // the slot's member in the log; Release and Check need it ("" when !Admitted)
	// Epoch is the epoch of the seller's hash slot the slot was granted in;
	// Check tells whether it is still current. "" when !Admitted.
	Epoch string
	// Lost: this reservation found that Redis had lost (or may have lost)
	// the state of the seller's hash slot, and started its hold. Reported
	// once per loss and hash slot, to whichever caller found it.
	Lost bool
	// HeldUntil is the seller's hash slot's hold after its last loss: no
	// slot starts before it. Zero when it never had one. With an app-wide
	// limit, the later of that and the app-wide log's hold.
	HeldUntil time.Time

	// Global is the app-wide slot held with the seller's (Policy.Global);
	// its zero value when there is no app-wide limit. When !Admitted
	// because of the app-wide limit, only Waiting and Share are set.
	Global GlobalSlot
	// Spread is how far At is after the earlier of the seller's slot and
	// the app-wide slot (0 without an app-wide limit): at most
	// Policy.Global.Tolerance, or, when the earlier had begun by the time
	// the later was taken (a round trip, a pause), how long before; never
	// more than Policy.SendWithin. The call is made at At, so the earlier
	// log sees it this much late: a caller counts it in the call's
	// lateness, and SendBy counts from the earlier slot.
	Spread time.Duration
	// Capped: not admitted because the seller holds its fair share of the
	// app-wide slots ahead (Policy.Global); At is when that share frees up.
	Capped bool
}

// Status is a seller's throttle state, for metrics and operators.
type Status struct {
	InWindow     int       // slots in the trailing W′ ending now (reservations ahead not included)
	NextFree     time.Time // the slot a reservation would get now, MaxWait aside (Redis clock)
	BlockedUntil time.Time // no slot starts before this after a 429; zero when not blocked
	Now          time.Time // the Redis clock when Peek ran
}

// Throttle admits calls per seller. It is safe for concurrent use; all
// Throttles on the same Redis with the same Policy share each seller's log.
type Throttle struct {
	rdb     redis.UniversalClient
	p       Policy
	markers *Markers
	reserve *redis.Script
	release *redis.Script
	settle  *redis.Script
	block   *redis.Script
	peek    *redis.Script
	check   *redis.Script
	global  *globalScripts // nil without an app-wide limit
	// batch runs ReserveN's and ReleaseN's scripts (batch.go).
	batch batchRunner
	// kargs is p.kindArgs(), and settleTail settle.lua's arguments after
	// the entry's place and id for the seller's log: made once, as every
	// answered call settles.
	kargs, settleTail []any
}

// New returns a throttle over rdb (one Redis or a Redis Cluster: every key of
// a seller shares the hash tag {s:<seller>}).
//
// Retries: go-redis retries a command after a network error, and a retried
// reservation whose first answer was lost would take a second slot. Retries
// stay on (a blip costs no failed row) because the reserve scripts are
// idempotent per reservation id: the id is generated here before the call,
// and a retry that finds it in the log answers the slot it already holds.
// An answer lost for good (Reserve returned an error) leaves at most one slot
// nobody uses: it is given back when the caller's context ended or the answer
// timed out, and otherwise (or when the give-back fails too) lapses with the
// window, erring on the side of fewer calls, never more.
func New(rdb redis.UniversalClient, p Policy) (*Throttle, error) {
	if rdb == nil {
		return nil, errors.New("throttle: a Redis client is required")
	}
	if p.Kind == "" {
		p.Kind = Sliding
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.MaxWait == 0 {
		p.MaxWait = 2 * p.span()
	}
	if p.Kind == TokenBucket {
		p.Burst = p.BucketSize()
	}
	if p.ReleaseTimeout == 0 {
		p.ReleaseTimeout = time.Second
	}
	if p.SendWithin == 0 {
		p.SendWithin = p.Margin / 2
	}
	if p.LossHold == 0 {
		p.LossHold = p.Window + 2*p.Margin
	}
	p.Global = p.Global.withDefaults(p.Margin)
	reserve := "reserve.lua"
	switch p.Kind {
	case Fixed:
		reserve = "reserve_fixed.lua"
	case TokenBucket:
		reserve = "reserve_token_bucket.lua"
	}
	th := &Throttle{
		rdb:     rdb,
		p:       p,
		markers: NewMarkers(),
		// slot_guard.lua defines the marker check every reserve script runs
		// first, fits.lua the sliding logs' check for room before booked slots.
		reserve: redis.NewScript(lua.Script("slot_guard.lua") + lua.Script("fits.lua") + lua.Script(reserve)),
		release: redis.NewScript(lua.Script("release.lua")),
		settle:  redis.NewScript(lua.Script("settle.lua")),
		block:   redis.NewScript(lua.Script("block.lua")),
		peek:    redis.NewScript(lua.Script("peek.lua")),
		check:   redis.NewScript(lua.Script("check.lua")),
	}
	th.kargs = p.kindArgs()
	th.settleTail = []any{p.span().Microseconds(), string(p.kind())}
	if p.Kind != Sliding {
		th.settleTail = append(th.settleTail, th.kargs...)
	}
	if p.Global.On() {
		th.global = newGlobalScripts(th.markers)
	}
	return th, nil
}

// Policy returns the policy in force, defaults filled in.
func (t *Throttle) Policy() Policy { return t.p }

// keys are a seller's keys, all in one Redis Cluster hash slot so each
// script runs on one node: the seller's own under the hash tag {s:<seller>},
// and the marker of that hash slot.
type keys struct{ log, block, tat, marker string }

func (t *Throttle) keys(seller string) keys {
	prefix := sellerPrefix(seller)
	k := keys{log: prefix + "log", block: prefix + "block", tat: prefix + "tb:tat", marker: t.markers.OfSeller(seller)}
	switch t.p.Kind {
	case Fixed:
		k.log = prefix + "fixed"
	case TokenBucket:
		k.log = prefix + "tb"
	}
	return k
}

// Reserve takes the seller's next slot in one Redis round trip (ReserveN
// takes several in one). When the slot is within MaxWait it is held
// (Admitted) and the caller calls the API at At; otherwise nothing is held
// and At says when to ask again.
func (t *Throttle) Reserve(ctx context.Context, seller string) (Reservation, error) {
	r, err := t.reserve1(ctx, seller)
	if r.Admitted {
		r.SendBy = r.At.Add(t.p.SendWithin - r.Spread)
		if t.p.Kind != TokenBucket {
			r.Room = max(0, t.p.Limit-r.InWindow)
		}
	}
	return r, err
}

func (t *Throttle) reserve1(ctx context.Context, seller string) (Reservation, error) {
	if seller == "" {
		return Reservation{}, errors.New("throttle: seller id must not be empty")
	}
	if t.global != nil {
		return t.reserveBoth(ctx, seller, rand.Text())
	}
	if t.p.Kind != Sliding {
		return t.reserveID(ctx, seller, rand.Text())
	}
	id := rand.Text()
	rs, err := t.writeReserves(ctx, seller, []string{id})
	if err != nil {
		if ctx.Err() != nil || isTimeout(err) {
			// The script may have run and taken the slot, its answer lost or
			// no longer awaited: give it back (a no-op when the id holds
			// none), as reserveSeller does.
			t.releaseDetached(ctx, Reservation{Seller: seller, ID: id})
		}
		return Reservation{}, t.fail(ctx, "reserve a slot", seller, err)
	}
	return rs[0], nil
}

// maxReserveBatch bounds the slots one reserve script takes: a window's
// worth of the defaults and then some.
const maxReserveBatch = 256

// writeReserves takes the next slot of the seller for each id, in order, in
// one script (sliding logs only): Reserve's, with one id. Several ids take
// the slots the scripts one after the other would give, with the arguments
// ReserveN's step passes, reading the clock, the marker, the log and the
// block once for all of them.
func (t *Throttle) writeReserves(ctx context.Context, seller string, ids []string) ([]Reservation, error) {
	c := t.reserveCall(seller, ids[0], time.Time{})
	args := c.args
	if len(ids) > 1 {
		args = append(args, 0) // ARGV[7], no app-wide bound, then the other ids
		for _, id := range ids[1:] {
			args = append(args, id)
		}
	}
	v, err := c.script.Run(ctx, t.rdb, c.keys, args...).Result()
	if err != nil {
		// The caller gives the slots back when the answer was lost
		// (Reserve), and wraps the error.
		return nil, err
	}
	return sellerReservations(v, seller, ids, "reserve a slot")
}

// reserveID is Reserve with the reservation id given; asking again with the
// same id answers the same slot.
func (t *Throttle) reserveID(ctx context.Context, seller, id string) (Reservation, error) {
	return t.reserveSeller(ctx, seller, id, time.Time{})
}

// reserveSeller takes the seller's slot at or after notBefore (zero: no
// bound), as reserveID.
func (t *Throttle) reserveSeller(ctx context.Context, seller, id string, notBefore time.Time) (Reservation, error) {
	c := t.reserveCall(seller, id, notBefore)
	v, err := c.script.Run(ctx, t.rdb, c.keys, c.args...).Result()
	if err != nil {
		if ctx.Err() != nil || isTimeout(err) {
			// The request may have reached Redis and the script run, its
			// answer lost: the caller gets an error and will not use the
			// slot, so give it back, detached from ctx (a no-op when the id
			// holds none). A refused connection never sent the script.
			t.releaseDetached(ctx, Reservation{Seller: seller, ID: id})
		}
		return Reservation{}, t.fail(ctx, "reserve a slot", seller, err)
	}
	return sellerReservation(v, seller, id, "reserve a slot")
}

// sellerReservation reads a reserve script's reply v, one line, for the
// seller's request id; op names the step in an error.
func sellerReservation(v any, seller, id, op string) (Reservation, error) {
	rs, err := sellerReservations(v, seller, []string{id}, op)
	if err != nil {
		return Reservation{}, err
	}
	return rs[0], nil
}

// sellerReservations reads the reply of reserve.lua for several ids: a line
// for each, in order.
func sellerReservations(v any, seller string, ids []string, op string) ([]Reservation, error) {
	reply, _ := v.(string)
	text := reply
	rs := make([]Reservation, len(ids))
	for i, id := range ids {
		line, rest, more := strings.Cut(text, "\n")
		if more != (i < len(ids)-1) {
			return nil, fmt.Errorf("throttle: %s for seller %q: %w: the reserve script answered %d lines for %d slots", op, seller, ErrUnavailable, strings.Count(reply, "\n")+1, len(ids))
		}
		r, err := parseReservation(line)
		if err != nil {
			return nil, fmt.Errorf("throttle: %s for seller %q: %w: %w", op, seller, ErrUnavailable, err)
		}
		rs[i], text = r.of(seller, id), rest
	}
	return rs, nil
}

// of is r as the seller's reservation under id (an id only when admitted).
func (r Reservation) of(seller, id string) Reservation {
	r.Seller = seller
	if r.Admitted {
		r.ID = id
	} else {
		r.Epoch = ""
	}
	return r
}

// parseReservation reads one slot's line of a reserve script's reply:
// "admitted at now in_window epoch lost hold_until", one space between
// fields, the times in µs (reserve.lua). The epoch is a part of line, so a
// slot's reply costs no allocation.
func parseReservation(line string) (Reservation, error) {
	var f [7]string
	rest := line
	for i := range f {
		var ok bool
		f[i], rest, ok = strings.Cut(rest, " ")
		if ok != (i < len(f)-1) {
			return Reservation{}, fmt.Errorf("the reserve script answered %q, want \"0|1 µs µs count epoch 0|1 µs\"", line)
		}
	}
	at, err1 := strconv.ParseInt(f[1], 10, 64)
	now, err2 := strconv.ParseInt(f[2], 10, 64)
	inWindow, err3 := strconv.Atoi(f[3])
	hold, err4 := strconv.ParseInt(f[6], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil || (f[0] != "0" && f[0] != "1") || (f[5] != "0" && f[5] != "1") || (f[0] == "1" && f[4] == "") {
		return Reservation{}, fmt.Errorf("the reserve script answered %q, want \"0|1 µs µs count epoch 0|1 µs\"", line)
	}
	r := Reservation{
		Admitted: f[0] == "1",
		At:       time.UnixMicro(at),
		Wait:     time.Duration(at-now) * time.Microsecond,
		InWindow: inWindow,
		Epoch:    f[4],
		Lost:     f[5] == "1",
	}
	if hold > 0 {
		r.HeldUntil = time.UnixMicro(hold)
	}
	return r, nil
}

// micros reads a µs timestamp the scripts answer as a string (exact, where a
// Lua number could be rounded).
func micros(v any) (int64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("want a string of µs, got %T", v)
	}
	return strconv.ParseInt(s, 10, 64)
}

// Wait reserves a slot for the seller (asking again when the slot is farther
// than MaxWait) and sleeps until its time. When ctx ends first it gives the
// slot back and returns ctx's error.
func (t *Throttle) Wait(ctx context.Context, seller string) (Reservation, error) {
	for {
		r, err := t.Reserve(ctx, seller)
		if err != nil {
			return Reservation{}, err
		}
		if err := sleep(ctx, r.Wait); err != nil {
			if r.Admitted {
				t.releaseDetached(ctx, r)
			}
			return Reservation{}, fmt.Errorf("throttle: waiting for a slot for seller %q: %w", seller, err)
		}
		if r.Admitted {
			return r, nil
		}
	}
}

// Release gives back a slot the caller will not use (shutdown, cancelled, a
// call the API did not count) so the next caller can take it. Releasing a
// slot that is not held (already released, expired, not admitted) does
// nothing.
func (t *Throttle) Release(ctx context.Context, r Reservation) error {
	if r.ID == "" && r.Global.ID == "" {
		return nil
	}
	if r.Seller == "" {
		return errors.New("throttle: release: the reservation has no seller id")
	}
	var calls []scriptCall
	if r.ID != "" {
		calls = append(calls, t.releaseCall(r.Seller, r.ID))
	}
	if r.Global.ID != "" && t.global != nil {
		calls = append(calls, t.global.releaseCall(r.Seller, r.Global.ID))
	}
	if _, err := t.runAll(ctx, calls...); err != nil {
		return t.fail(ctx, "release a slot", r.Seller, err)
	}
	return nil
}

// Settle tells the throttle that the API answered r's call at answer (Redis
// clock, at or after the true time of the answer): the API counted the call
// somewhere between its send and its answer, so by answer at the latest. A
// zero answer says the call got no answer (a timeout, a connection broken
// after the request went out, the call cancelled): it may be counted up to
// its latest count, the slot + SendWithin + CallTimeout, which the logs hold
// already, so there is nothing to settle.
//
// In the seller's sliding log and in the app-wide log the call's latest
// count moves to answer − Margin (never before the slot) when that is
// earlier, and never later (the package doc's invariant): the next window's
// slots are then placed a Window after the answer instead of W′ after the
// latest count the reservation assumed. A settle that never comes (its
// consumer died, paused, or lost Redis) leaves the logs as safe as they
// were. An entry a log no longer holds (lost with Redis's data), or an
// answer after the latest count (an API slower than CallTimeout: outside
// what the log assumes), blocks that log until answer + Window
// (lua/settle.lua: its entry's place + W′).
//
// A fixed window gives back the places it took for the call in the windows
// after the answer's; a token bucket's entry moves to the answer and tat
// down to the bucket replayed over the entries (lua/settle.lua). Needs
// Redis 6.2 (ZADD LT).
func (t *Throttle) Settle(ctx context.Context, r Reservation, answer time.Time) error {
	given := answer
	answer = t.answered(r, answer)
	seller := r.ID != "" && t.sellerMoves(r, given)
	global := r.Global.ID != "" && t.global != nil && !given.IsZero()
	if !seller && !global {
		return nil
	}
	if r.Seller == "" {
		return errors.New("throttle: settle: the reservation has no seller id")
	}
	// Single commands, not a pipeline of their own: a client that shares
	// round trips (internal/autopipe) sends them with other rows' commands.
	settle := func(keys []string, args []any) error {
		if err := t.settle.Run(ctx, t.rdb, keys, args...).Err(); err != nil {
			return t.fail(ctx, "settle a slot", r.Seller, err)
		}
		return nil
	}
	if seller {
		ks, args := t.sellerSettle(r, answer)
		if err := settle(ks, args); err != nil {
			return err
		}
	}
	if global {
		at := settledAt(answer.Add(-t.p.Margin), r.Global.At)
		return settle([]string{GlobalLogKey, globalKeyPrefix + "block"},
			[]any{at.UnixMicro(), r.Global.ID, (t.p.Global.Window + t.p.Margin).Microseconds(), string(Sliding)})
	}
	return nil
}

// answered is when Settle and SettleStep take r's call to be answered: answer,
// or for a call that got no answer (answer zero: a timeout, a connection
// broken after the request went out, the call cancelled) its latest count,
// the slot + reach.
func (t *Throttle) answered(r Reservation, answer time.Time) time.Time {
	if answer.IsZero() {
		return r.At.Add(t.p.reach() - r.Spread)
	}
	return answer
}

// sellerMoves reports whether a settle at answer has work in the seller's
// log. A call without an answer (answer zero) has none: its latest count is
// in the log already, under every policy. An answered call moves its latest
// count earlier under the sliding log and the bucket (or holds the log
// longer when the answer came after it); under a fixed window it gives back
// the places after the answer's window, when it has any.
func (t *Throttle) sellerMoves(r Reservation, answer time.Time) bool {
	if answer.IsZero() {
		return false
	}
	if t.p.Kind == Fixed {
		w := t.p.Window.Microseconds()
		slot := r.At.Add(-r.Spread).UnixMicro()
		return answer.UnixMicro()/w != (slot+t.p.reach().Microseconds())/w
	}
	return true
}

// sellerSettle is settle.lua's keys and arguments for r's call in the
// seller's own log, answered at answer, by the policy's kind.
func (t *Throttle) sellerSettle(r Reservation, answer time.Time) (ks []string, args []any) {
	args = make([]any, 2, 2+len(t.settleTail))
	args[0], args[1] = t.settledCount(r, answer).UnixMicro(), r.ID
	return t.settleKeys(r.Seller), append(args, t.settleTail...)
}

// settleKeys are settle.lua's keys for the seller's log, by the policy's kind.
func (t *Throttle) settleKeys(seller string) []string {
	switch t.p.Kind {
	case Sliding:
		return []string{"bulkreg:{s:" + seller + "}:log", "bulkreg:{s:" + seller + "}:block"}
	case TokenBucket:
		k := t.keys(seller)
		return []string{k.log, k.block, k.tat}
	default:
		k := t.keys(seller)
		return []string{k.log, k.block}
	}
}

// settledCount is where a settle puts the entry of r's call, answered at
// answer. The API counted the call by its answer. A sliding log's window is
// W′ = Window + Margin long, and the proof (package doc) only needs an entry
// no earlier than its call's count less the margin: the entry goes to
// answer − Margin, never before the slot. A call answered within the margin
// then keeps its slot, the place of every call of its burst, so the next
// window's slots share one place as well (and their rows ask together, the
// room left in it known). The other logs take the answer itself.
func (t *Throttle) settledCount(r Reservation, answer time.Time) time.Time {
	if t.p.Kind != Sliding {
		return answer
	}
	return settledAt(answer.Add(-t.p.Margin), r.At.Add(-r.Spread))
}

// settledAt is a sliding log's settled place: the answer less the margin,
// never before the slot.
func settledAt(at, slot time.Time) time.Time {
	if at.Before(slot) {
		return slot
	}
	return at
}

// AppWide is r without its seller's slot: what Settle and Release have left
// to do once a SettleStep or ReleaseStep took care of the seller's log.
func (r Reservation) AppWide() Reservation {
	r.ID = ""
	return r
}

// releaseCall gives back the seller's slot id.
func (t *Throttle) releaseCall(seller, id string) scriptCall {
	k := t.keys(seller)
	ks, args := []string{k.log}, []any{id}
	if t.p.Kind == TokenBucket {
		ks = append(ks, k.tat)
		interval, _ := t.p.gcra()
		args = append(args, strconv.FormatFloat(interval, 'f', 3, 64), t.p.span().Microseconds())
	}
	return scriptCall{t.release, ks, args}
}

// lossHold is the hold after a loss of Redis's data this process asks for:
// Policy.LossHold, which covers calls sent within the margin of their
// slots and counted there, and as much longer as a call in flight at the
// loss may still be counted: sent up to SendWithin after its slot and
// counted up to CallTimeout after its send (Policy.reach, less the margin
// the hold already has): the latest counts the loss took. It needs no
// process that made such a call to live.
func (t *Throttle) lossHold() time.Duration {
	return t.p.LossHold + t.p.CallTimeout + max(0, t.p.SendWithin-t.p.Margin)
}

// SlotCheck is the throttle's answer about a slot it granted.
type SlotCheck struct {
	// Good: the epoch the slot was granted in is the current epoch of the
	// seller's hash slot and the slot is still in the log. When false, Redis
	// lost the seller's state since (or the slot was given back): others may
	// hold its place in the window, so it must not be used.
	Good bool
	// Epoch is the hash slot's current epoch, "" when its marker is gone.
	Epoch string
	// Now is the Redis clock when the check ran: with the local times the
	// check was sent and answered, it places the slot on the caller's clock.
	Now time.Time
	// GlobalEpoch is the current epoch of the app-wide log's hash slot
	// when the reservation holds an app-wide slot ("" otherwise, or when
	// that marker is gone); Good needs it to be the slot's too.
	GlobalEpoch string
}

// Check tells whether r's slot may still be used (SlotCheck.Good). Ask
// shortly before the call the slot was taken for. One round trip, no writes
// (CheckN asks about several slots of a seller in one). An error wraps
// ErrUnavailable: Redis did not answer, and the slot must not be used
// either.
func (t *Throttle) Check(ctx context.Context, r Reservation) (SlotCheck, error) {
	if !r.Admitted || r.ID == "" || r.Epoch == "" {
		return SlotCheck{}, errors.New("throttle: check: the reservation holds no slot")
	}
	if r.Seller == "" {
		return SlotCheck{}, errors.New("throttle: check: the reservation has no seller id")
	}
	if r.Global.ID == "" || t.global == nil {
		cs, err := t.writeChecks(ctx, r.Seller, []checkItem{{id: r.ID, epoch: r.Epoch}})
		if err != nil {
			return SlotCheck{}, t.fail(ctx, "check a slot", r.Seller, err)
		}
		return cs[0], nil
	}
	if r.Global.Epoch == "" {
		return SlotCheck{}, errors.New("throttle: check: the reservation's app-wide slot has no epoch")
	}
	k := t.keys(r.Seller)
	cmds, err := t.runAll(ctx, scriptCall{t.check, []string{k.log, k.marker}, []any{r.ID, r.Epoch}}, t.global.checkCall(r.Global))
	if err != nil {
		return SlotCheck{}, t.fail(ctx, "check a slot", r.Seller, err)
	}
	var cs [2]SlotCheck
	for i, cmd := range cmds {
		v, err := cmd.Slice()
		if err == nil {
			var got []SlotCheck
			if got, err = parseChecks(v, 1); err == nil {
				cs[i] = got[0]
			}
		}
		if err != nil {
			return SlotCheck{}, fmt.Errorf("throttle: check a slot for seller %q: %w: %w", r.Seller, ErrUnavailable, err)
		}
	}
	c := cs[0]
	c.Good = c.Good && cs[1].Good
	c.GlobalEpoch = cs[1].Epoch
	return c, nil
}

// checkItem is one slot a Check asks about.
type checkItem struct{ id, epoch string }

// maxCheckBatch bounds the slots one check script asks about. A seller's
// slots come due a window's worth at a time (a sliding log books the next
// window at once), so this is several windows of the defaults.
const maxCheckBatch = 512

// writeChecks checks the seller's slots of items in one script (CheckN's;
// Check's with one item). The rows of one window come due together; asking
// one by one would cost a script each and a round trip each on the
// consumer's side, where one answers them all.
// Every slot learns the same Redis clock, read between its own request and
// its answer, as a script of its own would have.
func (t *Throttle) writeChecks(ctx context.Context, seller string, items []checkItem) ([]SlotCheck, error) {
	k := t.keys(seller)
	args := make([]any, 0, 2*len(items))
	for _, it := range items {
		args = append(args, it.id, it.epoch)
	}
	v, err := t.check.Run(ctx, t.rdb, []string{k.log, k.marker}, args...).Slice()
	if err != nil {
		return nil, err
	}
	return parseChecks(v, len(items))
}

// parseChecks reads check.lua's reply about n slots.
func parseChecks(v []any, n int) ([]SlotCheck, error) {
	if len(v) == n+2 {
		epoch, ok := v[0].(string)
		us, err := micros(v[1])
		if ok && err == nil {
			cs := make([]SlotCheck, n)
			now := time.UnixMicro(us)
			for i := range cs {
				g, ok := v[i+2].(int64)
				if !ok {
					break
				}
				cs[i] = SlotCheck{Good: g == 1, Epoch: epoch, Now: now}
				if i == n-1 {
					return cs, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("the check script answered %v, want {epoch, µs, 0|1 × %d}", v, n)
}

// releaseDetached releases r after ctx ended or a reservation's answer was
// lost, with a deadline of its own (Policy.ReleaseTimeout).
func (t *Throttle) releaseDetached(ctx context.Context, r Reservation) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.p.ReleaseTimeout)
	defer cancel()
	_ = t.Release(ctx, r) // best effort: an unreleased slot only means one call fewer, and lapses with the window
}

// isTimeout reports whether err is a deadline that passed while waiting for
// Redis: the command may have run even though no answer came back.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Block records a 429 from the API: no new slot of the seller starts before
// now + retryAfter (Redis clock), for every consumer at once. A later block
// wins; an earlier one changes nothing. Slots already handed out keep their
// times (their callers are asleep and cannot be told); the API refuses them
// too and each such refusal blocks again.
func (t *Throttle) Block(ctx context.Context, seller string, retryAfter time.Duration) error {
	if seller == "" {
		return errors.New("throttle: seller id must not be empty")
	}
	if retryAfter <= 0 {
		return fmt.Errorf("throttle: block seller %q: retryAfter must be greater than 0, got %s", seller, retryAfter)
	}
	if err := t.block.Run(ctx, t.rdb, []string{t.keys(seller).block}, retryAfter.Microseconds()).Err(); err != nil {
		return t.fail(ctx, "block", seller, err)
	}
	return nil
}

// Peek reads the seller's state without changing it.
func (t *Throttle) Peek(ctx context.Context, seller string) (Status, error) {
	if seller == "" {
		return Status{}, errors.New("throttle: seller id must not be empty")
	}
	k := t.keys(seller)
	v, err := t.peek.Run(ctx, t.rdb, []string{k.log, k.block, k.tat, k.marker},
		append([]any{string(t.p.Kind), t.p.Limit, t.p.span().Microseconds()}, t.kargs...)...).Slice()
	if err != nil {
		return Status{}, t.fail(ctx, "peek", seller, err)
	}
	var st Status
	if len(v) == 4 {
		now, err1 := micros(v[0])
		in, ok := v[1].(int64)
		next, err2 := micros(v[2])
		blocked, err3 := micros(v[3])
		if err1 == nil && ok && err2 == nil && err3 == nil {
			st = Status{InWindow: int(in), NextFree: time.UnixMicro(next), Now: time.UnixMicro(now)}
			if blocked > 0 {
				st.BlockedUntil = time.UnixMicro(blocked)
			}
			return st, nil
		}
	}
	return Status{}, fmt.Errorf("throttle: peek seller %q: %w: the peek script answered %v", seller, ErrUnavailable, v)
}

// fail turns a Redis error into the throttle's error: ErrUnavailable unless
// the caller's own context was cancelled.
func (t *Throttle) fail(ctx context.Context, op, seller string, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("throttle: %s for seller %q: %w", op, seller, ctx.Err())
	}
	return fmt.Errorf("throttle: %s for seller %q: %w (%w)", op, seller, ErrUnavailable, err)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
