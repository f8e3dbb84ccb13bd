package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The faults a schedule draws from.
const (
	// Latency: every call is handled (and a 201 counted) Value after it
	// arrives: a latency spike, and an API counting calls late.
	Latency Kind = "latency"
	// APIOutage: every call answered 503.
	APIOutage Kind = "api-5xx"
	// Seller5xx: one seller's calls answered 503 (For 0: until the end, a
	// seller the API keeps failing).
	Seller5xx Kind = "seller-5xx"
	// SKU5xx: some products' calls answered 503 (poison rows).
	SKU5xx Kind = "sku-5xx"
	// Auth: every call answered Status (401 or 403): a rotated credential.
	Auth Kind = "auth"
	// Storm429: every call answered 429 whatever the limit counted.
	Storm429 Kind = "storm-429"
	// RedisFreeze: redis-server stopped (SIGSTOP) for For, then resumed.
	RedisFreeze Kind = "redis-freeze"
	// RedisRestart: redis-server killed and started again empty.
	RedisRestart Kind = "redis-restart"
	// RedisFlush: FLUSHALL.
	RedisFlush Kind = "redis-flush"
	// ConsumerKill: a consumer SIGKILLed, a new one started For later.
	ConsumerKill Kind = "consumer-kill"
	// ConsumerTerm: a consumer SIGTERMed, a new one started For later.
	ConsumerTerm Kind = "consumer-term"
	// ConsumerJoin: one more consumer joins, and leaves (SIGTERM) For later.
	ConsumerJoin Kind = "consumer-join"
	// SlowKafka: every request to the broker answered Value late.
	SlowKafka Kind = "slow-kafka"
	// ConsumerPause: a consumer stopped (SIGSTOP) for For, then resumed
	// (SIGCONT): past its session, the group hands its partitions on while
	// it still holds calls it made.
	ConsumerPause Kind = "consumer-pause"
	// RedisLinkSlow: one consumer's link to Redis (its own proxy) delays
	// every byte, either way, by Value for For.
	RedisLinkSlow Kind = "redis-link-slow"
	// RedisLinkCut: one consumer's link to Redis blackholed for For: the
	// proxy accepts, and neither forwards nor answers until it ends.
	RedisLinkCut Kind = "redis-link-cut"
	// APILinkSlow: one consumer's link to the registration API (its own
	// listener) delays every byte, either way, by Value for For: its calls
	// are counted Value late.
	APILinkSlow Kind = "api-link-slow"
	// APILinkCut: one consumer's link to the API blackholed for For.
	APILinkCut Kind = "api-link-cut"
	// RollingRestart: every running consumer SIGTERMed in turn, For/n
	// apart, a new one starting as each goes: a deploy.
	RollingRestart Kind = "rolling-restart"
	// SlotMigrate: the Redis Cluster hash slot of a seller (Target) moved,
	// with its keys, to the next master (a live reshard).
	SlotMigrate Kind = "slot-migrate"
)

// Fault is one fault of a schedule, at an offset from the run's start.
type Fault struct {
	Kind   Kind
	At     time.Duration
	For    time.Duration // 0 with Seller5xx: until the end of the run
	Value  time.Duration // Latency, SlowKafka: the delay
	Status int           // Auth: 401 or 403
	Target string        // Seller5xx, SlotMigrate: the seller; SKU5xx: the SKUs, comma-separated; consumer and link faults: the consumer's number
	// OnCall: the fault begins at the target consumer's first call, through
	// its registration link, at or after At, Lag after it: a fault placed
	// against a call in flight (named scenarios; seeds place by time).
	OnCall bool
	Lag    time.Duration
}

