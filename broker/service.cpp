#include "broker/service.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <thread>

#include "broker/delivery_tags.hpp"
#include "broker/fire_path.hpp"
#include "broker/ingest_path.hpp"
#include "broker/ingest_pause.hpp"
#include "broker/loop_settings.hpp"
#include "broker/outage.hpp"
#include "broker/outage_tracker.hpp"
#include "broker/ownership.hpp"
#include "broker/periodic.hpp"
#include "broker/scheduler.hpp"
#include "broker/timed_redis.hpp"
#include "broker/topic_creator.hpp"
#include "broker/wall_clock.hpp"
#include "config/redis_options.hpp"
#include "connectors/kafka_admin.hpp"
#include "connectors/kafka_consumer.hpp"
#include "connectors/kafka_producer.hpp"
#include "storage/job_store.hpp"
#include "storage/key_schema.hpp"
#include "redis/connection.hpp"

namespace delayd::broker {

namespace {

using SteadyClock = std::chrono::steady_clock;

// Sleeps up to ms, waking early when a stop is requested.
void nap(std::int64_t ms, const std::atomic<bool>& stop) {
  const auto until = SteadyClock::now() + std::chrono::milliseconds(ms);
  while (!stop && SteadyClock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<std::int64_t>(ms, 20)));
  }
}

// Milliseconds from `since` to now.
std::int64_t elapsed_ms(SteadyClock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - since).count();
}

// A start-up step that needs a server: tried until it works or a stop is requested (then
// nullopt). Every failure of the step is transient here; a bad configuration was refused before.
template <typename Make>
auto until_up(const char* what, const std::atomic<bool>& stop, Make make) -> std::optional<decltype(make())> {
  base::Backoff backoff = outage_backoff();
  Outage outage(what);
  while (!stop) {
    try {
      auto made = make();
      outage.recovered();
      return made;
    } catch (const std::exception& e) {
      outage.failed(e.what());
      nap(backoff.next().count(), stop);
    }
  }
  return std::nullopt;
}

// More than this many producer replacements within a minute: a fresh client cannot clear the
// fault, which is the one kind of remote failure that is fatal.
constexpr int kMaxProducerRecoveriesPerMinute = 5;
// Ingest records processed between two looks at the fire side: one accept call per shard of
// at most this many jobs, about 1-3 ms of Redis time.
constexpr std::size_t kIngestChunk = 256;

// The scheduling loop: what one turn does, in what order, and the bookkeeping around it. The
// parts it turns: Scheduler (the wheel), FirePath, IngestPath, Ownership (rebalances and
// fences), IngestPause (back-pressure), OutageTracker (outages and /healthz), the periodic duties
// (periodic.hpp); their settings come from loop_settings.hpp.
class Loop {
 public:
  // `redis_latency` is filled by the client the store uses (TimedRedisClient); it must outlive
  // the loop.
  Loop(const config::Config& c, const std::atomic<bool>& stop, storage::JobStore& store, redis::RedisClient& redis,
       const DurationHistogram& redis_latency, connectors::KafkaAdmin* admin)
      : c_(c),
        stop_(stop),
        store_(store),
        redis_latency_(redis_latency),
        scheduler_(scheduler_options(c), clock_.now_ms(), store),
        producer_(producer_properties(c), [this](const connectors::DeliveryReport& r) { route_report(r); }),
        fire_(scheduler_, store_, producer_,
              fire_options(
                  c, [this] { return clock_.now_ms(); },
                  [this](const std::string& topic) {
                    if (topics_) topics_->recreate(topic);
                  })),
        ingest_(scheduler_, store_, producer_, topics(c, admin), ingest_options(c, redis)),
        ownership_(c.kafka.ingest_topic, clock_, scheduler_, store_, fire_, producer_),
        consumer_(consumer_properties(c), ownership_.listener()) {
    ownership_.enable_fencing();
    // The status topic's partitions come with the group's assignment like the ingest topic's,
    // but they are not shards: reports apply to jobs wherever they are (IngestPath).
    if (c.kafka.status_topic.empty()) {
      consumer_.subscribe({c.kafka.ingest_topic});
    } else {
      consumer_.subscribe({c.kafka.ingest_topic, c.kafka.status_topic});
    }
  }

