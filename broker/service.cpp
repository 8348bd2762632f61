#include "broker/service.hpp"

#include "broker/delivery_tags.hpp"
#include "broker/fire_path.hpp"
#include "broker/ingest_path.hpp"
#include "broker/redis_options.hpp"
#include "broker/scheduler.hpp"
#include "broker/wall_clock.hpp"
#include "connectors/kafka_admin.hpp"
#include "connectors/kafka_consumer.hpp"
#include "connectors/kafka_producer.hpp"
#include "storage/job_store.hpp"
#include "storage/key_schema.hpp"
#include "storage/redis_connection.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

namespace delayd::broker {

namespace {

// Outage backoff: doubles from 100 ms to 10 s, reset by a turn that gets through.
class Backoff {
 public:
  std::int64_t next() {
    const std::int64_t d = delay_;
    delay_ = std::min<std::int64_t>(delay_ * 2, 10000);
    return d;
  }
  void reset() { delay_ = 100; }

 private:
  std::int64_t delay_ = 100;
};

// Sleeps up to ms, waking early when a stop is requested.
void nap(std::int64_t ms, const std::atomic<bool>& stop) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!stop && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<std::int64_t>(ms, 20)));
  }
}

// Defaults delayd chooses for its clients, before the user's passthrough (later entries win).
connectors::Properties with_defaults(connectors::Properties defaults, const KafkaProperties& user) {
  for (const auto& kv : user) defaults.push_back(kv);
  return defaults;
}


}  // namespace