func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%6.1fs %-14s", f.At.Seconds(), f.Kind)
	if f.For > 0 {
		fmt.Fprintf(&b, " for %.1fs", f.For.Seconds())
	} else if f.Kind == Seller5xx {
		b.WriteString(" until the end")
	}
	if f.Value > 0 {
		fmt.Fprintf(&b, " delay %s", f.Value)
	}
	if f.Status > 0 {
		fmt.Fprintf(&b, " status %d", f.Status)
	}
	if f.Target != "" {
		fmt.Fprintf(&b, " target %s", f.Target)
	}
	if f.OnCall {
		fmt.Fprintf(&b, " at its next call + %s", f.Lag)
	}
	return b.String()
}

// Row is one product row of an upload.
type Row struct {
	SKU     string
	Price   int
	Refused bool // its name carries the Scenario's RefuseMarker: the API refuses it (422), the validator does not
}

// Upload is one file a seller uploads at At.
type Upload struct {
	At     time.Duration
	Seller string
	Name   string // the file's name; the same name is the same file
	Note   string // first upload, same file again, changed content
	Rows   []Row
}

// Scenario is everything one seed decides.
type Scenario struct {
	Seed          int64
	Limit         int
	Window        time.Duration
	Margin        time.Duration
	Policy        string // sliding, fixed or token-bucket: how the API counts, and the consumers with it
	Burst         int    // token-bucket only
	Consumers     int
	Partitions    int
	LedgerLease   time.Duration
	RefuseMarker  string // "" or the text in a product name the API refuses
	RetryAttempts int
	Family        string // "" or "claim race" (claimRace)
	// Session is the consumers' group session timeout and Heartbeat their
	// heartbeat interval (0: 6 s and 1 s, two to three windows: a dead
	// consumer's partitions move after its late counts left the window).
	// Production runs a session a sixth of the window (10 s to 60 s), which
	// seeds from ProductionRatiosFrom draw.
	Session, Heartbeat time.Duration
	// RegistryTimeout is the consumers' call timeout (0: 2 s).
	RegistryTimeout time.Duration
	// Cluster: Redis is a three-master Redis Cluster, not one redis-server.
	Cluster bool
	Uploads []Upload
	Faults  []Fault
}

// The simulation's defaults for a Scenario's zero durations. The registry
// timeout is below the longest latency spike (2.2 s and a tenth of jitter),
// so some calls time out after the API handled them: an answer lost, the
// retry a replay.
const (
	DefaultSession         = 6 * time.Second
	DefaultHeartbeat       = time.Second
	DefaultRegistryTimeout = 2 * time.Second
)

// SessionTimeout is the consumers' session timeout.
func (s Scenario) SessionTimeout() time.Duration { return cmpDur(s.Session, DefaultSession) }

// HeartbeatInterval is the consumers' heartbeat interval.
func (s Scenario) HeartbeatInterval() time.Duration { return cmpDur(s.Heartbeat, DefaultHeartbeat) }

// CallTimeout is the consumers' registry timeout.
func (s Scenario) CallTimeout() time.Duration {
	return cmpDur(s.RegistryTimeout, DefaultRegistryTimeout)
}

