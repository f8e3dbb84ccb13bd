// Package consumer registers the rows of uploads: it reads the rows topic as
// a member of a Kafka consumer group and calls the registration API for each
// row at a time the throttle grants, so any number of consumer processes
// together never exceed a seller's limit.
//
// # The path of a row
//
//	Kafka partition ─▶ reader (internal/kafkagroup: pauses at the in-flight caps) ─▶ decode
//	  ─▶ the seller's runner (runner.go: one per partition and seller)
//	  ─▶ take a batch (up to the throttle's room; starts of calls due now: startBudget)
//	  ─▶ claim the SKUs and reserve the slots, one script (runstore.go)
//	  ─▶ check the slots, one script at the check lead
//	  ─▶ at each slot: a call worker (runcall.go): Allow ─▶ registration API ─▶ Report
//	  ─▶ write the calls, settles and marks, one script; the results, one write per upload
//	  ─▶ finish the rows (kafkagroup.Row.Finish) ─▶ the next batch, after this one's answers
//
// A runner owns its seller's queue, slots, calls in flight and next ask,
// and ends when its queue is empty. Reserving at most MaxWait ahead (a
// session timeout by default) keeps the slots of a crashed consumer, which
// stay in the log unused, from delaying its successor by more than one
// window. A call must start within MaxLateness of its slot (half the
// throttle's margin) and never after the slot's SendBy: a late row gives
// its slot back and takes the next one, instead of calling late. Lateness is
// measured from the earliest the slot can be on this clock (a slow Redis
// answer counts too), which Redis's TIME, read every ClockSync in a round
// trip of its own, keeps within a few milliseconds of the truth. The slots'
// check (Throttle.CheckN) confirms that their epoch is current: a slot
// granted by a Redis that has since lost the seller's state is not used.
// Slots of calls the API does not count (a replay, a refusal, a 429) go
// back to the throttle.
//
// Redis not answering reaches the consumer as one typed error from every
// package (redisfail.ErrUnavailable): no call is made until it answers.
//
// A row is finished (its offset may be committed) only once its outcome is
// recorded in the upload's status; a write Redis refuses is tried again
// until the drain ends, and then the row is given back and read again.
//
// A 429 blocks the seller in the throttle for Retry-After and its rows take
// new slots. A seller whose calls all fail (5xx, timeouts) while none is
// answered is held by its runner: its rows spend no attempt, one is tried
// per growing interval, and a row held longer than SellerHoldLimit goes to
// the dead-letter topic. A row whose call fails while its seller's others
// are answered spends its retry budget and after the last attempt goes to
// the dead-letter topic. The fleet-wide circuit breaker (Deps.Circuit)
// opens when several sellers fail together: while it is open the readers
// hand no row on and runners wait without a slot (circuit.go). A message
// that cannot be decoded, or whose key names another seller than its value,
// goes to the dead-letter topic at once.
//
// # Reading and committing
//
// The Kafka side (membership, one reader per assigned partition, the
// in-flight caps, commits up to the lowest unfinished row with the rows
// finished above it named in the commit's metadata, the drain at a
// rebalance) is internal/kafkagroup's: a row reaches this package as a
// kafkagroup.Row and leaves it finished or given back.
package consumer
