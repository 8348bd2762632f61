// Service: delayd itself. Owns the connections and runs the scheduling loop on the calling
// thread until asked to stop; ingest runs on a thread of its own beside it.
//
// THE CONCURRENCY DESIGN. A thread per stage, each with its own Redis connection, so that an
// accept, a claim and a mark are in flight at the same time and no stage waits for another's
// reply:
//
//   thread         owns                                        Redis connection, Kafka client
//   loop (run())   the Scheduler (wheel, held jobs, horizons),  the loop's: refills, fences,
//                  FirePath (held records, records in flight), wakes, retries, failures, set
//                  Ownership (fences), the ready producer,     asides; the ready producer
//                  OutageTracker, the snapshot
//   claim stage    nothing but its store (ClaimWorker,         its own: claims, under the
//                  fire_stages.hpp)                            loop's fences (adopted per call)
//   mark stage     nothing but its store (MarkWorker)          its own: ready marks
//   ingest, one   IngestPath (accept, cancel, reschedule,     its own: accepts, cancels,
//   per topic     reports, dead letters), IngestPause, the    reschedules, reports, WAIT; a
//   read          consumer of the topic's own group (the      consumer, a dead-letter producer
//   (IngestStage) status topic's thread: reports only) and
//                 its offsets
//   topic creator  the admin client (topic_creator.hpp)        none; an admin client
//   watch          the clock and settings checks (ClockSkew,   its own: TIME once a minute,
//                  HostClock, RedisSettingsWatch;              INFO on every primary every
//                  server_watch.hpp)                           redis.settings_check_interval_ms
//
// The two stages of the fire path (store_worker.hpp) only run Redis calls: the loop hands them
// requests (the jobs to claim, up to FirePath::kMaxClaimRounds rounds ahead; the records to
// mark) and applies their results on its own thread, so the wheel, the held records and the
// counters have one owner. Each stage wakes the loop (Handover::notify()) when a result is in;
// so does the ready producer when Kafka's reports are queued (KafkaProducer::
// on_reports_queued(), from a librdkafka thread), so that an acknowledged record is marked
// without waiting out the loop's sleep.
// Every thread is named (top -H, /proc/<pid>/task/*/comm): ingest, status, claim, mark, admin-io,
// admin-ops, topics, watch, otel-export; librdkafka's own are rdk:*. The loop runs on the process's
// main thread, which keeps the program's name (delayd), so that pidof, killall and top still
// find the process by it.
// The loop's own wake list pop (every duty::kWakeLists) stays on its thread: a stage of its own
// was tried and measured no better (docs/performance/history-2026-11-24.md, "Where the tail at 10 000/s comes from").
//
// What crosses, and how (broker/handover.hpp, one FIFO queue guarded by a mutex):
//   ingest -> loop  offer / cancel / move of a job, after ingest's Redis write is acknowledged;
//                   the loop applies them at the start and middle of each turn, and wakes for
//                   them. The horizon invariant becomes "held, or its offer queued" (handover.hpp
//                   says why it holds at every instant).
//   ingest -> loop  rebalances: librdkafka runs the listeners on the ingest thread; each is queued
//                   and the ingest thread blocks until the loop has run Ownership's listener, so a
//                   revoke still drains and settles the shard's records before the partitions go.
//   loop -> ingest  the fire side's back-pressure (stuck, unsettled; two atomics) for IngestPause.
//   ingest -> loop  its counters, outage, pause and lag, copied under a lock every 200 ms
//                   (IngestStage::status()), for the snapshot and /healthz.
// Redis orders what the connections send: a claim and a cancel of one job, or an accept and a
// refill of one shard, are each atomic scripts, and every outcome of either order is one the
// single-threaded design already met (a cancel finds the job in flight; a refill reads the job,
// or the offer holds it). For one job the calls stay causally ordered across connections: it is
// claimed only once held, held only after its accept was acknowledged, produced only after its
// claim's reply, and marked only after Kafka's acknowledgement; so the crash-point table of
// storage/job_store.hpp holds as it is (each step is still one call, made after the one before
// it returned).
//
// On a rebalance while each stage holds work:
//   ingest batch half-written   the revoke waits (the ingest thread is inside poll, not
//                               process(), when librdkafka calls it); an outage-interrupted
//                               batch is re-read by the next owner (never committed here)
//   ingest batch posted, its    collected by the listener before the revoke is relayed, so
//   replies not read            its offers are queued ahead of the revoke (send-ahead,
//                               ingest_path.hpp); if that fails, forgotten and processed again
//                               by the next turn, like an outage-interrupted batch
//   offers queued, not applied  applied before the revoke (same queue): held, then dropped with
//                               the shard; after a revoke they find the shard not owned (ignored)
//   claims in flight            applied first (FirePath::settle_all): their records are held
//                               and then dropped unsent (orphans), their jobs go to the next
//                               owner, which claims them again with its larger epoch
//   records in flight, marks    the revoke drains the producer (up to 2 s) and waits for the
//   in flight                   mark stage, so the next owner finds the jobs ready
//   held records (claimed       dropped unsent; the next owner claims them again (fences)
//   ahead, not yet due)
//
// One loop turn (service.cpp):
//   1. apply what the ingest thread handed over; take fences of newly assigned shards; move the
//      timers of woken jobs
//   2. fire: dispatch the claims the claim stage returned (hold each record until its deliver_at,
//      then produce, never waiting for queue room), hand it the claims of what is due next;
//      settle: apply the marks the mark stage wrote, hand it the records Kafka acknowledged,
//      retry or dead-letter the failed ones
//   3. refill the wheel from Redis up to now + load window; apply the handover again; fire
//   4. wait until the next claim is due, a stage has a result, Kafka has answered, or the ingest
//      thread hands something over (<= 100 ms); a wait of 2 ms or more with records produced
//      since the last kick is a kick instead (<= 1 ms; linger_kick.hpp: they leave without
//      waiting out linger.ms, and the next turn marks what Kafka acknowledged meanwhile)
// No step waits on Kafka: produce() never blocks, the kick waits at most 1 ms of a sleep, dead-letter acknowledgements
// and topic creation are awaited by nobody (ingest_path.hpp, topic_creator.hpp), offsets are committed asynchronously.
// The loop's own Redis calls (refills, fences, retries) are its only waits, each bounded by redis.timeout_ms.
//
// THE ERROR MODEL. Every failure falls in one of three classes, and only the third ends delayd.
//   transient   Redis unreachable or answering LOADING, BUSY, READONLY, TRYAGAIN, CLUSTERDOWN,
//               MASTERDOWN, MISCONF, OOM (redis::RedisIoError); Kafka unreachable, timing out,
//               its queue full (connectors::KafkaError, DeliveryError::transient and
//               possibly_persisted); a producer fatal error that a new producer clears.
//               The turn (the loop's, or the ingest thread's: each keeps an OutageTracker)
//               is abandoned and retried with backoff (100 ms doubling to 1 s);
//               what it was doing is kept (the ingest batch, the unsettled reports) or safe to
//               redo. /healthz says "degraded: <reason>"; the log says so once when the outage
//               starts and once when it ends. Deliveries that fail this way do not count as
//               attempts, so an outage delays jobs and never dead-letters them. While the fire
//               side cannot get records out (too many awaiting reports) or too many ingest
//               batches await their dead-letter acknowledgements, reading ingest pauses.
//   one job or  a record that breaks the ingest contract or is too large to deliver
//   one record  (dead-lettered with the reason, without its value if it is too large even for
//               the dead-letter topic); a job record or payload that cannot be read, or a pending
//               entry without a readable record (set aside: state failed with "corrupt job
//               record: ...", or the entry moved to the shard's quarantine hash); a ready record
//               Kafka refuses as too large (failed after one attempt) or refuses for good
//               (failed after max_attempts). Each is logged once, counted, and the rest flows.
//   fatal       a bad configuration or an admin address that cannot be bound (exit 2 from
//               main(), before this class runs), or a producer fatal error that keeps coming back
//               on fresh producers (more than 5 in a minute, either producer;
//               producer_recovery.hpp): run() returns 1.
// Anything else thrown in a turn (an error reply nobody anticipated, a bug) is treated as
// transient: logged once per distinct message, reported as degraded, retried with backoff.
// Nothing a remote server says and no byte read from Redis or Kafka ends the process.
//
// OWNERSHIP. The consumer groups decide which shards (ingest partitions) this instance owns,
// with cooperative-sticky assignment by default (only the partitions that must move, move).
// Each topic read has a group of its own (config/ingest_topics.hpp), so that each group spreads
// one topic's partitions over the instances. The listeners run on the loop's thread, relayed
// from each ingest thread (above); the status topic's thread relays none (no shards).
//   assigned   the shards are noted; the next turn takes each one's fence in Redis (a growing
//              epoch, storage/job_store.hpp) and only then lets the scheduler load it, so no
//              job of a shard is claimed without its fence. A take that fails (Redis down) is
//              retried every turn.
//   revoked,   first the producer's outstanding records are awaited (up to 2 s) and settled, so
//   lost       the next owner finds them ready; then the shards' waiting jobs leave the wheel,
//              their held records are dropped unsent, and the fences are forgotten.
//   fenced     Redis refused a claim, retry or failure because another member took the shard
//              (this one was paused past its session, say): the shard is given up at once,
//              before Kafka says so (broker/fire_path.hpp).
//
// Start: Redis must answer on every connection (retried with backoff until it does or a stop is
// requested); the Redis settings check refuses a Redis that may drop waiting jobs once full
// (broker/redis_settings_check.hpp), and the version interlock checks Redis's layout and the groups'
// members (either refusal ends start-up, exit status 2); missing
// ingest and dead-letter topics are created when kafka.create_topics is on (retried likewise).
// Jobs of each shard that were due while delayd was down are loaded at assignment and fire at
// once.
// Stop: the ingest threads commit what is done and leave their consumer groups (partitions go to
// other instances at once; the loop serves those revokes), then the loop waits up to
// scheduler.shutdown_timeout_ms for in-flight records to be acknowledged and settled, flushes.
//
// The loop's parts, each in files of its own: ownership.hpp (rebalance listeners, fences, what a
// revoke does), handover.hpp and ingest_stage.hpp (the ingest thread and what it hands over),
// ingest_pause.hpp (when reading ingest pauses), outage_tracker.hpp (outages,
// backoff, the /healthz problem), periodic.hpp (the periodic duties and their periods),
// loop_settings.hpp (librdkafka tuning, each part's options);
// service.cpp keeps the turn, start-up and shutdown.
//
// Threading: run() on one thread, the loop's; it starts and joins the ingest thread and the two
// stages. `stop` may be set from any thread (a signal handler's). The topic creator runs a
// thread of its own.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "broker/snapshot.hpp"
#include "config/config.hpp"
#include "telemetry/tracer.hpp"

