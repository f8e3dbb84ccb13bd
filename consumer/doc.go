// Package consumer registers the rows of uploads: it reads the rows topic as
// a member of a Kafka consumer group and calls the registration API for each
// row at a time the throttle grants, so any number of consumer processes
// together never exceed a seller's limit.
//
// # The path of a row
//
//	Kafka partition ─▶ reader (pauses at the in-flight caps) ─▶ decode
//	  ─▶ the seller's runner (runner.go: one per partition and seller)
//	  ─▶ take a batch (up to the throttle's room; starts of calls due now: runbudget.go)
//	  ─▶ claim the SKUs and reserve the slots, one script (runstore.go)
//	  ─▶ check the slots, one script at the check lead
//	  ─▶ at each slot: a call worker (runcall.go): Allow ─▶ registration API ─▶ Report
//	  ─▶ write the calls, settles and marks, one script; the results, one write per upload
//	  ─▶ finish the rows (offsets.go) ─▶ the next batch, after this one's answers
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
// commit's metadata so the next owner passes over them (finished.go). The
// generation's context ends at a
// rebalance: rows still waiting for a slot give it back, calls in progress
// finish and are recorded, a last commit is made while the generation is
// still current, and only then does the member rejoin. No heartbeat is sent
// meanwhile, so Config.Validate holds the drain within the session timeout
// (MaxDrainTimeout): the member is never evicted while it is still calling. Rows not finished by
// then are read again by the next owner; their Idempotency-Key turns the
// repeated call into a replay (200) instead of a second product.
package consumer
