package throttle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/redisfail"
	"github.com/bulkreg/bulkreg/lua"
)

// HashSlots is the number of Redis Cluster hash slots: every key lives in
// slot CRC16(key's hash tag) mod HashSlots, on Cluster and (by the same rule,
// for the markers) on a single Redis.
const HashSlots = 16384

// Causes of a marker's state (Marker.Cause).
const (
	// CauseInit: Initialize created the marker on a new Redis; nothing was lost.
	CauseInit = "init"
	// CauseMissing: a reservation found the marker gone. Redis lost the data
	// of the hash slot (a restart without persistence, FLUSHALL, a failover
	// to a replica that had not received it), or it was never initialised.
	CauseMissing = "missing"
	// CauseNewServer: a reservation found the marker written by another
	// redis-server process: a restart from disk (an append-only file may
	// miss its last second) or a failover (a replica may miss the last
	// writes). Part of the data may be lost. A marker that moved with its
	// hash slot to another master of the same Cluster (a reshard) is not
	// lost: it keeps its state and cause, and records the move (Marker.Moved).
	CauseNewServer = "new-server"
)

// Markers names the marker of each hash slot: bulkreg:{<tag>}:marker, where
// the tag is chosen so the key lives in that hash slot. A seller's reserve
// script reads the marker of the seller's hash slot in the same script, with
// no extra round trip, on Redis Cluster too (one slot, so one node); the
// marker outlives the sellers' logs, so its absence means Redis lost the
// slot's data rather than that the sellers were idle. lua/slot_guard.lua
// describes its fields.
//
// A slot migration moves the marker with the sellers' logs, whole; the
// reserve script tells it from a failover or a restart (which may miss the
// last writes) by the node and replication ids the marker records, and
// takes the marker over without a new epoch or a hold (slot_guard.lua).
//
// The tags are computed (a few milliseconds) and the same in every process
// and every version: a changed tag would make every Redis in use look lost.
type Markers struct {
	keys []string // keys[slot] is the marker key of slot, built once: a reservation asks for one per call
}

// NewMarkers computes the tag of every hash slot.
func NewMarkers() *Markers {
	tags := make([]string, HashSlots)
	left := HashSlots
	for n := 0; left > 0; n++ {
		tag := "m" + strconv.FormatInt(int64(n), 36)
		if s := crc16(tag) % HashSlots; tags[s] == "" {
			tags[s] = tag
			left--
		}
	}
	keys := make([]string, HashSlots)
	for slot, tag := range tags {
		keys[slot] = "bulkreg:{" + tag + "}:marker"
	}
	return &Markers{keys: keys}
}

// OfSlot is the marker key of hash slot slot (0 ≤ slot < HashSlots).
func (m *Markers) OfSlot(slot int) string { return m.keys[slot] }

// For is the marker key of the hash slot key lives in.
func (m *Markers) For(key string) string { return m.OfSlot(KeySlot(key)) }

// OfSeller is the marker key of the hash slot of a seller's keys.
func (m *Markers) OfSeller(seller string) string {
	if strings.IndexByte(seller, '}') >= 0 {
		return m.For(sellerPrefix(seller)) // the tag ends inside the seller id
	}
	// The hash tag of sellerPrefix(seller) is "s:" + seller: hashed
	// without building the prefix.
	return m.keys[crc16More(crc16("s:"), seller)%HashSlots]
}

func sellerPrefix(seller string) string { return "bulkreg:{s:" + seller + "}:" }

// KeySlot is the Redis Cluster hash slot of key: CRC16 of its hash tag (the
// text between the first '{' and the next '}', when not empty) or of the
// whole key, mod HashSlots.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % HashSlots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), Redis
// Cluster's key hash.
func crc16(s string) uint16 { return crc16More(0, s) }

// crc16More goes on with the CRC crc of some text over s, a byte at a time
// from a table (a reservation hashes its seller's tag on every call).
func crc16More(crc uint16, s string) uint16 {
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^s[i]]
	}
	return crc
}

