// What a call leaves behind: the compliance history, the ledger, the upload's
// status and the dead-letter topic.

package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/bulkreg/bulkreg/deadletter"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// counted reports whether the API may have counted the call against the
// seller's limit. It counts only registrations (201); a replay, a refusal or
// a 429 does not, so their slots go back to the log for the rows behind. A
// 5xx or a timeout may have registered the row before failing, so their
// slots stay.
func counted(c registryclient.Class) bool {
	switch c {
	case registryclient.Replayed, registryclient.Permanent, registryclient.RateLimited, registryclient.Misconfigured:
		return false
	}
	return true
}

// unanswered reports whether a call's outcome is unknown: no HTTP answer
// came (a timeout, a connection error, the call cancelled), so the API may
// have counted it, or may still count it, after the failure was seen.
func unanswered(res registryclient.Result) bool {
	return res.Class == registryclient.Transient && res.Status == 0
}

// record writes the row's outcome into its upload's status, then marks the
// row finished. A row is finished only once its outcome is recorded: while
// Redis does not answer or refuses the write (READONLY after a failover, OOM
// under noeviction, MISCONF, ...) the write is tried again until the drain
// ends, and then the row is given back unfinished; its next owner calls
// again (a replay, 200) and records it. The store's own refusals (an empty
// upload id, a row below 1) cannot happen to a decoded row, so every error
// here is Redis's.
func (c *Consumer) record(r *row, rr uploadstatus.RowResult, result string, log *slog.Logger) {
	rr.Row = r.m.Row
	err := c.untilRedis(r.finishCtx(), "record the row's result", log,
		func(ctx context.Context) error { return c.deps.Status.RecordRow(ctx, r.m.UploadID, rr) })
	if err != nil {
		log.Error("could not record the row's result before the drain ended; the row will be read again", "state", rr.State, "err", err)
		r.GiveBack()
		return
	}
	c.m.rows.WithLabelValues(result).Inc()
	log.Debug("row done", "result", result, "product_id", rr.ProductID, "attempts", rr.Attempts)
	r.Finish()
}

// deadLetter writes the row to the dead-letter topic and, once the broker
// acknowledged it, records the row as failed and marks it finished. For a
// row that may hold its SKU's claim (sku not nil), between the broker's
// acknowledgement and the row's result, the ledger records the row as set
// aside (skuClaim.setAside), so that a re-read of it does not register it.
func (c *Consumer) deadLetter(r *row, d deadletter.Row, sku *skuClaim, log *slog.Logger) {
	// A row whose claim lapsed (its process was paused past the lease) may
	// have been registered by another reading of it meanwhile: it claims
	// again first, which records a registration found (Done) or waits for a
	// row calling now, so a dead letter is written only for a row still
	// unregistered.
	if sku != nil && sku.held && !sku.claim() {
		return
	}
	retry := c.redisBackOff()
	for {
		err := c.dlq.WriteDeadLetter(r.finishCtx(), d)
		if err == nil {
			break
		}
		log.Error("dead-letter write failed, retrying", "err", err)
		if !sleep(r.finishCtx(), retry.NextBackOff()) {
			r.GiveBack()
			return
		}
	}
	c.m.dlqWrites.WithLabelValues(d.Class).Inc()
	if sku != nil && !sku.setAside(d) {
		r.GiveBack()
		return
	}
	if d.Class == deadletter.ClassBadMessage {
		c.m.rows.WithLabelValues("dead_lettered").Inc()
		r.Finish()
		return
	}
	c.record(r, setAside(d.Class, d.Attempts, d.Detail), "dead_lettered", log)
}

// setAside is the result of a row dead-lettered with class after attempts,
// the last failure being detail, as its seller reads it; a re-read of the row (ledger.Aside) records
// it again from the note its dead letter left.
func setAside(class string, attempts int, detail string) uploadstatus.RowResult {
	return uploadstatus.RowResult{State: uploadstatus.Failed, Code: class, Attempts: attempts, At: time.Now(),
		Reason: fmt.Sprintf("the registration API did not take the row after %d attempts (%s); it was set aside for an operator to retry", attempts, detail)}
}

func deadLetterOf(r *row, res registryclient.Result, attempts int, first time.Time) deadletter.Row {
	msg := fmt.Sprintf("status %d", res.Status)
	if res.Err != nil {
		msg = res.Err.Error()
	}
	return deadletter.Row{Original: r.Msg, Class: res.Class.String(), Message: msg, Detail: res.SellerDetail(), Attempts: attempts, FirstFailure: first}
}
