// Service: delayd itself. Owns the connections and runs the scheduling loop on the calling
// thread until asked to stop.
//
// One loop turn, all on one thread (so the wheel, the horizons and ingest never race):
//   1. fire what is due (wheel -> claim in Redis -> producer, never waiting for queue room)
//   2. serve delivery reports and settle them in Redis (ready / retry / dead-letter)
//   3. refill the wheel from Redis up to now + load window
//   4. read an ingest batch, waiting at most until the next timer is due, make it durable, and
//      start committing the offsets of every batch that is done (commits are asynchronous)
// No step waits on Kafka: produce() never blocks, dead-letter acknowledgements and topic
// creation are awaited by nobody (ingest_path.hpp, topic_creator.hpp), offsets are committed
// asynchronously. Redis calls are the only waits, each bounded by redis.timeout_ms.
//
// THE ERROR MODEL. Every failure falls in one of three classes, and only the third ends delayd.
//   transient   Redis unreachable or answering LOADING, BUSY, READONLY, TRYAGAIN, CLUSTERDOWN,
//               MASTERDOWN, MISCONF, OOM (redis::RedisIoError); Kafka unreachable, timing out,
//               its queue full (connectors::KafkaError, DeliveryError::transient and
//               possibly_persisted); a producer fatal error that a new producer clears.
//               The turn is abandoned and retried with backoff (100 ms doubling to 1 s);
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
//               on fresh producers (more than 5 in a minute): run() returns 1.
// Anything else thrown in a turn (an error reply nobody anticipated, a bug) is treated as
// transient: logged once per distinct message, reported as degraded, retried with backoff.
// Nothing a remote server says and no byte read from Redis or Kafka ends the process.
//
// OWNERSHIP. The consumer group decides which shards (ingest partitions) this instance owns,
// with cooperative-sticky assignment by default (only the partitions that must move, move).
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
// Start: Redis must answer (retried with backoff until it does or a stop is requested); missing
// ingest and dead-letter topics are created when kafka.create_topics is on (retried likewise).
// Jobs of each shard that were due while delayd was down are loaded at assignment and fire at
// once.
// Stop: leave the consumer group (partitions go to other instances at once), wait up to
// scheduler.shutdown_timeout_ms for in-flight records to be acknowledged and settled, flush.
//
// The loop's parts, each in files of its own: ownership.hpp (rebalance listeners, fences, what a
// revoke does), ingest_pause.hpp (when reading ingest pauses), outage_tracker.hpp (outages,
// backoff, the /healthz problem), periodic.hpp (the periodic duties and their periods),
// loop_settings.hpp (librdkafka tuning, each part's options);
// service.cpp keeps the turn, start-up and shutdown.
//
// Threading: run() on one thread; `stop` may be set from any thread (a signal handler's). The
// topic creator runs a thread of its own.
#pragma once

#include <atomic>
#include <functional>

#include "broker/snapshot.hpp"
#include "config/config.hpp"

namespace delayd::broker {

class Service {
 public:
  explicit Service(config::Config config) : config_(std::move(config)) {}
  // Returns the process exit status: 0 after a clean stop (also when the stop came while
  // start-up was still retrying), 1 if a fatal error (see the error model) stopped the loop.
  // Throws if the loop's Kafka clients cannot be built (a property librdkafka refuses).
  // `publish`, if given, receives a snapshot of the loop's state about five times a second
  // (the admin endpoint serves it).
  int run(const std::atomic<bool>& stop, const std::function<void(LoopSnapshot)>& publish = {});

 private:
  config::Config config_;
};

}  // namespace delayd::broker