namespace delayd::broker {

// What start-up waits for, as /healthz says it ("redis unavailable: <reason>"); "" once it
// waits for nothing. Called on the loop's thread each time a start-up step fails or recovers.
using StartupReport = std::function<void(const std::string& problem)>;

class Service {
 public:
  // `tracer` (null: tracing off) gets the accept and publish spans; it must outlive run().
  explicit Service(config::Config config, telemetry::Tracer* tracer = nullptr)
      : config_(std::move(config)), tracer_(tracer) {}
  // Returns the process exit status: 0 after a clean stop (also when the stop came while
  // start-up was still retrying), 1 if a fatal error (see the error model) stopped the loop, 2 if
  // the version interlock refused to start (broker/version_interlock.hpp: another version shares
  // the consumer groups or has written a newer layout to Redis), or the Redis settings check did (a
  // Redis that may drop waiting jobs once full); each refusal logged as one sentence.
  // Throws if the loop's Kafka clients cannot be built (a property librdkafka refuses).
  // `publish`, if given, receives a snapshot of the loop's state about five times a second
  // (the admin endpoint serves it); `starting`, if given, what start-up waits for meanwhile.
  int run(const std::atomic<bool>& stop, const std::function<void(LoopSnapshot)>& publish = {},
          const StartupReport& starting = {});

 private:
  config::Config config_;
  telemetry::Tracer* tracer_;
};

}  // namespace delayd::broker
