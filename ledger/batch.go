// Several rows of one seller at once: their claims before their calls,
// their marks after.

package ledger

import (
	"context"
	"fmt"
	"strings"

	"github.com/bulkreg/bulkreg/internal/redisfail"
	"github.com/bulkreg/bulkreg/internal/scriptbatch"
	"github.com/bulkreg/bulkreg/productrules"
)

// ClaimRequest is one row's claim of its SKU (see Claim for the fields).
type ClaimRequest struct {
	SKU  string // as the row has it; the ledger keys it by its NFC form
	Row  string // the row's own Idempotency-Key
	Hash string // the content hash of the row's product
	From string // the Kafka record the row was read from (Record), "" when unknown
}

// ClaimResult is one row's answer: its claim, or Err when the ledger cannot
// decide it (wrapping ErrInvalid for a request it cannot store, ErrUnreadable
// for an entry it cannot read; asking again does not help either).
type ClaimResult struct {
	Claim
	Err error
}

// ClaimStep is Claim for rows of one seller as one step of a script batch
// on the seller's hash tag (internal/scriptbatch): the claims are decided in
// order, as calls of Claim one after the other would be. Once the batch has
// run, into[i] holds request i's answer; a request the ledger refuses
// before asking Redis has its Err at once. ok is false when no request is
// left to send.
func (l *Ledger) ClaimStep(seller string, reqs []ClaimRequest, into []ClaimResult) (st scriptbatch.Step, ok bool) {
	args, sent, skus := l.claimArgs(seller, reqs, into)
	if len(sent) == 0 {
		return st, false
	}
	return scriptbatch.Step{Script: "ledger_claim.lua", Keys: []string{Key(seller), AsideKey(seller)}, Args: args, Reply: func(v any) error {
		res, _ := v.(string)
		return readClaims(seller, res, sent, skus, into)
	}}, true
}

// ClaimN is ClaimStep in a script of its own.
func (l *Ledger) ClaimN(ctx context.Context, seller string, reqs []ClaimRequest) ([]ClaimResult, error) {
	into := make([]ClaimResult, len(reqs))
	st, ok := l.ClaimStep(seller, reqs, into)
	if !ok {
		return into, nil
	}
	res, err := l.claim.Run(ctx, l.rdb, st.Keys, st.Args...).Text()
	if err != nil {
		return nil, fmt.Errorf("claim %d SKUs of seller %s in the ledger: %w", len(reqs), seller, redisfail.Wrap(err))
	}
	if err := st.Reply(res); err != nil {
		return nil, err
	}
	return into, nil
}

// claimArgs are ledger_claim.lua's arguments for the requests it can send
// (sent: their places in reqs; skus: their keys); the others get their
// error in into.
func (l *Ledger) claimArgs(seller string, reqs []ClaimRequest, into []ClaimResult) (args []any, sent []int, skus []string) {
	args = make([]any, 0, 2+5*len(reqs))
	args = append(args, l.opts.Lease.Milliseconds(), l.opts.Retention.Milliseconds())
	for i, q := range reqs {
		sku, alias := keys(q.SKU)
		err := check(seller, sku, q.Row, q.Hash)
		if err == nil && strings.ContainsAny(q.From, "\t\n") {
			err = fmt.Errorf("%w: seller_sku %s: the Kafka record %q holds a tab or newline", ErrInvalid, sku, q.From)
		}
		if err != nil {
			into[i] = ClaimResult{Err: err}
			continue
		}
		args = append(args, sku, alias, q.Row, q.Hash, q.From)
		sent, skus = append(sent, i), append(skus, sku)
	}
	return args, sent, skus
}

// readClaims reads ledger_claim.lua's reply about the requests sent.
func readClaims(seller string, reply string, sent []int, skus []string, into []ClaimResult) error {
	res := make([]claimReply, len(sent))
	if err := readClaimReplies(reply, res); err != nil {
		return fmt.Errorf("claim %d SKUs of seller %s: %w", len(sent), seller, err)
	}
	for j, i := range sent {
		c, err := decide(seller, skus[j], res[j])
		into[i] = ClaimResult{Claim: c, Err: err}
	}
	return nil
}

// MarkResult is one mark's answer: the entry Mark would have returned, or
// its error.
type MarkResult struct {
	Entry Entry
	Err   error
}

// MarkStep is Mark for several registrations of one seller as one step to
// run in one script with other writes on the seller's hash tag
// (internal/scriptbatch): one HMGET, one HSET and one PEXPIRE for them all,
// marked in order as calls of Mark one after the other would be (a SKU marked
// twice keeps the first). A request the ledger refuses (ErrInvalid) has its
// Err in into at once; once the batch has run, into[i] holds request i's
// answer. ok is false when no request is left to send.
func (l *Ledger) MarkStep(seller string, reqs []MarkRequest, into []MarkResult) (st scriptbatch.Step, ok bool) {
	// The arguments point into sent, which the step keeps: the client then
	// boxes no string of each mark.
	sent := make([]MarkRequest, 0, len(reqs))
	var at []int
	var skus []string
	for i, q := range reqs {
		q.SKU = productrules.NormalizeSKU(q.SKU)
		if err := checkMark(seller, q.SKU, q.Row, q.Hash, q.ProductID); err != nil {
			into[i] = MarkResult{Err: err}
			continue
		}
		sent, at, skus = append(sent, q), append(at, i), append(skus, q.SKU)
	}
	if len(sent) == 0 {
		return st, false
	}
	args := make([]any, 0, 5*len(sent))
	for i := range sent {
		q := &sent[i]
		args = append(args, &q.SKU, &q.Row, &q.Hash, &q.ProductID, l.retentionMs)
	}
	return scriptbatch.Step{Script: "ledger_mark.lua", Keys: []string{Key(seller)}, Args: args, Reply: func(v any) error {
		res, _ := v.(string)
		return readMarks(seller, res, at, skus, into)
	}}, true
}
