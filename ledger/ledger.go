// Package ledger remembers, per seller, every seller_sku bulkreg registered:
// the product id the registration API returned, a hash of the content
// registered and the row that registered it. It is a durable business
// record, not a cache: it is what keeps a fixed-and-uploaded-again file from
// registering its good rows a second time.
//
// The producer looks an upload's SKUs up before publishing (Lookup, one
// round trip for the whole file). A consumer claims a row's SKU before taking
// a throttle slot (Claim), marks it registered after the API's 201 or 200
// (Mark), and releases its claim when it gives up (Release). The claim is
// what makes two uploads of one SKU in flight at once register it once.
//
// One HASH per seller, hash-tagged like the throttle's keys so every script
// runs on one Redis Cluster slot:
//
//	bulkreg:{s:<seller>}:ledger   HASH  seller_sku → entry (tab-separated fields, see lua/ledger_claim.lua)
//
// The whole hash expires Retention after the seller's last write to it: Redis
// 7.0 has no expiry per hash field, and a seller who keeps registering keeps
// every SKU it ever registered.
//
// A SKU is keyed by its NFC form (productrules.NormalizeSKU): every method
// normalises the SKU it is given, so "가방-001" typed as one code point a
// syllable and pasted as jamo (NFD) is one entry whoever asks. Entries written
// before SKUs were normalised are keyed as the seller typed them, NFC or NFD:
// Lookup finds an entry under either form, and Claim moves one found under
// the NFD form to the NFC key (atomically, in its script), so the ledger ends
// up keyed by NFC as its SKUs are used again. A key in a mixed form (some
// syllables composed, some not) is not found; no writer produces one.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/redisfail"
	"github.com/bulkreg/bulkreg/lua"
	"github.com/bulkreg/bulkreg/productrules"
)

// Defaults of Options.
const (
	// DefaultRetention: sellers re-upload a corrected file weeks or months
	// later; 400 days covers a yearly catalogue cycle with a month to spare.
	DefaultRetention = 400 * 24 * time.Hour
	// DefaultLease is longer than a row normally holds a claim between two
	// renewals (one wait for a throttle slot, at most about one 60 s window,
	// plus one call of at most the 10 s registry timeout, plus a backoff).
	DefaultLease = 5 * time.Minute
	// DefaultAsideRetention is how long the records of dead-lettered rows
	// are kept: Kafka's default retention of the rows topic, past which no
	// record can be read again.
	DefaultAsideRetention = 7 * 24 * time.Hour
)

// Options configure a Ledger. Zero fields take the defaults.
type Options struct {
	// Retention is how long a seller's ledger is kept after its last write
	// (a claim, a registration). Default DefaultRetention.
	Retention time.Duration
	// Lease is how long a claim holds without its row claiming again. A row
	// renews its claim before every attempt; a claim whose row crashed or was
	// given back lapses after Lease, and another row with the same SKU may
	// take it over (calling with the same Idempotency-Key, so this is safe
	// even while the first row is alive). Default DefaultLease.
	Lease time.Duration
	// AsideRetention is how long the Kafka records of a seller's
	// dead-lettered rows are kept after its last one (SetAside). Default
	// DefaultAsideRetention.
	AsideRetention time.Duration
}

// State of an entry.
type State string

const (
	// Claimed: a row is registering the SKU, or gave up without knowing
	// whether its calls registered it (then its lease has ended).
	Claimed State = "claimed"
	// Registered: the API registered the SKU; ProductID is its product.
	Registered State = "registered"
)

// Entry is what the ledger holds for one SKU.
type Entry struct {
	State State
	// Hash is bulkreg.Product.ContentHash of the product registered, or of
	// the product the claiming row is registering.
	Hash string
	// Row is an Idempotency-Key (<upload_id>:<row>): of the row that
	// registered the SKU (Registered), or of the row holding the claim (Claimed).
	Row string
	// CallKey (Claimed only) is the Idempotency-Key the API is called with
	// for this SKU: the first claimer's own, kept by every later claimer.
	CallKey string
	// ProductID (Registered only) is the id the API returned.
	ProductID string
	// At is when the SKU was registered (Registered) or when the claim's
	// lease ends (Claimed; the zero time for a released claim), on the Redis clock.
	At time.Time
	// Shared (Claimed only): a row whose own key is not CallKey has held
	// the claim, so it may have registered its content under CallKey. Such
	// an entry is never forgotten (Release): only a call under CallKey can
	// tell what it registered. True for a claim of an older version, which
	// did not record it.
	Shared bool
}

