// Service: delayd itself. Owns the connections and runs the scheduling loop on the calling
// thread until asked to stop.
//
// One loop turn, all on one thread (so the wheel, the horizons and ingest never race):
//   1. fire what is due (wheel -> claim in Redis -> producer)
//   2. serve delivery reports and settle them in Redis (ready / retry / dead-letter)
//   3. refill the wheel from Redis up to now + load window
//   4. read an ingest batch, waiting at most until the next timer is due, make it durable,
//      commit its offsets
// An outage of Redis or Kafka throws out of a turn; the loop logs it, backs off (100 ms doubling
// to 10 s) and tries again. What a failed turn was doing is either kept (the ingest batch, the
// unsettled reports) or safe to redo, so an outage delays jobs but loses none.
//
// Start: Redis must answer (retried with backoff until it does or a stop is requested); missing
// ingest and dead-letter topics are created when kafka.create_topics is on. Jobs of each shard
// that were due while delayd was down are loaded at assignment and fire at once.
// Stop: leave the consumer group (partitions go to other instances at once), wait up to
// scheduler.shutdown_timeout_ms for in-flight records to be acknowledged and settled, flush.
//
// Threading: run() on one thread; `stop` may be set from any thread (a signal handler's).
#pragma once

#include "broker/admin_server.hpp"
#include "broker/config.hpp"

#include <atomic>
#include <functional>

namespace delayd::broker {

class Service {
 public:
  explicit Service(Config config) : config_(std::move(config)) {}
  // Returns the process exit status: 0 after a clean stop, 1 if start-up failed for good.
  // `publish`, if given, receives a snapshot of the loop's state about five times a second
  // (the admin endpoint serves it).
  int run(const std::atomic<bool>& stop, const std::function<void(AdminSnapshot)>& publish = {});

 private:
  Config config_;
};

}  // namespace delayd::broker
