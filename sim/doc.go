// Package sim is bulkreg's seeded fault simulation: it searches for the
// faults nobody wrote a test for, and judges the system by its three
// promises, not by what the consumers say they did.
//
// Each seed (Generate) picks the sellers and their files (first uploads, the
// same file again, files that change some products and add others, rows
// whose name an API stricter than the validator refuses), how many
// consumers, how the API counts its limit (sliding, fixed, token bucket with
// a burst) and a schedule of faults drawn from: latency spikes that move the
// moment the API counts a call up to 2.2 s later, whole-API 503s, one
// seller's 503s (for a while, or until the end), one product's 503s, 401 and
// 403 bursts, 429 storms, Redis frozen (SIGSTOP), restarted empty, FLUSHALL,
// consumers SIGKILLed and SIGTERMed (a new one starts later), consumers
// joining and leaving, and slow Kafka. The window is 2–3 s and the limit 3–8,
// so a seed runs in tens of seconds; the consumers' session timeout (6 s) is
// two to three windows.
//
// Production runs a session timeout a sixth of the window (10 s to 60 s): a
// dead consumer's partitions move while its late counts are still in the
// API's trailing window. Seeds from ProductionRatiosFrom draw that ratio (a
// window of 8–12 s, a session a sixth of it, twice the limit) and the faults
// it takes to meet it: a consumer paused (SIGSTOP) past its session and
// resumed, one consumer's Redis link slowed or blackholed, one consumer's
// registration link slowed or blackholed, a rolling restart (each consumer
// SIGTERMed in turn, a new one starting) during a latency spike, and, when the
// seed's Redis is a three-master Cluster (a third of them), its busiest
// seller's hash slot moved to another master mid-run (CLUSTER SETSLOT
// IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE). A blackholed link accepts and
// holds what is sent, forwarding and answering nothing until it ends
// (internal/testproxy.Link). On a Cluster the single-server faults (freeze,
// restart, FLUSHALL, a consumer's Redis link) are not drawn: a Cluster client
// reaches each master at the address the Cluster announces, past any proxy.
//
// The parts are real: the producer and the consumer are the built binaries,
// started and killed as processes; Redis is a redis-server process (or three,
// a Cluster), and each consumer reaches it through its own proxy; Kafka is
// the kfake broker over sockets, with a control hook that delays every
// request for "slow Kafka". The registration API is internal/sandbox in this
// process, served over real HTTP: in process so the schedule can switch its
// faults (Chaos, SetFaults) at the drawn moments and read its call log. Each
// consumer has its own registration listener into that one sandbox (its own
// base URL, a proxy the schedule can slow or cut).
//
// Named scenarios are built by hand rather than drawn, and may place a fault
// against a call in flight (Fault.OnCall): the fault review's three
// (faultreview_test.go, make fault-review) kill a consumer during an API
// slowdown, pause one past the window, and deploy while one's Redis link is
// cut, each judged by the sandbox's own call log; a fourth reshards a
// Cluster under a busy seller.
//
// After the last fault ends, the run waits at most the settle time
// (Scenario.SettleTime: the busiest seller's windows, a row's retry budget,
// two session timeouts and slack) for every committed offset to reach its
// partition's end, then the judge checks, from the sandbox's audit and call
// log, the topics as kcat reads them, the group's committed offsets and the
// upload status in Redis:
//   - no 429 answered by the limit, no trailing window over it;
//   - each (seller, SKU) registered at most once; a row of a re-upload of a
//     registered SKU registers nothing;
//   - every published row is registered, already registered, failed for its
//     content (the API refused its content, or the seller registered the SKU
//     with other content) or dead-lettered, and its upload status says so;
//     a row failed by an answer that is not about its content (401, 403, a
//     503) breaks the promise;
//   - nothing waits at the settle time, and every partition's committed
//     offset is at its end.
//
// A duplicate product whose registrations straddle a Redis data loss is a
// note, not a violation: ARCHITECTURE.md ("What losing it does") documents
// that a lost ledger cannot stop it.
//
// Replay: a seed fixes the schedule, the files and every setting, not the
// interleaving of real processes on a real clock, so a finding that hangs on
// a race may need its seed replayed a few times (make soak SEED=n). That is
// the price of real processes; a deterministic simulation in the manner of
// FoundationDB would need every part behind a simulated clock and network.
//
// Not drawn yet: a Sentinel failover and one Redis Cluster master flushed
// or failed over (internal/testredis can start both); the single Redis's
// restart and flush stand for data loss.
package sim