// AlreadyRegistered tells the seller, in the words of a row result, which
// product a registered SKU already is and where it came from: "already
// registered as P-17 by upload 9f86d081884c7d65 row 5 on 2026-03-02; nothing
// was sent again".
func (e Entry) AlreadyRegistered() string {
	return "already " + e.Origin() + "; nothing was sent again"
}

// Origin says which product a registered SKU is and where it came from:
// "registered as P-17 by upload 9f86d081884c7d65 row 5 on 2026-03-02" (the
// row and the day when the entry names them).
func (e Entry) Origin() string {
	msg := "registered as " + e.ProductID
	if upload, row, ok := strings.Cut(e.Row, ":"); ok {
		msg += " by upload " + upload + " row " + row
	}
	if !e.At.IsZero() {
		msg += " on " + e.At.UTC().Format(time.DateOnly)
	}
	return msg
}

// Facts are AlreadyRegistered's facts as parameters of the message table:
// "product"; when the entry names its row and time, also "kind" ("from"),
// "upload", "row", "date" (the day in UTC) and "at" (the instant, which a
// report says in the seller's zone).
func (e Entry) Facts() map[string]string {
	f := map[string]string{"product": e.ProductID}
	if upload, row, ok := strings.Cut(e.Row, ":"); ok && !e.At.IsZero() {
		f["kind"], f["upload"], f["row"], f["date"] = "from", upload, row, e.At.UTC().Format(time.DateOnly)
		f["at"] = e.At.UTC().Format(time.RFC3339Nano)
	}
	return f
}

// Verdict is Claim's answer.
type Verdict int

const (
	// Call: the row holds the claim; call the API with Claim.CallKey.
	Call Verdict = iota + 1
	// Wait: another row holds a live claim; take no slot and ask again
	// within Claim.RetryIn.
	Wait
	// Done: the SKU is registered with this content (by this row or another:
	// compare Entry.Row); no call.
	Done
	// Conflict: the SKU is registered with other content; no call.
	Conflict
	// Aside: the row of this same Kafka record was dead-lettered (SetAside)
	// and is read again because its offset was not committed; no call.
	// Claim.Aside is what its dead letter said.
	Aside
)

func (v Verdict) String() string {
	switch v {
	case Call:
		return "call"
	case Wait:
		return "wait"
	case Done:
		return "registered"
	case Conflict:
		return "conflict"
	case Aside:
		return "aside"
	}
	return "unknown"
}

// Claim is the answer to a row claiming its SKU.
type Claim struct {
	Verdict Verdict
	// CallKey (Call) is the Idempotency-Key to call the API with: the row's
	// own, or the one an earlier claimer of the SKU already called with.
	CallKey string
	// Entry is what the ledger holds after the claim: the row's claim (Call),
	// the other row's claim (Wait) or the registration (Done, Conflict).
	Entry Entry
	// RetryIn (Wait) is how long until the other row's lease ends.
	RetryIn time.Duration
	// Aside (Aside) is the note of the row's dead letter; Entry is empty.
	Aside AsideNote
	// At is when the ledger decided, on the Redis clock. A claim (Call) is
	// as old as the Redis data that holds it: a loss of the seller's hash
	// slot after At takes it (the throttle's hold after the loss tells).
	At time.Time
}

// AsideNote is what a dead letter said about its row, kept with the row's
// Kafka record (SetAside) so that a re-read of the record finishes the row
// with the same result.
type AsideNote struct {
	Class    string // the dead letter's class
	Attempts int
	Reason   string // the last failure; tabs and newlines become spaces
}

// maxAsideReason caps a note's reason: an API's error message can be long,
// and the note is only there to say again what the row's result said.
const maxAsideReason = 500