// crc16Table[b] is the CRC of the byte b: computed once, never written after.
var crc16Table = func() (t [256]uint16) {
	for b := range t {
		crc := uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[b] = crc
	}
	return t
}()

// Marker is a hash slot's marker as Redis holds it.
type Marker struct {
	// Found: Redis holds the marker. When false, the hash slot's data was
	// lost (or the Redis was never initialised) and no reservation has
	// found out yet; the other fields are zero.
	Found bool
	// Epoch changes with every loss found; slots granted in another epoch
	// are not used (Throttle.Check).
	Epoch string
	// HoldUntil: no slot of any seller in the hash slot starts before it
	// (Redis clock); zero when the slot never had a hold.
	HoldUntil time.Time
	// Since is when the current state began: Initialize, or the reservation
	// that found the loss. What Redis held of the hash slot before Since may
	// be gone (CauseMissing: all of it; CauseNewServer: possibly the last
	// writes before the change); from Since on it is whole.
	Since time.Time
	// Cause is CauseInit, CauseMissing or CauseNewServer.
	Cause string
	// Server is the run_id of the redis-server process the state belongs to.
	Server string
	// Node is that process's Redis Cluster node id; "" on a single Redis, or
	// before a reservation in the hash slot recorded it.
	Node string
	// Moved is when a reservation last found the marker moved whole, with
	// its hash slot, from another master of the same Cluster (zero: never).
	// A move is not a loss: Epoch, HoldUntil, Since and Cause stay.
	Moved time.Time
}

// Read returns the marker of the hash slot of each key, in order: one
// pipeline, no writes.
func (m *Markers) Read(ctx context.Context, rdb redis.UniversalClient, keys ...string) ([]Marker, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HGetAll(ctx, m.For(k))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("throttle: read the hash-slot markers: %w", redisfail.Wrap(err))
	}
	out := make([]Marker, len(keys))
	for i, c := range cmds {
		out[i] = parseMarker(c.Val())
	}
	return out, nil
}

func parseMarker(h map[string]string) Marker {
	if h["epoch"] == "" {
		return Marker{}
	}
	mk := Marker{Found: true, Epoch: h["epoch"], Cause: h["cause"], Server: h["server"], Node: h["node"]}
	if us, err := strconv.ParseInt(h["hold"], 10, 64); err == nil && us > 0 {
		mk.HoldUntil = time.UnixMicro(us)
	}
	if us, err := strconv.ParseInt(h["since"], 10, 64); err == nil && us > 0 {
		mk.Since = time.UnixMicro(us)
	}
	if us, err := strconv.ParseInt(h["moved"], 10, 64); err == nil && us > 0 {
		mk.Moved = time.UnixMicro(us)
	}
	return mk
}

// ErrNotNew is wrapped in Initialize's error when a Redis already holds some
// markers but not all: it is in use and lost part of its data.
var ErrNotNew = errors.New("this Redis is not new")

// Initialized is what Initialize did.
type Initialized struct {
	Created int // markers created
	Present int // markers that were there already
}