int Service::run(const std::atomic<bool>& stop, const std::function<void(AdminSnapshot)>& publish) {
  const Config& c = config_;
  WallClock clock;
  Backoff backoff;

  // Redis first: without it nothing can be accepted, so there is no point joining the group.
  std::optional<storage::RedisConnection> redis;
  while (!redis) {
    if (stop) return 0;
    try {
      redis.emplace(redis_options(c));
    } catch (const std::exception& e) {
      const auto wait = backoff.next();
      spdlog::warn("redis not available ({}); retrying in {} ms", e.what(), wait);
      nap(wait, stop);
    }
  }
  backoff.reset();
  std::optional<storage::JobStore> store_slot;
  while (!store_slot) {
    if (stop) return 0;
    try {
      store_slot.emplace(*redis, storage::KeySchema(c.redis.prefix), c.redis.job_retention_s);
    } catch (const storage::RedisIoError& e) {
      const auto wait = backoff.next();
      spdlog::warn("redis not available ({}); retrying in {} ms", e.what(), wait);
      nap(wait, stop);
    }
  }
  storage::JobStore& store = *store_slot;
  spdlog::info("redis {} ready (prefix '{}')", mask_redis_url(c.redis.url), c.redis.prefix);

  std::optional<connectors::KafkaAdmin> admin;
  if (c.kafka.create_topics) {
    admin.emplace(kafka_properties(c, KafkaClient::admin));
    backoff.reset();
    for (;;) {
      if (stop) return 0;
      try {
        admin->ensure_topics({c.kafka.ingest_topic, c.kafka.dlq_topic}, static_cast<int>(c.kafka.topic_partitions),
                             static_cast<int>(c.kafka.topic_replication));
        break;
      } catch (const connectors::KafkaError& e) {
        const auto wait = backoff.next();
        spdlog::warn("cannot create topics {} and {} ({}); retrying in {} ms", c.kafka.ingest_topic, c.kafka.dlq_topic,
                     e.what(), wait);
        nap(wait, stop);
      }
    }
  }

  SchedulerOptions so;
  so.wheel.tick = static_cast<std::uint64_t>(c.wheel.tick_ms);
  so.wheel.slot_bits = static_cast<unsigned>(c.wheel.slot_bits);
  so.load_window_ms = c.scheduler.load_window_ms;
  so.load_batch = static_cast<std::size_t>(c.scheduler.load_batch);
  so.fire_batch = static_cast<std::size_t>(c.scheduler.fire_batch);
  Scheduler scheduler(so, clock.now_ms(), store);

  FirePath* fire = nullptr;
  IngestPath* ingest = nullptr;
  // linger.ms 1: a ready record waits at most a millisecond for company; precision first.
  connectors::KafkaProducer producer(
      with_defaults({{"linger.ms", "1"}}, kafka_properties(c, KafkaClient::producer)),
      [&](const connectors::DeliveryReport& r) {
        if (tag_kind(r.tag) == TagKind::ingest_dlq) {
          ingest->on_report(r);
        } else {
          fire->on_report(r);
        }
      });
  FirePath fire_path(scheduler, store, producer,
                     FireOptions{static_cast<int>(c.scheduler.max_attempts), c.scheduler.retry_backoff_ms,
                                 c.scheduler.retry_backoff_max_ms, c.kafka.dlq_topic});
  IngestOptions io;
  io.rules = ingest_rules(c);
  io.dlq_topic = c.kafka.dlq_topic;
  io.create_topics = c.kafka.create_topics;
  io.topic_partitions = static_cast<int>(c.kafka.topic_partitions);
  io.topic_replication = static_cast<int>(c.kafka.topic_replication);
  IngestPath ingest_path(scheduler, store, producer, admin ? &*admin : nullptr, io);
  fire = &fire_path;
  ingest = &ingest_path;

  connectors::KafkaConsumer::Listener listener;
  listener.assigned = [&](const std::vector<connectors::TopicPartition>& tps) {
    for (const auto& tp : tps) {
      scheduler.assign(storage::shard_id(tp.topic, tp.partition));
      spdlog::info("shard {} assigned", storage::shard_id(tp.topic, tp.partition));
    }
  };
  listener.revoked = [&](const std::vector<connectors::TopicPartition>& tps) {
    for (const auto& tp : tps) {
      scheduler.revoke(storage::shard_id(tp.topic, tp.partition));
      spdlog::info("shard {} revoked", storage::shard_id(tp.topic, tp.partition));
    }
  };
  // A dead instance's partitions move after session.timeout.ms; 10 s (librdkafka: 45 s) keeps
  // failover quick while tolerating a GC-free C++ process's pauses.
  connectors::KafkaConsumer consumer(
      with_defaults({{"session.timeout.ms", "10000"}, {"heartbeat.interval.ms", "2000"}},
                    kafka_properties(c, KafkaClient::consumer)),
      listener);
  consumer.subscribe({c.kafka.ingest_topic});
  spdlog::info("delayd running: ingest {} (group {}), ready topics {}, dead letters {}", c.kafka.ingest_topic,
               c.kafka.group_id, c.kafka.ready_topic_template, c.kafka.dlq_topic);

  std::optional<std::vector<connectors::Record>> batch;
  std::int64_t next_report = clock.now_ms() + 10000;
  std::int64_t next_publish = 0;
  std::string problem;  // the outage being ridden out, for the admin endpoint
  backoff.reset();
  while (!stop) {
    try {
      std::int64_t now = clock.now_ms();
      fire_path.fire_due(now);
      producer.poll(0);
      fire_path.settle(clock.now_ms());
      scheduler.refill(now);

      if (!batch) {
        // Sleep in the consumer until the next timer is due (at most 100 ms, so that stop and
        // delivery reports are looked at often enough); at once if work is waiting.
        std::int64_t wait = 100;
        if (auto due = scheduler.next_due()) wait = std::clamp<std::int64_t>(*due - clock.now_ms(), 0, wait);
        if (fire_path.unsettled() > 0) wait = std::min<std::int64_t>(wait, 5);
        batch = consumer.poll_batch(static_cast<std::size_t>(c.scheduler.ingest_batch), static_cast<int>(wait));
      }
      if (!batch->empty()) {
        ingest_path.process(*batch, clock.now_ms());
        try {
          consumer.commit(*batch);
        } catch (const connectors::KafkaError& e) {
          // Typically: the partitions were revoked meanwhile. The jobs are in Redis; the next
          // owner re-reads the records and finds them there (idempotent by job-id).
          spdlog::warn("offset commit failed ({}); the records will be re-read by their owner", e.what());
        }
      }
      batch.reset();
      backoff.reset();
      problem.clear();
    } catch (const storage::RedisIoError& e) {
      const auto wait = backoff.next();
      spdlog::warn("redis unavailable: {}; retrying in {} ms", e.what(), wait);
      problem = std::string("redis unavailable: ") + e.what();
      nap(wait, stop);
    } catch (const connectors::KafkaError& e) {
      const auto wait = backoff.next();
      spdlog::warn("kafka trouble: {}; retrying in {} ms", e.what(), wait);
      problem = std::string("kafka trouble: ") + e.what();
      nap(wait, stop);
    }
    if (publish && clock.now_ms() >= next_publish) {
      next_publish = clock.now_ms() + 200;
      const auto& f = fire_path.counters();
      const auto& i = ingest_path.counters();
      publish(AdminSnapshot{scheduler.held(),
                            scheduler.in_wheel(),
                            fire_path.unsettled(),
                            scheduler.owned_shards(),
                            scheduler.next_due(),
                            {{"accepted", i.accepted},
                             {"duplicates", i.duplicates},
                             {"cancelled", i.cancelled},
                             {"dead_lettered", i.dead_lettered},
                             {"produced", f.produced},
                             {"delivered", f.delivered},
                             {"retried", f.retried},
                             {"failed", f.failed},
                             {"dropped_stale", f.dropped_stale}},
                            problem});
    }
    if (clock.now_ms() >= next_report) {
      next_report = clock.now_ms() + 10000;
      const auto& f = fire_path.counters();
      const auto& i = ingest_path.counters();
      spdlog::info("held {} (wheel {}), in flight {}; accepted {}, duplicates {}, cancelled {}, dead-lettered {}; "
                   "delivered {}, retried {}, failed {}",
                   scheduler.held(), scheduler.in_wheel(), fire_path.unsettled(), i.accepted, i.duplicates,
                   i.cancelled, i.dead_lettered, f.delivered, f.retried, f.failed);
    }
  }

  spdlog::info("stopping: leaving the consumer group, settling {} in-flight records", fire_path.unsettled());
  consumer.close();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(c.scheduler.shutdown_timeout_ms);
  while (fire_path.unsettled() > 0 && std::chrono::steady_clock::now() < deadline) {
    producer.poll(20);
    try {
      fire_path.settle(clock.now_ms());
    } catch (const storage::RedisIoError& e) {
      spdlog::warn("redis unavailable while settling: {}", e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  if (fire_path.unsettled() > 0) {
    spdlog::warn("{} records unsettled at shutdown; they stay pending in Redis and are delivered again later",
                 fire_path.unsettled());
  }
  producer.flush(1000);
  spdlog::info("stopped: delivered {}, accepted {}", fire_path.counters().delivered, ingest_path.counters().accepted);
  return 0;
}

}  // namespace delayd::broker