func (n AsideNote) encode() string {
	r := strings.Map(func(c rune) rune {
		if c == '\t' || c == '\n' || c == '\r' {
			return ' '
		}
		return c
	}, n.Reason)
	if len(r) > maxAsideReason {
		r = strings.ToValidUTF8(r[:maxAsideReason], "")
	}
	return n.Class + "\t" + strconv.Itoa(n.Attempts) + "\t" + r
}

func decodeNote(v string) (AsideNote, error) {
	f := strings.SplitN(v, "\t", 3)
	if len(f) != 3 {
		return AsideNote{}, fmt.Errorf("%w: set-aside note %q has %d fields, want 3", ErrUnreadable, v, len(f))
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return AsideNote{}, fmt.Errorf("%w: set-aside note %q: attempts %q is not a number", ErrUnreadable, v, f[1])
	}
	return AsideNote{Class: f[0], Attempts: n, Reason: f[2]}, nil
}

// ErrInvalid marks arguments the ledger cannot store (an empty SKU, a tab in
// a product id); asking again cannot help.
var ErrInvalid = errors.New("invalid ledger arguments")

// ErrUnreadable marks an entry the ledger cannot parse (written by a newer
// version or damaged by hand); the SKU cannot be decided until it is fixed.
var ErrUnreadable = errors.New("unreadable ledger entry")

// Ledger is the SKU ledger in Redis. It is safe for concurrent use.
type Ledger struct {
	rdb     redis.UniversalClient
	opts    Options
	claim   *redis.Script
	mark    *redis.Script
	release *redis.Script
	// retentionMs is opts.Retention in ms as a script argument, made once
	// for the marks of every registration.
	retentionMs any
}

type claimArgs struct{ sku, alias, row, hash, from string }

// keys returns a SKU's key in the ledger (its NFC form) and the NFD form an
// entry written before SKUs were normalised may be under ("" when it is the
// key itself, as for every SKU without composed characters).
func keys(sku string) (key, alias string) {
	key = productrules.NormalizeSKU(sku)
	if d := productrules.NFD(key); d != key {
		alias = d
	}
	return key, alias
}

type claimReply struct {
	verdict, entry string
	now            int64 // ms, Redis clock
}

// New returns a Ledger over rdb with o's zero fields set to their defaults.
func New(rdb redis.UniversalClient, o Options) *Ledger {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.AsideRetention <= 0 {
		o.AsideRetention = DefaultAsideRetention
	}
	l := &Ledger{
		rdb:     rdb,
		opts:    o,
		claim:   redis.NewScript(lua.Script("ledger_claim.lua")),
		mark:    redis.NewScript(lua.Script("ledger_mark.lua")),
		release: redis.NewScript(lua.Script("ledger_release.lua")),
	}
	l.retentionMs = o.Retention.Milliseconds()
	return l
}

// Options returns the options in effect, defaults filled in.
func (l *Ledger) Options() Options { return l.opts }

// Key is the Redis key of a seller's ledger.
func Key(seller string) string { return "bulkreg:{s:" + seller + "}:ledger" }

// AsideKey is the Redis key of the Kafka records of a seller's dead-lettered
// rows (SetAside), on the ledger's hash slot.
func AsideKey(seller string) string { return "bulkreg:{s:" + seller + "}:aside" }

// Lookup returns the entries of the given SKUs that the seller's ledger
// holds, in one round trip; SKUs it does not know are absent from the map.
// The map is keyed by the SKUs as given; each is looked up by its NFC key
// and, for an entry written before SKUs were normalised, its NFD form.
func (l *Ledger) Lookup(ctx context.Context, seller string, skus []string) (map[string]Entry, error) {
	out := map[string]Entry{}
	if len(skus) == 0 {
		return out, nil
	}
	// fields: the SKUs' keys, in order, then the NFD forms of those that have one.
	fields := make([]string, len(skus), 2*len(skus))
	aliasAt := make([]int, len(skus)) // index of the SKU's NFD form in fields, or -1
	var aliases []string
	for i, sku := range skus {
		key, alias := keys(sku)
		fields[i], aliasAt[i] = key, -1
		if alias != "" {
			aliasAt[i] = len(skus) + len(aliases)
			aliases = append(aliases, alias)
		}
	}
	fields = append(fields, aliases...)
	vals, err := l.rdb.HMGet(ctx, Key(seller), fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("look up %d SKUs of seller %s in the ledger: %w", len(skus), seller, redisfail.Wrap(err))
	}
	for i, sku := range skus {
		s, ok := vals[i].(string)
		if !ok && aliasAt[i] >= 0 {
			s, ok = vals[aliasAt[i]].(string)
		}
		if !ok {
			continue
		}
		e, err := parse(s)
		if err != nil {
			return nil, fmt.Errorf("look up seller_sku %s of seller %s: %w", sku, seller, err)
		}
		out[sku] = e
	}
	return out, nil
}