func cmpDur(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// FaultsEnd is when the last fault that ends is over and the last upload
// is sent: the settle time is counted from it.
func (s Scenario) FaultsEnd() time.Duration {
	var end time.Duration
	for _, f := range s.Faults {
		end = max(end, f.At+f.Lag+f.For)
	}
	for _, u := range s.Uploads {
		end = max(end, u.At)
	}
	return end
}

// RowsPerSeller counts each seller's rows over all its uploads.
func (s Scenario) RowsPerSeller() map[string]int {
	n := map[string]int{}
	for _, u := range s.Uploads {
		n[u.Seller] += len(u.Rows)
	}
	return n
}

// SettleTime is how long after FaultsEnd every row must have its outcome:
// the seller with the most rows needs its windows, plus what a row may
// spend failing (budget: its retry budget, or its seller's hold until the
// hold limit dead-letters it), plus a dead consumer's session timeout twice
// (its partitions move, and the next may die too), plus the Redis-loss hold
// and some slack for a loaded machine.
//
// A seller failed until the end (Seller5xx with For 0) is its own problem:
// its rows are held and then dead-lettered, or, once other calls of its were
// answered, spend their attempts, and a failed call keeps its slot, so its
// windows count rows × attempts, not rows (27 rows × 5 attempts at 3 per
// 2.1 s need about 94 s of slots).
func (s Scenario) SettleTime(budget, session time.Duration) time.Duration {
	sick := map[string]bool{}
	for _, f := range s.Faults {
		if f.Kind == Seller5xx && f.For == 0 {
			sick[f.Target] = true
		}
	}
	most := 0
	for seller, n := range s.RowsPerSeller() {
		if sick[seller] {
			n *= max(1, s.RetryAttempts)
		}
		most = max(most, n)
	}
	windows := (most+s.Limit-1)/s.Limit + 2
	return time.Duration(windows)*(s.Window+s.Margin) + budget + 2*session + 2*s.Window + 15*time.Second
}

// String is the whole schedule, as a failing run prints it.
func (s Scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: policy %s limit %d", s.Seed, s.Policy, s.Limit)
	if s.Policy == "token-bucket" {
		fmt.Fprintf(&b, " burst %d", s.Burst)
	}
	fmt.Fprintf(&b, " window %s margin %s, %d consumers, %d partitions, ledger lease %s, retry attempts %d, session %s, heartbeat %s, call timeout %s",
		s.Window, s.Margin, s.Consumers, s.Partitions, s.LedgerLease, s.RetryAttempts, s.SessionTimeout(), s.HeartbeatInterval(), s.CallTimeout())
	if s.Cluster {
		b.WriteString(", Redis Cluster of 3 masters")
	}
	if s.RefuseMarker != "" {
		fmt.Fprintf(&b, ", the API refuses names containing %q", s.RefuseMarker)
	}
	if s.Family != "" {
		fmt.Fprintf(&b, ", family %q", s.Family)
	}
	b.WriteString("\nuploads:\n")
	for _, u := range s.Uploads {
		refused := 0
		for _, r := range u.Rows {
			if r.Refused {
				refused++
			}
		}
		fmt.Fprintf(&b, "%6.1fs %s %s (%s): %d rows %s..%s", u.At.Seconds(), u.Seller, u.Name, u.Note, len(u.Rows), u.Rows[0].SKU, u.Rows[len(u.Rows)-1].SKU)
		if refused > 0 {
			fmt.Fprintf(&b, ", %d refused by the API", refused)
		}
		b.WriteString("\n")
	}
	b.WriteString("faults:\n")
	for _, f := range s.Faults {
		b.WriteString(f.String() + "\n")
	}
	return b.String()
}

// Kinds counts the faults by kind.
func (s Scenario) Kinds() map[Kind]int {
	n := map[Kind]int{}
	for _, f := range s.Faults {
		n[f.Kind]++
	}
	return n
}

// ProductionRatiosFrom is the first seed drawn with production's ratios:
// from it on, Generate draws a window of 8–12 s and a session timeout a
// sixth of it (production: 60 s and 10 s), so a dead, paused or cut-off
// consumer's partitions move while its late counts are still in the window;
// the faults that needs (consumer-pause, redis-link-slow, redis-link-cut,
// api-link-slow, api-link-cut, rolling-restart during a latency spike) and,
// on a third of them, a Redis Cluster with a busy seller's hash slot moved
// mid-run (slot-migrate). Seeds below it draw the schedules they always
// drew, so a seed replays as it did when it was recorded (bench/HISTORY.md).
const ProductionRatiosFrom = 30000

// Generate draws a scenario from seed; the same seed gives the same
// scenario on every machine (math/rand/v2's PCG is specified).
func Generate(seed int64) Scenario {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	dur := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(r.Int64N(int64(hi-lo)+1)).Round(10*time.Millisecond)
	}
	s := Scenario{
		Seed:          seed,
		Limit:         3 + r.IntN(6), // 3..8
		Window:        []time.Duration{2 * time.Second, 3 * time.Second}[r.IntN(2)],
		Margin:        []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond}[r.IntN(3)],
		Consumers:     1 + r.IntN(3),
		Partitions:    2 + r.IntN(4),
		LedgerLease:   []time.Duration{1500 * time.Millisecond, 3 * time.Second, time.Minute}[r.IntN(3)],
		RetryAttempts: 3 + r.IntN(4),
	}
	switch p := r.IntN(20); {
	case p < 12:
		s.Policy = "sliding"
	case p < 17:
		s.Policy = "token-bucket"
		s.Burst = 1 + r.IntN(s.Limit)
	default:
		s.Policy = "fixed"
	}
	if r.IntN(3) == 0 {
		s.RefuseMarker = "BANNED"
	}
	prod := seed >= ProductionRatiosFrom
	faultSpan, rowsPerLimit := 20*time.Second, 6
	if prod {
		s.Window = []time.Duration{8 * time.Second, 10 * time.Second, 12 * time.Second}[r.IntN(3)]
		s.Session = s.Window / 6
		s.Heartbeat = s.Session / 4
		s.Cluster = r.IntN(3) == 0
		s.Consumers = 2 + r.IntN(2) // a partition has a next owner
		s.Limit *= 2                // as many windows per seller at the longer window
		// Fewer windows per seller, so a seed of longer windows stays
		// about a minute long; the faults spread over as many windows.
		faultSpan, rowsPerLimit = 30*time.Second, 3
	}

	// Uploads: each seller a first file, then maybe the same file again and
	// a file that changes some of its products and adds new ones.
	sellers := 2 + r.IntN(3)
	var allSKUs []string
	for i := range sellers {
		seller := fmt.Sprintf("seller-%c", 'a'+i)
		n := 4 + r.IntN(rowsPerLimit*s.Limit)
		first := Upload{At: dur(0, 3*time.Second), Seller: seller, Name: seller + "-1.csv", Note: "first upload"}
		if i > 0 && r.IntN(4) == 0 { // a seller who comes late, when others may have broken something
			first.At = dur(8*time.Second, 16*time.Second)
		}
		for j := range n {
			row := Row{SKU: fmt.Sprintf("%s-%03d", strings.TrimPrefix(seller, "seller-"), j+1), Price: 1000 + 100*r.IntN(100)}
			row.Refused = s.RefuseMarker != "" && r.IntN(6) == 0
			first.Rows = append(first.Rows, row)
			allSKUs = append(allSKUs, row.SKU)
		}
		s.Uploads = append(s.Uploads, first)
		if r.IntN(3) == 0 {
			again := first
			again.At, again.Note = first.At+dur(500*time.Millisecond, 12*time.Second), "same file again"
			s.Uploads = append(s.Uploads, again)
		}
		if r.IntN(2) == 0 {
			changed := Upload{At: first.At + dur(0, 15*time.Second), Seller: seller, Name: seller + "-2.csv", Note: "changed content"}
			if s.RefuseMarker != "" && r.IntN(2) == 0 {
				// The fixed file while the first is still in flight: two
				// uploads' rows claim the same SKUs at once.
				changed.At = first.At + dur(0, 3*time.Second)
			}
			for j, row := range first.Rows {
				switch {
				case row.Refused && r.IntN(3) > 0: // the seller fixed the name
					changed.Rows = append(changed.Rows, Row{SKU: row.SKU, Price: row.Price})
				case r.IntN(4) == 0: // another price
					changed.Rows = append(changed.Rows, Row{SKU: row.SKU, Price: row.Price + 100})
				case r.IntN(4) == 0: // the same row
					changed.Rows = append(changed.Rows, row)
				}
				_ = j
			}
			for j := range 1 + r.IntN(2*s.Limit) {
				changed.Rows = append(changed.Rows, Row{SKU: fmt.Sprintf("%s-n%02d", strings.TrimPrefix(seller, "seller-"), j+1), Price: 2000})
			}
			s.Uploads = append(s.Uploads, changed)
		}
	}
	slices.SortStableFunc(s.Uploads, func(a, b Upload) int { return int(a.At - b.At) })

	// Faults: a few, over the first 20 s, overlapping freely.
	kinds := []struct {
		k      Kind
		weight int
	}{
		{Latency, 6}, {APIOutage, 2}, {Seller5xx, 3}, {SKU5xx, 2}, {Auth, 3}, {Storm429, 2},
		{RedisFreeze, 2}, {RedisRestart, 2}, {RedisFlush, 3},
		{ConsumerKill, 3}, {ConsumerTerm, 3}, {ConsumerJoin, 2}, {SlowKafka, 2},
	}
	if prod {
		kinds = append(kinds, []struct {
			k      Kind
			weight int
		}{{ConsumerPause, 3}, {RedisLinkSlow, 2}, {RedisLinkCut, 2}, {APILinkSlow, 2}, {APILinkCut, 2}, {RollingRestart, 2}, {SlotMigrate, 3}}...)
		for i, k := range kinds {
			switch k.k {
			case RedisFreeze, RedisRestart, RedisFlush, RedisLinkSlow, RedisLinkCut:
				// A Cluster client reaches every master by the address
				// the Cluster announces: no per-consumer proxy sits in
				// front of it, and the single-server faults do not apply.
				if s.Cluster {
					kinds[i].weight = 0
				}
			case SlotMigrate:
				if !s.Cluster {
					kinds[i].weight = 0
				}
			}
		}
	}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	busiest := ""
	for seller, n := range s.RowsPerSeller() {
		if busiest == "" || n > s.RowsPerSeller()[busiest] || (n == s.RowsPerSeller()[busiest] && seller < busiest) {
			busiest = seller
		}
	}
	var extra []Fault
	for range 2 + r.IntN(6) {
		pick := r.IntN(total)
		var k Kind
		for _, c := range kinds {
			if pick < c.weight {
				k = c.k
				break
			}
			pick -= c.weight
		}
		f := Fault{Kind: k, At: dur(0, faultSpan)}
		switch k {
		case Latency:
			f.For, f.Value = dur(time.Second, 8*time.Second), dur(300*time.Millisecond, 2200*time.Millisecond)
		case APIOutage, Storm429:
			f.For = dur(500*time.Millisecond, 5*time.Second)
		case Seller5xx:
			f.Target = fmt.Sprintf("seller-%c", 'a'+r.IntN(sellers))
			// Until the end only with the short windows: its rows spend
			// every attempt, a window each at the long ones.
			if r.IntN(2) == 0 && !prod {
				f.At, f.For = 0, 0 // until the end
			} else {
				f.For = dur(time.Second, 8*time.Second)
			}
		case SKU5xx:
			var skus []string
			for range 1 + r.IntN(3) {
				skus = append(skus, allSKUs[r.IntN(len(allSKUs))])
			}
			f.Target, f.For = strings.Join(skus, ","), dur(time.Second, 10*time.Second)
		case Auth:
			f.Status, f.For = []int{401, 403}[r.IntN(2)], dur(300*time.Millisecond, 3*time.Second)
		case RedisFreeze:
			f.For = dur(300*time.Millisecond, 4*time.Second)
		case ConsumerKill, ConsumerTerm:
			f.Target, f.For = fmt.Sprint(r.IntN(s.Consumers)), dur(0, 6*time.Second)
		case ConsumerJoin:
			f.For = dur(2*time.Second, 10*time.Second)
		case SlowKafka:
			f.For, f.Value = dur(time.Second, 6*time.Second), dur(100*time.Millisecond, time.Second)
		case ConsumerPause:
			// Past the session, and some past the window.
			f.Target, f.For = fmt.Sprint(r.IntN(s.Consumers)), dur(s.SessionTimeout()+500*time.Millisecond, s.Window+3*time.Second)
		case RedisLinkSlow:
			f.Target, f.For, f.Value = fmt.Sprint(r.IntN(s.Consumers)), dur(time.Second, 8*time.Second), dur(50*time.Millisecond, 1500*time.Millisecond)
		case RedisLinkCut:
			f.Target, f.For = fmt.Sprint(r.IntN(s.Consumers)), dur(500*time.Millisecond, 6*time.Second)
		case APILinkSlow:
			f.Target, f.For, f.Value = fmt.Sprint(r.IntN(s.Consumers)), dur(time.Second, 8*time.Second), dur(300*time.Millisecond, 2200*time.Millisecond)
		case APILinkCut:
			f.Target, f.For = fmt.Sprint(r.IntN(s.Consumers)), dur(500*time.Millisecond, 5*time.Second)
		case RollingRestart:
			// A deploy during an API slowdown: every call of the restart
			// may be counted later than the margin.
			f.For = dur(2*time.Second, 10*time.Second)
			extra = append(extra, Fault{Kind: Latency, At: max(0, f.At-time.Second), For: f.For + 2*time.Second,
				Value: s.Margin + dur(200*time.Millisecond, 2000*time.Millisecond)})
		case SlotMigrate:
			f.Target = busiest
		}
		s.Faults = append(s.Faults, f)
	}
	if s.Cluster {
		// Every Cluster seed reshards its busiest seller's hash slot once.
		extra = append(extra, Fault{Kind: SlotMigrate, At: dur(2*time.Second, faultSpan), Target: busiest})
	}
	s.Faults = append(s.Faults, extra...)
	claimRace(&s, rand.New(rand.NewPCG(uint64(seed), 0xc1a1)), dur)
	slices.SortStableFunc(s.Uploads, func(a, b Upload) int { return int(a.At - b.At) })
	slices.SortStableFunc(s.Faults, func(a, b Fault) int { return int(a.At - b.At) })
	return s
}

