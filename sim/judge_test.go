package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// verdict is what the judge found: violations break a promise; notes are
// facts worth printing that break none.
type verdict struct {
	violations []string
	notes      []string
	rows       int
	outcomes   map[string]int
	// lossWarnings counts the consumers' warnings that Redis lost the
	// throttle's state; migrations the slot migrations done.
	lossWarnings, migrations int
}

// lossWarning is the text of a consumer's warning that Redis lost the
// throttle's state of a hash slot (consumer/runner.go, slot).
const lossWarning = "lost the throttle's state"

func (v *verdict) violate(format string, args ...any) {
	v.violations = append(v.violations, fmt.Sprintf(format, args...))
}

func (v *verdict) note(format string, args ...any) {
	v.notes = append(v.notes, fmt.Sprintf(format, args...))
}

// near names the faults in force at, or ended shortly before:
// what a violation at that moment most likely follows from.
func (w *world) near(at time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, in := range w.injected {
		ended := in.Ended
		if ended.IsZero() {
			ended = at
		}
		// Two windows and the longest late count: a Redis loss's hold.
		if !in.Began.After(at) && !ended.Before(at.Add(-2*w.sc.Window-3*time.Second)) {
			out = append(out, fmt.Sprintf("%s@%+.1fs", in.Kind, in.Began.Sub(w.start).Seconds()))
		}
	}
	if len(out) == 0 {
		return "no fault near"
	}
	return "near " + strings.Join(out, " ")
}

// countedBefore lists the seller's 201s the API counted in the window
// before a 429 at the moment at, each as sent → counted: which calls filled
// the window, and how late each was counted, is the first thing a replay
// needs.
func (w *world) countedBefore(calls []sandbox.Call, seller string, at time.Time) string {
	var in []string
	for _, c := range calls {
		if c.Seller == seller && c.Status == 201 && !c.Handled.Before(at.Add(-w.sc.Window)) && !c.Handled.After(at) {
			in = append(in, fmt.Sprintf("%s→%s", w.rel(c.Received), w.rel(c.Handled)))
		}
	}
	if at.IsZero() || len(in) == 0 {
		return "no 201 counted in the window before it"
	}
	return fmt.Sprintf("counted in the %s before it (sent→counted): %s", w.sc.Window, strings.Join(in, " "))
}

func (w *world) rel(t time.Time) string { return fmt.Sprintf("%+.1fs", t.Sub(w.start).Seconds()) }