// Claim claims seller's sku for the row whose own Idempotency-Key is row,
// registering a product whose content hash is hash. from is the Kafka record
// the row was read from (Record; "" when unknown), which tells a re-read of a
// row set aside (Aside) from a copy sent again. See Verdict for the answers.
// The Redis clock decides leases, so consumer clocks never matter.
func (l *Ledger) Claim(ctx context.Context, seller, sku, row, hash, from string) (Claim, error) {
	sku, alias := keys(sku)
	if err := check(seller, sku, row, hash); err != nil {
		return Claim{}, err
	}
	if strings.ContainsAny(from, "\t\n") {
		return Claim{}, fmt.Errorf("%w: seller_sku %s: the Kafka record %q holds a tab or newline", ErrInvalid, sku, from)
	}
	res, err := l.writeClaims(ctx, seller, []claimArgs{{sku: sku, alias: alias, row: row, hash: hash, from: from}})
	if err != nil {
		return Claim{}, fmt.Errorf("claim seller_sku %s of seller %s in the ledger: %w", sku, seller, err)
	}
	return decide(seller, sku, res[0])
}

// decide reads the claim script's answer about one SKU.
func decide(seller, sku string, res claimReply) (Claim, error) {
	if res.verdict == "aside" {
		note, err := decodeNote(res.entry)
		if err != nil {
			return Claim{}, fmt.Errorf("claim seller_sku %s of seller %s: %w", sku, seller, err)
		}
		return Claim{Verdict: Aside, Aside: note, At: time.UnixMilli(res.now)}, nil
	}
	e, err := parse(res.entry) // an "error" verdict carries the entry that cannot be read
	if err == nil && res.verdict == "error" {
		err = fmt.Errorf("%w: %q", ErrUnreadable, res.entry)
	}
	if err != nil {
		return Claim{}, fmt.Errorf("claim seller_sku %s of seller %s: %w", sku, seller, err)
	}
	c := Claim{Entry: e, At: time.UnixMilli(res.now)}
	switch res.verdict {
	case "call":
		c.Verdict, c.CallKey = Call, e.CallKey
	case "wait":
		c.Verdict = Wait
		c.RetryIn = max(0, time.Duration(e.At.UnixMilli()-res.now)*time.Millisecond)
	case "registered":
		c.Verdict = Done
	case "conflict":
		c.Verdict = Conflict
	default:
		return Claim{}, fmt.Errorf("claim seller_sku %s of seller %s: unknown verdict %q", sku, seller, res.verdict)
	}
	return c, nil
}

// writeClaims is one claim call for claims of one seller.
func (l *Ledger) writeClaims(ctx context.Context, seller string, claims []claimArgs) ([]claimReply, error) {
	args := make([]any, 0, 2+5*len(claims))
	args = append(args, l.opts.Lease.Milliseconds(), l.opts.Retention.Milliseconds())
	for _, c := range claims {
		args = append(args, c.sku, c.alias, c.row, c.hash, c.from)
	}
	res, err := l.claim.Run(ctx, l.rdb, []string{Key(seller), AsideKey(seller)}, args...).Text()
	if err != nil {
		return nil, fmt.Errorf("the claim script did not run: %w", redisfail.Wrap(err))
	}
	out := make([]claimReply, len(claims))
	if err := readClaimReplies(res, out); err != nil {
		return nil, fmt.Errorf("unexpected reply to %d claims: %w", len(claims), err)
	}
	return out, nil
}