// claimRace turns a quarter of the seeds into a race for SKU claims, the
// mix no single fault reaches: the API refuses some rows' names, the seller
// sends the fixed file while the first is still in flight, and a latency
// spike longer than the ledger's lease and the registry timeout makes claims
// lapse and answers go missing while both uploads' rows hold the same SKUs.
// It draws from a stream of its own, so the other seeds keep their schedule.
func claimRace(s *Scenario, r *rand.Rand, dur func(lo, hi time.Duration) time.Duration) {
	if r.IntN(4) != 0 {
		return
	}
	s.Family = "claim race"
	s.RefuseMarker = "BANNED"
	s.LedgerLease = 1500 * time.Millisecond
	var kept []Upload
	for _, u := range s.Uploads {
		if u.Note != "changed content" {
			kept = append(kept, u)
		}
	}
	s.Uploads = kept
	var changed []Upload
	for _, u := range s.Uploads {
		if u.Note != "first upload" {
			continue
		}
		fixed := Upload{At: u.At + dur(0, 1500*time.Millisecond), Seller: u.Seller, Name: strings.TrimSuffix(u.Name, "-1.csv") + "-2.csv", Note: "changed content"}
		for i := range u.Rows {
			if r.IntN(3) == 0 {
				u.Rows[i].Refused = true // shared with a "same file again" of it
				fixed.Rows = append(fixed.Rows, Row{SKU: u.Rows[i].SKU, Price: u.Rows[i].Price})
			}
		}
		if len(fixed.Rows) > 0 {
			changed = append(changed, fixed)
		}
	}
	s.Uploads = append(s.Uploads, changed...)
	s.Faults = append(s.Faults, Fault{Kind: Latency, At: dur(0, 4*time.Second), For: dur(4*time.Second, 10*time.Second), Value: dur(1800*time.Millisecond, 2400*time.Millisecond)})
	if r.IntN(2) == 0 {
		s.Faults = append(s.Faults, Fault{Kind: ConsumerKill, At: dur(2*time.Second, 10*time.Second), For: dur(0, 3*time.Second), Target: fmt.Sprint(r.IntN(s.Consumers))})
	}
}