  // One turn; false when a fatal error ends the loop. Transient failures are absorbed here.
  bool turn() {
    const auto started = SteadyClock::now();
    std::int64_t waited = 0;
    try {
      if (!recover_producer()) return false;
      ownership_.take_assigned();
      take_wakes();
      fire_and_settle();
      ingest_.retry_dead_letters();
      ingest_.retry_waiting_reports(clock_.now_ms());
      // Two pages (2 000 jobs) per shard per turn: a due record waits behind a page read at
      // most, and a backlog still loads at several hundred thousand jobs a second.
      scheduler_.refill(clock_.now_ms(), 2);
      fire_and_settle();  // what the refill found due within claim_ahead_ms
      waited = read_ingest();
      outages_.turn_done(fire_.delivery_outage());
    } catch (const redis::RedisIoError& e) {
      fail(OutageTracker::Failure::redis, e.what());
    } catch (const redis::RedisCommandError& e) {
      fail(OutageTracker::Failure::redis, std::string("refused: ") + e.what());
    } catch (const connectors::KafkaError& e) {
      fail(OutageTracker::Failure::kafka, e.what());
    } catch (const std::exception& e) {
      fail(OutageTracker::Failure::other, e.what());
    }
    // The longest turn, without the time spent waiting for ingest records: how long a due job
    // could have waited behind other work.
    longest_turn_.note(elapsed_ms(started) - waited);
    if (publish && snapshot_every_.due()) publish(snapshot());
    if (progress_log_every_.due()) log_progress();
    return true;
  }