// readClaimReplies reads ledger_claim.lua's reply into out, a reply per
// claim: the clock, then a verdict and an entry for each (eachAnswer).
func readClaimReplies(reply string, out []claimReply) error {
	i := strings.IndexByte(reply, ' ')
	if i < 0 {
		i = len(reply)
	}
	now, err := strconv.ParseInt(reply[:i], 10, 64)
	if err != nil {
		return fmt.Errorf("the claim script answered %.200q, want the time in ms, then a verdict and an entry per claim", reply)
	}
	return eachAnswer(reply[i:], len(out), func(i int, verdict, entry string) {
		out[i] = claimReply{verdict: verdict, entry: entry, now: now}
	})
}

// Mark records that the API registered seller's sku as productID, by the
// row whose Idempotency-Key is row, with content hash hash. When the SKU was
// registered already, the first registration is kept and returned: the
// caller compares the returned Entry.Row with its own key to tell its own
// registration from another row's.
func (l *Ledger) Mark(ctx context.Context, seller, sku, row, hash, productID string) (Entry, error) {
	sku = productrules.NormalizeSKU(sku)
	if err := checkMark(seller, sku, row, hash, productID); err != nil {
		return Entry{}, err
	}
	res, err := l.mark.Run(ctx, l.rdb, []string{Key(seller)}, sku, row, hash, productID, l.opts.Retention.Milliseconds()).Text()
	if err != nil {
		return Entry{}, fmt.Errorf("mark seller_sku %s of seller %s registered in the ledger: %w", sku, seller, redisfail.Wrap(err))
	}
	var e [1]MarkResult
	if err := readMarks(seller, res, []int{0}, []string{sku}, e[:]); err != nil {
		return Entry{}, err
	}
	return e[0].Entry, e[0].Err
}

func checkMark(seller, sku, row, hash, productID string) error {
	if err := check(seller, sku, row, hash); err != nil {
		return err
	}
	if productID == "" || strings.ContainsAny(productID, "\t\n") {
		return fmt.Errorf("%w: mark seller_sku %s of seller %s registered: product id %q is empty or holds a tab or newline", ErrInvalid, sku, seller, productID)
	}
	return nil
}

// MarkRequest is one registration to mark: Mark's arguments.
type MarkRequest struct {
	SKU, Row, Hash, ProductID string
}

// readMarks reads ledger_mark.lua's reply about the marks sent (at: their
// places in into).
func readMarks(seller, reply string, at []int, skus []string, into []MarkResult) error {
	err := eachAnswer(reply, len(at), func(j int, marked, entry string) {
		e, err := parse(entry)
		if err != nil {
			err = fmt.Errorf("mark seller_sku %s of seller %s: %w", skus[j], seller, err)
		}
		into[at[j]] = MarkResult{Entry: e, Err: err}
	})
	if err != nil {
		return fmt.Errorf("mark %d SKUs of seller %s: the mark script %w", len(at), seller, err)
	}
	return nil
}

// eachAnswer reads n answers of a ledger script, " <word> <bytes> <entry>"
// each (an entry may hold any byte: its length says where it ends), handing
// each to fn as parts of reply: reading them allocates nothing.
func eachAnswer(reply string, n int, fn func(i int, word, entry string)) error {
	rest := reply
	for i := range n {
		after, ok0 := strings.CutPrefix(rest, " ")
		word, after, ok1 := strings.Cut(after, " ")
		size, after, ok2 := strings.Cut(after, " ")
		k, err := strconv.Atoi(size)
		if !ok0 || !ok1 || !ok2 || err != nil || k < 0 || k > len(after) {
			return fmt.Errorf("answered %d of %d entries whole, then %.200q", i, n, rest)
		}
		fn(i, word, after[:k])
		rest = after[k:]
	}
	if rest != "" {
		return fmt.Errorf("answered more than %d entries: %.200q", n, rest)
	}
	return nil
}

