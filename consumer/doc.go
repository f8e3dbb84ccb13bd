// Package consumer registers the rows of uploads: it reads the rows topic as
// a member of a Kafka consumer group and calls the registration API for each
// row at a time the throttle grants, so any number of consumer processes
// together never exceed a seller's limit.
//
// # The path of a row
//
//	Kafka partition ─▶ reader (pauses at the in-flight caps) ─▶ decode
//	  ─▶ seller lane (bounded concurrency per seller)
//	  ─▶ SKU claim (ledger.go: registered before → recorded, no slot, no call)
//	  ─▶ circuit breaker (circuit.go: wait while the API is down for everyone)
//	  ─▶ throttle slot (one Redis call; the row parks on a timer until the slot, job.go)
//	  ─▶ Allow ─▶ registration API ─▶ Report ─▶ classify
//	  ─▶ record (upload status + compliance history) ─▶ offset finished
//
// A seller's lane holds at most SellerConcurrency rows at a slot or a call;
// reserving at most MaxWait ahead (a session timeout by default) keeps the
// slots of a crashed consumer, which stay in the log unused, from delaying
// its successor by more than one window. A call must start within
// MaxLateness of its slot (half the throttle's margin): a late row gives its
// slot back and takes a new one after a jittered backoff, instead of calling
// late and shrinking the gap the API sees between two windows. Lateness is
// measured from the earliest the slot can be on this clock (a slow Redis
// answer counts too), which Redis's TIME, read every ClockSync in a round
// trip of its own, keeps within a few milliseconds of the truth. So that
// rows are seldom late, a consumer holds at most MaxDueNow slots due now
// that it has not yet called; the other rows wait without one, and the
// tokens go to the seller that started asking first, so a seller's window
// is not spread over everyone's (duenow.go).
// Shortly before the slot the throttle confirms that the slot's epoch is
// current (Throttle.Check): a slot granted by a Redis that has since lost
// the seller's state is not used. When Redis lost it, the throttle holds the
// seller's hash slot for a window from the moment it finds out, which must
// cover the 2 × MaxLateness by which a confirmed slot's call can follow the
// loss (New checks it). Slots of calls the API does not count (a replay, a
// refusal, a 429) go back to the throttle.
//
// Redis not answering reaches the consumer as one typed error from every
// package (redisfail.ErrUnavailable): no call is made until it answers.
//
// A row is finished (its offset may be committed) only once its outcome is
// recorded in the upload's status; a write Redis refuses is tried again
// until the drain ends, and then the row is given back and read again.
//
// A 429 blocks the seller in the throttle for Retry-After and retries with a
// new slot; a transient error retries with backoff, each attempt with a new
// slot, and after the last attempt the row goes to the dead-letter topic.
// The fleet-wide circuit breaker (Deps.Circuit) tells an outage of the API
// from a broken row: while it is open the readers hand no row on, rows wait
// without a slot, and a failure it files under the outage costs the row no
// attempt (circuit.go). A
// message that cannot be decoded, or whose key names another seller than its
// value, goes there at once.
//
// # The runner path
//
// With Config.RowPath = RowPathRunner the steps between the decode and the
// record are a runner's per (partition, seller) instead of a job's per row
// (runner.go): the runner claims and reserves a batch of the seller's rows
// in one script, checks their slots once, hands each call to a pool of call
// workers at its slot (runcall.go), and writes the batch's records, settles
// and marks in one script and each upload's results in one write
// (runstore.go). A seller whose calls all fail while none is answered is
// held by its runner instead of its rows spending their attempts.
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