// judge checks the promises from the sandbox's own log and audit, the
// topics as an independent client (kcat) reads them, the group's committed
// offsets and the upload status in Redis; never from a consumer's view.
func (w *world) judge(ctx context.Context, settledOK bool, waitingWhy string, settleAt time.Time) verdict {
	v := verdict{outcomes: map[string]int{}}
	if !settledOK {
		v.violate("still waiting at the settle time (%s, %s after the last fault): %s", w.rel(settleAt), w.sc.SettleTime(settleBudget, w.sc.SessionTimeout()), waitingWhy)
	}
	audit := w.sb.Audit()
	calls := w.sb.Calls()

	// 1. The limit: no 429 of the contract, no window over it.
	for seller, a := range audit.Sellers {
		if a.RateLimited > 0 || a.Exceeded {
			var first, sent time.Time
			for _, c := range calls {
				if c.Seller == seller && c.Status == 429 && !c.Injected {
					first, sent = c.Handled, c.Received
					break
				}
			}
			v.violate("429 from the limit: %s got %d × 429 (policy %s, limit %d, burst %d, most counted at once %d); the first at %s (sent %s), %s; %s",
				seller, a.RateLimited, audit.Policy, audit.Limit, audit.Burst, a.MaxCounted, w.rel(first), w.rel(sent), w.near(first), w.countedBefore(calls, seller, first))
		}
	}

	// 2. One product per (seller, SKU).
	type reg struct {
		key string
		at  time.Time
	}
	registered := map[[2]string][]reg{} // (seller, sku) → its 201s
	answers := map[string][]sandbox.Call{}
	bySKU := map[[2]string][]sandbox.Call{} // (seller, sku) → every call for it, whatever its key
	for _, c := range calls {
		answers[c.Key] = append(answers[c.Key], c)
		bySKU[[2]string{c.Seller, c.SKU}] = append(bySKU[[2]string{c.Seller, c.SKU}], c)
		if c.Status == 201 {
			k := [2]string{c.Seller, c.SKU}
			registered[k] = append(registered[k], reg{c.Key, c.Handled})
		}
	}
	w.mu.Lock()
	losses := slices.Clone(w.losses)
	w.mu.Unlock()
	for k, regs := range registered {
		if len(regs) < 2 {
			continue
		}
		// A claim taken before a loss is gone with it while its row still
		// calls: a loss from a row's whole life (retry budget, a call, two
		// windows of slots) before the first registration counts too.
		lostBetween := false
		life := retryMaxElapsed + w.sc.CallTimeout() + 2*w.sc.Window
		for _, l := range losses {
			if l.After(regs[0].at.Add(-life)) && l.Before(regs[len(regs)-1].at) {
				lostBetween = true
			}
		}
		var desc []string
		for _, r := range regs {
			desc = append(desc, fmt.Sprintf("key %s at %s", r.key, w.rel(r.at)))
		}
		if lostBetween {
			// ARCHITECTURE.md, "What losing it does": the ledger lost with
			// Redis cannot keep a later row from registering again.
			v.note("%s %s registered %d times, Redis's data lost while its rows were registering it (a lost ledger, documented): %s", k[0], k[1], len(regs), strings.Join(desc, ", "))
			continue
		}
		v.violate("duplicate product: %s %s registered %d times (%s), %s", k[0], k[1], len(regs), strings.Join(desc, ", "), w.near(regs[1].at))
	}

	// 3. Every published row has exactly one outcome, and its status says it.
	rows := testkafka.Consume(w.t, w.brokers, bulkreg.DefaultTopic)
	dlq := map[string]int{}
	for _, m := range testkafka.Consume(w.t, w.brokers, bulkreg.DLQTopic(bulkreg.DefaultTopic)) {
		var msg bulkreg.Message
		if json.Unmarshal([]byte(m.Payload), &msg) == nil {
			dlq[msg.IdempotencyKey]++
		}
	}
	sts, errs := w.statuses(ctx)
	seen := map[string]bool{}
	for _, m := range rows {
		var msg bulkreg.Message
		if err := json.Unmarshal([]byte(m.Payload), &msg); err != nil {
			v.violate("the rows topic holds a message that is not a row: %v", err)
			continue
		}
		if seen[msg.IdempotencyKey] {
			continue // the same file sent again after a failed publish
		}
		seen[msg.IdempotencyKey] = true
		v.rows++
		sku := msg.Product.SellerSKU
		var row *uploadstatus.RowResult
		st, ok := sts[msg.UploadID]
		if ok {
			for i := range st.Rows {
				if st.Rows[i].Row == msg.Row {
					row = &st.Rows[i]
				}
			}
		}
		what := fmt.Sprintf("row %s (%s %s)", msg.IdempotencyKey, msg.SellerID, sku)
		var seq []string
		content := false
		for _, c := range answers[msg.IdempotencyKey] {
			seq = append(seq, fmt.Sprint(c.Status))
			if c.Status == 400 || c.Status == 409 || c.Status == 422 {
				content = true
			}
		}
		said := "the API never answered its key"
		if len(seq) > 0 {
			said = "the API answered its key " + strings.Join(seq, ",")
		}
		if !content && w.sc.RefuseMarker != "" && strings.Contains(msg.Product.Name, w.sc.RefuseMarker) {
			// A claim taken over calls with the key its first claimer
			// called with (ledger), so a row whose product the API refuses
			// may have its refusal answered to another row's key of its SKU.
			for _, c := range bySKU[[2]string{msg.SellerID, sku}] {
				if c.Status == 422 {
					content = true
				}
			}
		}
		skuRegistered := len(registered[[2]string{msg.SellerID, sku}]) > 0
		if row == nil {
			lost := !ok || st.PartlyLost() || !st.LostAt.IsZero()
			switch {
			case dlq[msg.IdempotencyKey] > 0:
				v.outcomes["dead-lettered"]++
			case lost && (skuRegistered || content):
				v.outcomes["status lost with Redis"]++
			case lost && !settledOK:
				v.outcomes["status lost with Redis"]++
				v.violate("%s has no outcome at the settle time (its status lost with Redis) and is not dead-lettered (%s)", what, said)
			case lost:
				// The offsets say the consumers finished it; nothing says how.
				v.outcomes["status lost with Redis"]++
				v.violate("%s was finished (its status lost with Redis) but is not registered, not refused for its content and not dead-lettered (%s)", what, said)
			default:
				v.violate("%s has no outcome in its upload status and is not dead-lettered (%s), %s", what, said, errText(errs[msg.UploadID]))
			}
			continue
		}
		if dlq[msg.IdempotencyKey] > 0 && row.State == uploadstatus.Failed {
			v.outcomes["dead-lettered"]++
		} else {
			v.outcomes[row.State]++
		}
		switch row.State {
		case uploadstatus.Registered, uploadstatus.AlreadyRegistered:
			if !skuRegistered {
				v.violate("%s says %s but the API registered no product for its SKU (%s)", what, row.State, said)
			}
			if dlq[msg.IdempotencyKey] > 0 {
				v.violate("%s says %s and is also dead-lettered", what, row.State)
			}
		case uploadstatus.Failed:
			if row.Reason == "" {
				v.violate("%s failed with no reason", what)
			}
			if dlq[msg.IdempotencyKey] > 0 || content {
				continue
			}
			// A row whose SKU the seller registered with other content fails
			// at the ledger, with no call: bulk registration only adds.
			if skuRegistered && len(seq) == 0 {
				continue
			}
			if skuRegistered && row.Code != "" && strings.Contains(strings.ToLower(row.Code+row.Reason), "sku") {
				continue
			}
			v.violate("%s failed and is not dead-lettered, but the API never refused its content (%s); its status says %q (code %s)",
				what, said, row.Reason, row.Code)
		}
	}

	// 4. Every partition's committed offset at its end.
	if po, err := offsets(ctx, w.brokers, w.sc.Partitions); err != nil {
		v.violate("committed offsets could not be read: %v", err)
	} else {
		short := false
		for p, end := range po.end {
			if max(0, po.committed[p]) != end { // -1: nothing committed, right for an empty partition
				v.violate("partition %d: committed offset %d, end %d", p, po.committed[p], end)
				short = true
			}
		}
		if short {
			v.note("%s", groupSays(w.brokers))
		}
	}
	// 5. No false alarm of a loss: a consumer warns that Redis lost the
	// throttle's state (and its sellers are held) only after Redis did; a
	// reshard moves the state whole.
	w.mu.Lock()
	consumers := slices.Clone(w.consumers)
	nLosses := len(w.losses)
	migrations := 0
	for _, in := range w.injected {
		if in.Kind == SlotMigrate && !strings.HasPrefix(in.Note, "skipped") {
			migrations++
		}
	}
	w.mu.Unlock()
	warned := 0
	for _, p := range consumers {
		warned += strings.Count(p.out.String(), lossWarning)
	}
	v.lossWarnings, v.migrations = warned, migrations
	if warned > 0 && nLosses == 0 {
		v.violate("consumers warned %d times that Redis lost the throttle's state, and held its sellers, though no Redis data was lost (%d slot migrations)", warned, migrations)
	}

	w.mu.Lock()
	for _, e := range w.uploadErr {
		v.note("an upload was refused six times: %s", e)
	}
	w.mu.Unlock()
	return v
}

func errText(err error) string {
	if err == nil {
		return "its upload is known"
	}
	return "reading its upload: " + err.Error()
}
