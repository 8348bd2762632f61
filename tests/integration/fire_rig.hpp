// The fire side of one delayd, driven by hand against the stack's real Redis and Kafka, for the
// fault tests (fault_paths_test.cpp, fencing_paths_test.cpp): a store on a fresh prefix with the
// jobs a test puts (Fixture), the scheduler, producer and fire path over it (FireRig), and the
// options they run with.
// Threading: the test's thread.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "broker/fire_path.hpp"
#include "broker/scheduler.hpp"
#include "broker/wall_clock.hpp"
#include "connectors/kafka_test_support.hpp"
#include "storage/job_store.hpp"
#include "support/redis_cleanup.hpp"
#include "support/redis_connect.hpp"
#include "support/test_env.hpp"

namespace delayd::testing::fire {

using broker::FireOptions;
using broker::FirePath;
using broker::Scheduler;
namespace kt = connectors::test;

inline std::int64_t wall_now() { return broker::system_now_ms(); }

struct Fixture {
  redis::RedisConnection redis{testing::redis_options(testing::require_env("REDIS_URL"))};
  storage::KeySchema keys{testing::unique_name("f")};
  storage::JobStore store{redis, keys, 600};
  const std::string shard = storage::shard_id("delay-ingest", 0);

  static broker::SchedulerOptions options(std::size_t load_batch = 1000) {
    broker::SchedulerOptions o;
    o.load_window_ms = 60000;
    o.load_batch = load_batch;
    o.fire_batch = 100000;
    return o;
  }
  storage::NewJob job(const std::string& id, std::int64_t at, const std::string& topic, std::string value = "v") {
    storage::NewJob j;
    j.job_id = id;
    j.deliver_at = at;
    j.business = topic;  // fire_options() names the ready topic "{business}"
    j.shard = shard;
    j.value = std::move(value);
    return j;
  }
  void put(const std::vector<storage::NewJob>& jobs) { store.accept(jobs, wall_now()); }
  std::string field(const std::string& id, const std::string& f) {
    auto job = store.get(id);
    return job && job->count(f) != 0 ? job->at(f) : "<nil>";
  }
  ~Fixture() { delayd::testing::delete_prefixed_keys(redis, keys.prefix()); }
};

// The fire side of one delayd, driven by hand: scheduler, producer and fire path.
struct FireRig {
  Scheduler scheduler;
  FirePath* fire = nullptr;
  broker::IdempotentSink sink;
  connectors::KafkaProducer& producer;
  FirePath path;

  FireRig(Fixture& f, connectors::Properties producer_props, FireOptions options)
      : scheduler(Fixture::options(), wall_now(), f.store),
        sink(std::move(producer_props), [this](const connectors::DeliveryReport& r) { fire->on_report(r); }),
        producer(sink.producer()),
        path(scheduler, f.store, sink, std::move(options)) {
    fire = &path;
    scheduler.assign(f.shard);
  }
  // Turns the loop's fire half until `done` or the timeout; returns whether `done` was reached.
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      const std::int64_t now = wall_now();
      path.fire_due(now);
      producer.poll(10);
      path.settle(wall_now());
      scheduler.refill(now);
      if (done()) return true;
    }
    return false;
  }
};

inline FireOptions fire_options(const std::string& dlq, int max_attempts = 3) {
  FireOptions o;
  o.max_attempts = max_attempts;
  o.retry_backoff_ms = 50;
  o.retry_backoff_max_ms = 200;
  o.retry_outage_ms = 50;
  o.dlq_topic = dlq;
  o.ready_topic_template = "{business}";  // each test names its ready topic as the business
  return o;
}

inline connectors::Properties producer_props(std::vector<std::pair<std::string, std::string>> extra = {}) {
  connectors::Properties p = kt::base_props();
  p.emplace_back("linger.ms", "1");
  for (auto& kv : extra) p.push_back(std::move(kv));
  return p;
}

}  // namespace delayd::testing::fire