// Release gives up the claim of the row whose own Idempotency-Key is row.
// The lease ends and the entry stays, so the next claimer calls with the
// same key (after a 5xx or a dead letter nobody knows whether the API
// registered it). forget asks for the entry to be deleted instead, when the
// API refused the row's own content (400/422) under the row's own key; the
// ledger deletes it only if no other row ever held the claim (Entry.Shared):
// a row that took the key over may have registered its own content under it,
// and forgetting the key would let the next claimer register the SKU again
// under its own. It reports whether a claim was released.
func (l *Ledger) Release(ctx context.Context, seller, sku, row string, forget bool) (bool, error) {
	sku = productrules.NormalizeSKU(sku)
	mode := "keep"
	if forget {
		mode = "forget"
	}
	n, err := l.release.Run(ctx, l.rdb, []string{Key(seller), AsideKey(seller)}, sku, row, mode).Int()
	if err != nil {
		return false, fmt.Errorf("release seller_sku %s of seller %s in the ledger: %w", sku, seller, redisfail.Wrap(err))
	}
	return n >= 1, nil
}

// SetAside records that the row whose own Idempotency-Key is row, read from
// the Kafka record from, was dead-lettered as note says, and releases the
// row's claim as Release keeping the key, if the row holds it. If the row's
// member dies before its offset is committed, the next owner reads that
// record again, and its claim answers Aside instead of Call, whatever became
// of the SKU since (another row may hold or have registered it), so the row
// is not registered while it is also in the dead-letter topic. A copy sent
// again by redrive is another record and claims as usual. The records are
// kept AsideRetention after the seller's last one. It reports whether the
// row held the claim.
func (l *Ledger) SetAside(ctx context.Context, seller, sku, row, from string, note AsideNote) (bool, error) {
	sku = productrules.NormalizeSKU(sku)
	if seller == "" || from == "" || strings.ContainsAny(from+note.Class, "\t\n") {
		return false, fmt.Errorf("%w: set seller_sku %s of seller %q aside: the Kafka record %q is empty, or it or the class %q holds a tab or newline", ErrInvalid, sku, seller, from, note.Class)
	}
	n, err := l.release.Run(ctx, l.rdb, []string{Key(seller), AsideKey(seller)}, sku, row, "aside", from, note.encode(), l.opts.AsideRetention.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("set seller_sku %s of seller %s aside in the ledger: %w", sku, seller, redisfail.Wrap(err))
	}
	return n >= 1, nil
}

// Record names a Kafka record as Claim and SetAside take it.
func Record(topic string, partition int, offset int64) string {
	return topic + "/" + strconv.Itoa(partition) + "/" + strconv.FormatInt(offset, 10)
}

func check(seller, sku, row, hash string) error {
	switch {
	case seller == "":
		return fmt.Errorf("%w: the seller id is empty", ErrInvalid)
	case sku == "":
		return fmt.Errorf("%w: seller %s: the seller_sku is empty", ErrInvalid, seller)
	case row == "" || strings.ContainsAny(row, "\t\n"):
		return fmt.Errorf("%w: seller_sku %s: the Idempotency-Key %q is empty or holds a tab or newline", ErrInvalid, sku, row)
	case hash == "" || strings.ContainsAny(hash, "\t\n"):
		return fmt.Errorf("%w: seller_sku %s: the content hash %q is empty or holds a tab or newline", ErrInvalid, sku, hash)
	}
	return nil
}

// parse reads an entry: state, hash, row, call key, product id, time (ms),
// and for a claim whether it was shared ("0" or "1"; absent before it was
// recorded, read as shared). Fields after the seventh are ignored, so a later
// version may append some.
func parse(v string) (Entry, error) {
	var f [7]string // the fields read (an entry is read on every claim and mark: no slice)
	n, rest := 0, v
	for more := true; more && n < len(f); n++ {
		f[n], rest, more = strings.Cut(rest, "\t")
	}
	if n < 6 {
		return Entry{}, fmt.Errorf("%w: %q has %d fields, want 6", ErrUnreadable, v, n)
	}
	ms, err := strconv.ParseInt(f[5], 10, 64)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %q: time %q is not a number of milliseconds", ErrUnreadable, v, f[5])
	}
	e := Entry{Hash: f[1], Row: f[2], CallKey: f[3], ProductID: f[4]}
	if ms > 0 {
		e.At = time.UnixMilli(ms)
	}
	switch f[0] {
	case "c":
		e.State = Claimed
		e.Shared = n < 7 || f[6] != "0"
	case "r":
		e.State = Registered
	default:
		return Entry{}, fmt.Errorf("%w: %q: unknown state %q", ErrUnreadable, v, f[0])
	}
	return e, nil
}