// Initialize prepares a new Redis (or Redis Cluster) for the throttle: it
// creates the marker of every hash slot, with no hold.
//
// Without it a new Redis looks like one that lost its data, and the first
// reservation in each hash slot holds every seller there for a window (the
// safe side). Run it once, on a new Redis, before the first consumer starts.
// Do not run it on a Redis that lost its data while consumers were calling:
// it would declare that nothing was called in the last window.
//
// It changes no marker that exists: on a Redis that has all of them it does
// nothing, and it refuses (ErrNotNew) a Redis that has only some of them, or
// a Cluster where one master has none while others have theirs, because
// that Redis lost data and its reservations must hold.
func Initialize(ctx context.Context, rdb redis.UniversalClient) (Initialized, error) {
	if rdb == nil {
		return Initialized{}, errors.New("throttle: initialize: a Redis client is required")
	}
	m := NewMarkers()
	script := redis.NewScript(lua.Script("init.lua"))
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		// The script's flag lets it touch many hash slots of one Cluster
		// node; a single Redis needs none, and the demo's in-process
		// stand-in cannot read it.
		_, body, _ := strings.Cut(lua.Script("init.lua"), "\n")
		script = redis.NewScript(body)
	}
	type node struct {
		name string
		run  func(ctx context.Context, mode string) (present, created int, err error)
		size int
	}
	runOn := func(c redis.Scripter, keys []string) func(ctx context.Context, mode string) (int, int, error) {
		return func(ctx context.Context, mode string) (int, int, error) {
			args := make([]any, 0, 1+len(keys))
			args = append(args, mode)
			for _, k := range keys {
				args = append(args, k)
			}
			v, err := script.Run(ctx, c, nil, args...).Int64Slice()
			if err != nil {
				return 0, 0, redisfail.Wrap(err)
			}
			if len(v) != 2 {
				return 0, 0, fmt.Errorf("init.lua answered %v, want {present, created}", v)
			}
			return int(v[0]), int(v[1]), nil
		}
	}
	var nodes []node
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			slots, err := servedSlots(ctx, c)
			if err != nil {
				return err
			}
			keys := make([]string, len(slots))
			for i, s := range slots {
				keys[i] = m.OfSlot(s)
			}
			mu.Lock()
			nodes = append(nodes, node{name: c.Options().Addr, run: runOn(c, keys), size: len(keys)})
			mu.Unlock()
			return nil
		})
		if err != nil {
			return Initialized{}, fmt.Errorf("throttle: initialize: list the Cluster's masters and their slots: %w", err)
		}
	} else {
		keys := make([]string, HashSlots)
		for s := range keys {
			keys[s] = m.OfSlot(s)
		}
		nodes = []node{{name: "Redis", run: runOn(rdb, keys), size: len(keys)}}
	}
	var res Initialized
	present := make([]int, len(nodes))
	for i, n := range nodes {
		p, _, err := n.run(ctx, "count")
		if err != nil {
			return Initialized{}, fmt.Errorf("throttle: initialize: count the markers on %s: %w", n.name, err)
		}
		present[i] = p
		res.Present += p
	}
	var errs []error
	for i, n := range nodes {
		switch {
		case present[i] == n.size:
		case present[i] > 0:
			errs = append(errs, fmt.Errorf("%s holds %d of its %d hash-slot markers: it lost the data of the others (or consumers reserved slots before it was initialised), and the throttle holds their sellers one window by itself", n.name, present[i], n.size))
		case res.Present > 0:
			errs = append(errs, fmt.Errorf("%s holds none of its %d hash-slot markers while other masters hold theirs: it lost its data, and its sellers are held one window by the throttle itself", n.name, n.size))
		}
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("throttle: initialize: %w: %w; nothing was initialised", ErrNotNew, errors.Join(errs...))
	}
	if res.Present > 0 {
		return res, nil // initialised before
	}
	for _, n := range nodes {
		_, c, err := n.run(ctx, "create")
		if err != nil {
			return res, fmt.Errorf("throttle: initialize: create the markers on %s: %w", n.name, err)
		}
		res.Created += c
	}
	return res, nil
}

// servedSlots lists the hash slots a Cluster master serves.
func servedSlots(ctx context.Context, c *redis.Client) ([]int, error) {
	id, err := c.ClusterMyID(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER MYID on %s: %w", c.Options().Addr, redisfail.Wrap(err))
	}
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SHARDS on %s: %w", c.Options().Addr, redisfail.Wrap(err))
	}
	var slots []int
	for _, sh := range shards {
		if !slices.ContainsFunc(sh.Nodes, func(n redis.Node) bool { return n.ID == id && n.Role == "master" }) {
			continue
		}
		for _, r := range sh.Slots {
			for s := r.Start; s <= r.End; s++ {
				slots = append(slots, int(s))
			}
		}
	}
	return slots, nil
}
