// Package consumer registers the rows of uploads: it reads the rows topic as
// a member of a Kafka consumer group and calls the registration API for each
// row at a time the throttle grants, so any number of consumer processes
// together never exceed a seller's limit.
//
// # The path of a row
//
//	Kafka partition ─▶ reader (pauses at the in-flight caps) ─▶ decode
//	  ─▶ seller lane (bounded concurrency per seller)
//	  ─▶ throttle slot (one Redis call; sleep on a timer until the slot)
//	  ─▶ registration API ─▶ classify
//	  ─▶ record (upload status + compliance history) ─▶ offset finished
//
// A seller's lane holds at most SellerConcurrency rows at a slot or a call;
// reserving at most MaxWait ahead (a session timeout by default) keeps the
// slots of a crashed consumer, which stay in the log unused, from delaying
// its successor by more than one window. A call must start within
// MaxLateness of its slot (half the throttle's margin): when more rows are
// due than MaxConcurrentCalls can serve, a late row gives its slot back and
// takes a new one after a jittered backoff, instead of calling late and
// shrinking the gap the API sees between two windows. Slots of calls the API
// does not count (a replay, a refusal, a 429) go back to the throttle.
//
// A 429 blocks the seller in the throttle for Retry-After and retries with a
// new slot; a transient error retries with backoff, each attempt with a new
// slot, and after the last attempt the row goes to the dead-letter topic. A
// message that cannot be decoded goes there at once.
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
// lowest row not yet finished, and only that is committed
// (Generation.CommitOffsets, tagged with this generation, which the broker
// refuses once the generation is over). The generation's context ends at a
// rebalance: rows still waiting for a slot give it back, calls in progress
// finish and are recorded, a last commit is made while the generation is
// still current, and only then does the member rejoin. Rows not finished by
// then are read again by the next owner; their Idempotency-Key turns the
// repeated call into a replay (200) instead of a second product.
package consumer