  // Leaves the group after committing what is done, settles the in-flight records for up to
  // scheduler.shutdown_timeout_ms, and flushes the producer. Logs failures; never throws.
  void shutdown() {
    spdlog::info("stopping: leaving the consumer group, settling {} in-flight records", fire_.unsettled());
    try {
      // Batches whose dead-letter copies are acknowledged by now are committed before leaving,
      // so that the next owner does not read (and dead-letter) them again.
      producer_.flush(static_cast<int>(std::min<std::int64_t>(c_.scheduler.shutdown_timeout_ms, 2000)));
      consumer_.commit(ingest_.take_committable());
    } catch (const std::exception& e) {
      spdlog::warn("committing at shutdown: {}", e.what());
    }
    try {
      consumer_.close();
    } catch (const std::exception& e) {
      spdlog::warn("leaving the consumer group: {}", e.what());
    }
    const auto deadline = SteadyClock::now() + std::chrono::milliseconds(c_.scheduler.shutdown_timeout_ms);
    while (fire_.unsettled() > 0 && SteadyClock::now() < deadline) {
      try {
        producer_.poll(20);
        fire_.settle(clock_.now_ms());
      } catch (const std::exception& e) {
        spdlog::warn("settling at shutdown: {}", e.what());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    if (fire_.unsettled() > 0) {
      spdlog::warn("{} records unsettled at shutdown; they stay pending in Redis and are delivered again later",
                   fire_.unsettled());
    }
    producer_.flush(1000);
    spdlog::info("stopped: delivered {}, accepted {}", fire_.counters().delivered, ingest_.counters().accepted);
  }

  std::function<void(LoopSnapshot)> publish;  // if set, receives a snapshot every duty::kSnapshot

 private:
  // The ready topics' creator (built into topics_) when start-up made an admin client; else null.
  TopicCreator* topics(const config::Config& c, connectors::KafkaAdmin* admin) {
    if (admin == nullptr) return nullptr;
    topics_.emplace(
        config::kafka_properties(c, config::KafkaClient::admin),
        TopicCreator::Options{static_cast<int>(c.kafka.topic_partitions), static_cast<int>(c.kafka.topic_replication),
                              static_cast<std::size_t>(c.kafka.max_ready_topics)});
    return &*topics_;
  }

  // Jobs of our shards whose pending entry another member moved (a report or reschedule it
  // read): their timers move. At most every duty::kWakeLists: two round trips when there is work.
  void take_wakes() {
    if (!wakes_every_.due()) return;
    const auto shards = scheduler_.owned_shards();
    for (const auto& [shard, entries] : store_.take_wakes(shards)) {
      for (const auto& e : entries) scheduler_.move(shard, e.job_id, e.deliver_at);
    }
  }

  // The producer's delivery reports: dead-letter copies of ingest records to the ingest path,
  // everything else (ready records and their dead-letter copies) to the fire path.
  void route_report(const connectors::DeliveryReport& r) {
    if (tag_kind(r.tag) == TagKind::ingest_dlq) {
      ingest_.on_report(r);
    } else {
      fire_.on_report(r);
    }
  }

  // A producer in librdkafka's fatal state fails every record; a new instance is the cure. Its
  // outstanding records come back as possibly written, so their jobs stay in flight and retry.
  bool recover_producer() {
    const auto reason = producer_.recover_if_fatal();
    if (!reason) return true;
    const auto now = SteadyClock::now();
    recoveries_.push_back(now);
    while (!recoveries_.empty() && now - recoveries_.front() > std::chrono::minutes(1)) recoveries_.pop_front();
    if (static_cast<int>(recoveries_.size()) > kMaxProducerRecoveriesPerMinute) {
      spdlog::critical("kafka producer fatal error keeps coming back on fresh producers ({}); stopping", *reason);
      return false;
    }
    spdlog::error("kafka producer fatal error ({}); replaced it with a new producer", *reason);
    return true;
  }

  // The fire side's share of a turn: claim what is due within claim_ahead_ms, send what is due
  // now, and write Kafka's acknowledgements to Redis.
  void fire_and_settle() {
    fire_.fire_due(clock_.now_ms());
    producer_.poll(0);
    fire_.settle(clock_.now_ms());
  }

  // Reads one batch of ingest records (or goes on with the one an outage interrupted) and
  // processes it in chunks of kIngestChunk records, doing the fire side's share between chunks,
  // so a due job waits behind one chunk's Redis call at most (and, claimed ahead, not even
  // that: see FirePath). Returns how long it waited for records, which is idle time, not work.
  std::int64_t read_ingest() {
    pause_.apply(fire_, ingest_, ownership_.rebalances(), consumer_);
    std::int64_t waited = 0;
    if (!batch_) {
      const auto before = SteadyClock::now();
      batch_ =
          consumer_.poll_batch(static_cast<std::size_t>(c_.scheduler.ingest_batch), static_cast<int>(idle_wait_ms()));
      batch_done_ = 0;
      waited = elapsed_ms(before);
    }
    while (batch_done_ < batch_->size()) {
      const std::size_t n = std::min(kIngestChunk, batch_->size() - batch_done_);
      // The same cut after an outage: IngestPath resumes a chunk by its first record.
      ingest_.process(std::span<const connectors::Record>(*batch_).subspan(batch_done_, n), clock_.now_ms());
      batch_done_ += n;
      fire_and_settle();
    }
    batch_.reset();
    consumer_.commit_async(ingest_.take_committable());
    return waited;
  }

  // How long the consumer may sleep: until the next claim (a timer due within claim_ahead_ms)
  // or the next held-back record is due, at most 100 ms so that stop and delivery reports are
  // looked at often enough; at once if work is waiting.
  std::int64_t idle_wait_ms() const {
    const std::int64_t now = clock_.now_ms();
    std::int64_t wait = 100;
    if (auto due = scheduler_.next_due()) wait = std::min(wait, *due - c_.scheduler.claim_ahead_ms - now);
    if (auto held = fire_.next_prepared()) wait = std::min(wait, *held - now);
    if (fire_.unsettled() > 0) wait = std::min<std::int64_t>(wait, 5);
    if (fire_.stuck()) wait = 10;  // due jobs wait for Kafka's reports: do not spin
    return std::max<std::int64_t>(wait, 0);
  }

  // A turn failed: the outage is noted and the loop waits out the backoff (or a stop).
  void fail(OutageTracker::Failure what, const std::string& reason) { nap(outages_.failed(what, reason), stop_); }

  // The consumer's lag per partition, read at most every duty::kLagReading (no I/O:
  // librdkafka's cache).
  const std::map<std::string, std::int64_t>& lag() {
    if (lag_every_.due()) {
      lag_.clear();
      try {
        for (const auto& [tp, n] : consumer_.lag()) lag_[storage::shard_id(tp.topic, tp.partition)] = n;
      } catch (const connectors::KafkaError&) {
        // closed or failing: no figures this time
      }
    }
    return lag_;
  }

  // The ready topics Kafka says do not exist, by name.
  std::vector<std::string> missing_topics() const {
    std::vector<std::string> out;
    for (const auto& [topic, e] : fire_.missing_topics().topics()) out.push_back(topic);
    return out;
  }

  // What the loop shows of itself now (broker/snapshot.hpp).
  LoopSnapshot snapshot() {
    LoopSnapshot snapshot;
    snapshot.held = scheduler_.held();
    snapshot.in_wheel = scheduler_.in_wheel();
    snapshot.in_flight = fire_.unsettled();
    snapshot.shards = scheduler_.owned_shards();
    snapshot.next_due = scheduler_.next_due();
    snapshot.max_turn = std::chrono::milliseconds(longest_turn_.value());
    snapshot.counters = {ingest_.counters(), fire_.counters()};
    snapshot.problem = outages_.problem(pause_.paused());
    snapshot.outages = outages_.outages();
    snapshot.rebalances = ownership_.rebalances();
    snapshot.lateness = fire_.lateness();
    snapshot.redis_request = redis_latency_;
    snapshot.kafka_produce = fire_.produce_latency();
    snapshot.ingest_lag = lag();
    snapshot.loading = ownership_.loading();
    snapshot.missing_topics = missing_topics();
    snapshot.missing_topics_problem = fire_.missing_topics().problem();
    return snapshot;
  }

  // The progress line of the log, every duty::kProgressLog.
  void log_progress() const {
    const auto& f = fire_.counters();
    const auto& i = ingest_.counters();
    spdlog::info(
        "held {} (wheel {}), in flight {}; accepted {}, duplicates {}, cancelled {}, dead-lettered {}; "
        "delivered {}, retried {} (+{} outage), failed {}, set aside {}; longest turn {} ms",
        scheduler_.held(), scheduler_.in_wheel(), fire_.unsettled(), i.accepted, i.duplicates, i.cancelled,
        i.dead_lettered, f.delivered, f.retried, f.retried_outage, f.failed, f.set_aside, longest_turn_.value());
  }

  const config::Config& c_;
  const std::atomic<bool>& stop_;
  storage::JobStore& store_;
  const DurationHistogram& redis_latency_;
  WallClock clock_;
  Scheduler scheduler_;
  std::optional<TopicCreator> topics_;
  connectors::KafkaProducer producer_;
  FirePath fire_;
  IngestPath ingest_;
  Ownership ownership_;  // before consumer_: its listeners are the consumer's
  connectors::KafkaConsumer consumer_;

  std::optional<std::vector<connectors::Record>> batch_;  // kept across an outage, retried
  std::size_t batch_done_ = 0;                            // records of batch_ already processed
  OutageTracker outages_;
  std::deque<SteadyClock::time_point> recoveries_;
  IngestPause pause_;
  WindowMax longest_turn_{duty::kTurnWindow};
  Every snapshot_every_{duty::kSnapshot};
  Every wakes_every_{duty::kWakeLists};
  Every lag_every_{duty::kLagReading};
  std::map<std::string, std::int64_t> lag_;  // the last lag() reading
  Every progress_log_every_{duty::kProgressLog, Every::First::after_period};
};

}  // namespace

namespace {

// What start-up connected to, kept for the loop's life (on the heap: the loop and the timed
// client hold references into it).
struct Connections {
  std::unique_ptr<redis::RedisClient> redis;
  DurationHistogram redis_latency;  // every round trip of the loop's client, for /metrics
  std::unique_ptr<TimedRedisClient> timed;
  std::unique_ptr<storage::JobStore> store;
  std::optional<connectors::KafkaAdmin> admin;  // only with kafka.create_topics
};

// Start-up: Redis first (without it nothing can be accepted, so there is no point joining the
// group), then the ingest and dead-letter topics if delayd creates them. Each step is retried
// until it works; nullptr if a stop was requested first.
std::unique_ptr<Connections> start_up(const config::Config& c, const std::atomic<bool>& stop) {
  auto conn = std::make_unique<Connections>();
  auto redis = until_up("redis", stop, [&] { return config::make_redis_client(c); });
  if (!redis) return nullptr;
  conn->redis = std::move(*redis);
  conn->timed = std::make_unique<TimedRedisClient>(*conn->redis, conn->redis_latency);
  auto store = until_up("redis", stop, [&] {
    return std::make_unique<storage::JobStore>(*conn->timed, storage::KeySchema(c.redis.prefix),
                                               c.redis.job_retention_s);
  });
  if (!store) return nullptr;
  conn->store = std::move(*store);
  spdlog::info("redis {} ready (prefix '{}')", redis::mask_redis_url(c.redis.url), c.redis.prefix);

  if (c.kafka.create_topics) {
    conn->admin.emplace(config::kafka_properties(c, config::KafkaClient::admin));
    const auto made = until_up("kafka", stop, [&] {
      std::vector<std::string> topics{c.kafka.ingest_topic, c.kafka.dlq_topic};
      if (!c.kafka.status_topic.empty()) topics.push_back(c.kafka.status_topic);
      conn->admin->ensure_topics(topics, static_cast<int>(c.kafka.topic_partitions),
                                 static_cast<int>(c.kafka.topic_replication));
      return true;
    });
    if (!made) return nullptr;
  }
  return conn;
}

// Turns the loop until a stop is requested (0) or a fatal error ends it (1).
int run_turns(Loop& loop, const std::atomic<bool>& stop) {
  while (!stop) {
    if (!loop.turn()) return 1;
  }
  return 0;
}

}  // namespace

int Service::run(const std::atomic<bool>& stop, const std::function<void(LoopSnapshot)>& publish) {
  const config::Config& c = config_;
  const auto conn = start_up(c, stop);
  if (!conn) return 0;
  Loop loop(c, stop, *conn->store, *conn->timed, conn->redis_latency, conn->admin ? &*conn->admin : nullptr);
  loop.publish = publish;
  spdlog::info("delayd running: ingest {} (group {}), ready topics {}, dead letters {}", c.kafka.ingest_topic,
               c.kafka.group_id, c.kafka.ready_topic_template, c.kafka.dlq_topic);
  const int status = run_turns(loop, stop);
  loop.shutdown();
  return status;
}

}  // namespace delayd::broker
