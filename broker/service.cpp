#include "broker/service.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <thread>

#include "broker/clock_skew.hpp"
#include "broker/fire_path.hpp"
#include "broker/handover.hpp"
#include "broker/host_clock.hpp"
#include "broker/ingest_stage.hpp"
#include "broker/linger_kick.hpp"
#include "broker/loop_settings.hpp"
#include "broker/outage.hpp"
#include "broker/outage_tracker.hpp"
#include "broker/ownership.hpp"
#include "broker/periodic.hpp"
#include "broker/record_sink.hpp"
#include "broker/redis_settings_check.hpp"
#include "broker/scheduler.hpp"
#include "broker/server_watch.hpp"
#include "broker/timed_redis.hpp"
#include "broker/topic_creator.hpp"
#include "broker/version_interlock.hpp"
#include "broker/wall_clock.hpp"
#include "config/redis_options.hpp"
#include "connectors/kafka_admin.hpp"
#include "connectors/kafka_consumer.hpp"
#include "connectors/kafka_error.hpp"
#include "connectors/kafka_producer.hpp"
#include "delayd/build_info.hpp"
#include "redis/connection.hpp"
#include "redis/server_time.hpp"
#include "storage/job_store.hpp"
#include "storage/key_schema.hpp"
#include "storage/lua_scripts.hpp"
#include "storage/payload_compression.hpp"

namespace delayd::broker {

namespace {

using SteadyClock = std::chrono::steady_clock;

// Milliseconds from `since` to now.
std::int64_t elapsed_ms(SteadyClock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - since).count();
}

// A start-up step that needs a server: tried until it works or a stop is requested (then
// nullopt). Every failure of the step is transient here; a bad configuration was refused before.
template <typename Make>
auto until_up(const char* what, const std::atomic<bool>& stop, const StartupReport& report, Make make)
    -> std::optional<decltype(make())> {
  base::Backoff backoff = outage_backoff();
  Outage outage(what);
  while (!stop) {
    try {
      auto made = make();
      if (outage.active() && report) report("");
      outage.recovered();
      return made;
    } catch (const std::exception& e) {
      outage.failed(e.what());
      if (report) report(outage.problem());
      nap(backoff.next().count(), stop);
    }
  }
  return std::nullopt;
}

// A start-up step that helps but that delayd can run without (the version interlock's look at
// the consumer groups, listing the shards): tried like until_up() for up to `bound`, then given up
// with one warning that says what was skipped and why; a refusal (a login or an ACL Kafka
// refuses) gives up at once and quietly, since the step that needs the same access reports it by
// name. nullopt when given up or stopped; `unanswered` is set when given up for want of an answer.
template <typename Make>
auto if_up_within(const char* what, const std::atomic<bool>& stop, std::chrono::milliseconds bound, bool& unanswered,
                  Make make) -> std::optional<decltype(make())> {
  base::Backoff backoff = outage_backoff();
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!stop) {
    try {
      return make();
    } catch (const connectors::KafkaRefused& e) {
      spdlog::debug("{}: skipped, Kafka refused it ({})", what, e.what());
      return std::nullopt;
    } catch (const std::exception& e) {
      if (std::chrono::steady_clock::now() >= until) {
        spdlog::warn("{}: skipped after {} s without an answer ({})", what,
                     std::chrono::duration_cast<std::chrono::seconds>(bound).count(), e.what());
        unanswered = true;
        return std::nullopt;
      }
      nap(backoff.next().count(), stop);
    }
  }
  return std::nullopt;
}

// How long start-up tries a step of if_up_within() before it goes on without it.
constexpr std::chrono::seconds kOptionalStepBound{5};

// What start-up connected to, kept for the loop's life (on the heap: the loop and the timed
// client hold references into it).
struct Connections {
  // One Redis client, its round trips timed, and a store over it, for each thread that talks to
  // Redis: the loop, the claim and mark stages, and the ingest thread (each on a connection of
  // its own, so that an accept never waits behind a claim or a mark, nor a claim behind a mark).
  struct Store {
    std::unique_ptr<redis::RedisClient> redis;
    DurationHistogram redis_latency;  // every round trip of this client, for /metrics
    std::unique_ptr<TimedRedisClient> timed;
    std::unique_ptr<storage::JobStore> store;
  };
  Store loop;
  Store claim;               // the claim stage's (ClaimWorker): writes under the loop's fences
  Store mark;                // the settle stage's (MarkWorker)
  std::deque<Store> ingest;  // one per ingest stage (config::consumer_groups()); a deque: never moved
  // The server watch's (ServerWatch): TIME once a minute, INFO on every primary every
  // redis.settings_check_interval_ms; no store, no scripts.
  std::unique_ptr<redis::RedisClient> watch;

  std::optional<connectors::KafkaAdmin> admin;  // only with kafka.create_topics
  // Start-up's own questions to Kafka (the version interlock's, the shards' listing) went
  // unanswered within their bound: the ingest stages do not wait out a join's bound before saying
  // Kafka is out of reach (IngestStage, "Subscribed is not joined").
  bool kafka_silent = false;
};

// What the server watch asks, over the watch's own client `redis` (server_watch.hpp).
ServerWatch::Looks server_looks(const config::Config& c, redis::RedisClient& redis) {
  return {.host_clock = [] { return read_host_clock_sync(); },
          .redis_time_us = [&redis] { return redis::server_time_us(redis); },
          .now_us =
              [] {
                return std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                    .count();
              },
          .redis_settings =
              [&c, &redis] {
                return judge_redis_settings(read_redis_settings(redis), redis::mask_redis_url(c.redis.url),
                                            c.redis.wait_replicas > 0);
              }};
}

// How often it looks: the clock every duty::kClockCheck, the settings every
// redis.settings_check_interval_ms (0: never again after start-up).
ServerWatch::Periods server_watch_periods(const config::Config& c) {
  ServerWatch::Periods periods{.clock = duty::kClockCheck, .settings = std::nullopt};
  if (c.redis.settings_check_interval_ms > 0) {
    periods.settings = std::chrono::milliseconds(c.redis.settings_check_interval_ms);
  }
  return periods;
}

// The scheduling loop: what one turn does, in what order, and the bookkeeping around it. The
// parts it turns: Scheduler (the wheel), FirePath, Ownership (rebalances and fences), the
// Handover from the ingest thread (IngestStage), OutageTracker (outages and /healthz), the
// periodic duties (periodic.hpp); their settings come from loop_settings.hpp.
class Loop {
 public:
  // `conn` holds a store per thread (the loop's, each stage's, the ingest thread's), each over a
  // Redis client of its own timed into its histogram; it must outlive the loop.
  // `redis_settings`: start-up's verdict on Redis's settings, which the loop goes on watching.
  Loop(const config::Config& c, const std::atomic<bool>& stop, Connections& conn,
       const RedisSettingsFindings& redis_settings, telemetry::Tracer* tracer)
      : c_(c),
        tracer_(tracer),
        stop_(stop),
        store_(*conn.loop.store),
        redis_latency_(conn.loop.redis_latency),
        scheduler_(scheduler_options(c), clock_.now_ms(), store_),
        sink_(make_record_sink(c, [this](const connectors::DeliveryReport& r) { route_report(r); })),
        // One claim per turn: each result goes back at once, and the loop issues the next meanwhile.
        claimer_(
            "claim", *conn.claim.store, conn.claim.redis_latency, claim_work(), [this] { handover_.notify(); }, 1),
        // Up to four mark requests (800 records) per round trip from a backlog: enough to merge,
        // short enough (a few ms of Redis) not to hold up the other connections' calls behind it;
        // at modest rates what scheduler.mark_gather_ms gathers (one call per shard).
        marker_(
            "mark", *conn.mark.store, conn.mark.redis_latency, mark_work(), [this] { handover_.notify(); }, 4,
            std::chrono::milliseconds(config::mark_gather_ms(c))),
        fire_(scheduler_, store_, *sink_,
              fire_options(
                  c, [this] { return clock_.now_ms(); },
                  [this](const std::string& topic) {
                    if (topics_) topics_->recreate(topic);
                  },
                  tracer),
              FireWorkers{&claimer_, &marker_}),
        ownership_(ownership_options(c), clock_, scheduler_, store_, fire_, *sink_),
        rebalance_(ownership_.listener()),
        ingest_(c, ingest_redis(conn), handover_, topics(c, conn.admin ? &*conn.admin : nullptr), tracer,
                conn.kafka_silent),
        watch_(server_looks(c, *conn.watch), server_watch_periods(c), redis_settings) {
    // Kafka's answers wake the loop, which hands what they acknowledged to the mark stage at
    // once: in at_least_once a record written and not yet marked is delivered again after a
    // crash, so the shorter that spell, the fewer duplicates a kill -9 leaves (the mark stage
    // gathers them only in exactly_once by default: scheduler.mark_gather_ms).
    sink_->on_reports_queued([this] { handover_.notify(); });
    ownership_.enable_fencing();
    ingest_.start();
  }
  // If shutdown() did not run (an exception), the ingest thread must not wait for this thread.
  ~Loop() { handover_.close(); }
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // One turn; false when a fatal error ends the loop. Transient failures are absorbed here.
  bool turn() {
    const auto started = SteadyClock::now();
    std::int64_t waited = 0;
    try {
      if (!sink_->healthy() || ingest_.fatal()) return false;
      handover_.serve(scheduler_, rebalance_);  // what ingest wrote, and rebalances, in order
      ownership_.take_assigned();
      take_wakes();
      fire_and_settle();
      // Two pages (2 000 jobs) per shard per turn: a due record waits behind a page read at
      // most, and a backlog still loads at several hundred thousand jobs a second.
      scheduler_.refill(clock_.now_ms(), 2);
      handover_.serve(scheduler_, rebalance_);
      fire_and_settle();  // what the refill and ingest found due within claim_ahead_ms
      handover_.set_fire_state(fire_.stuck(), fire_.unsettled());
      outages_.turn_done(fire_.delivery_outage());
      handover_.set_redis_down_since(0);
      waited = idle();
    } catch (const redis::RedisIoError& e) {
      // A call may have run without its answer reaching us (a wake list popped, a move's news
      // lost): what the horizons say was loaded is loaded again (Scheduler::reload()).
      scheduler_.reload();
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

  // Stops the ingest thread, which commits what is done and leaves the group (its revoke is
  // served here, like every rebalance), then settles the in-flight records for up to
  // scheduler.shutdown_timeout_ms, and flushes the producer. Logs failures; never throws.
  void shutdown() {
    spdlog::info("stopping: leaving the consumer group, settling {} in-flight records", fire_.unsettled());
    ingest_.request_stop();
    while (!ingest_.finished()) {
      try {
        handover_.serve(scheduler_, rebalance_);
        fire_and_settle();
      } catch (const std::exception& e) {
        spdlog::warn("settling at shutdown: {}", e.what());
      }
      handover_.wait(std::chrono::milliseconds(10));
    }
    ingest_.join();
    handover_.serve(scheduler_, rebalance_);
    handover_.close();
    const auto deadline = SteadyClock::now() + std::chrono::milliseconds(c_.scheduler.shutdown_timeout_ms);
    while (fire_.unsettled() > 0 && SteadyClock::now() < deadline) {
      try {
        sink_->poll(20);
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
    sink_->flush(1000);
    spdlog::info("stopped: delivered {}, accepted {}", fire_.counters().delivered, ingest_.status().counters.accepted);
  }

  std::function<void(LoopSnapshot)> publish;  // if set, receives a snapshot every duty::kSnapshot

 private:
  // Each ingest stage's Redis parts, from its Store.
  static std::vector<IngestStages::RedisParts> ingest_redis(Connections& conn) {
    std::vector<IngestStages::RedisParts> out;
    for (auto& s : conn.ingest) out.push_back({s.store.get(), s.timed.get(), &s.redis_latency});
    return out;
  }

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
  // read): their timers move. At most every duty::kWakeLists: one round trip, and one more per
  // shard that has wakes.
  void take_wakes() {
    if (!wakes_every_.due()) return;
    const auto shards = scheduler_.owned_shards();
    for (const auto& [shard, entries] : store_.take_wakes(shards)) {
      for (const auto& e : entries) scheduler_.move(shard, e.job_id, e.deliver_at);
    }
  }

  // The producer's delivery reports: ready records and their dead-letter copies, all the fire
  // path's (the ingest thread's dead-letter copies go through a producer of its own).
  void route_report(const connectors::DeliveryReport& r) { fire_.on_report(r); }

  // The fire side's share of a turn: claim what is due within claim_ahead_ms (with what falls due
  // up to claim_gather_ms after it), send what is due now, and write Kafka's acknowledgements to
  // Redis.
  void fire_and_settle() {
    fire_.fire_due(clock_.now_ms());
    sink_->poll(0);
    fire_.settle(clock_.now_ms());
  }

  // Waits until the next claim is due, the ingest thread hands something over, or idle_wait_ms
  // passes. Returns how long it waited, which is idle time, not work. If the producer holds
  // records for its linger, it is kicked instead (linger_kick.hpp): the kick waits at most
  // LingerKick::kKickWait, serving delivery reports, and the next turn follows at once, so that
  // what they acknowledged is marked as soon as without a kick (a crash before the mark
  // delivers the record again), and the loop sleeps then.
  std::int64_t idle() {
    const std::int64_t wait = idle_wait_ms();
    if (wait <= 0) return 0;
    const auto before = SteadyClock::now();
    if (sink_->lingers() && kick_.due(before, std::chrono::milliseconds(wait), sink_->produced())) {
      sink_->flush(static_cast<int>(LingerKick::kKickWait.count()));
    } else {
      handover_.wait(std::chrono::milliseconds(wait));
    }
    return elapsed_ms(before);
  }

  // How long the loop may sleep: until the next claim (a timer due within claim_ahead_ms) or
  // the next held-back record is due, at most 100 ms so that a stop is seen soon, 5 ms while
  // delivery reports are awaited (they wake it when they come: on_reports_queued(); the 5 ms
  // are a fallback); at once if work is waiting.
  std::int64_t idle_wait_ms() const {
    const std::int64_t now = clock_.now_ms();
    std::int64_t wait = 100;
    // With the claim stage full, due timers wait for a claim's result (which wakes the loop).
    if (auto claim = fire_.claim_wait_ms(now); claim && !fire_.claims_full()) wait = std::min(wait, *claim);
    if (auto held = fire_.next_prepared()) wait = std::min(wait, *held - now);
    if (fire_.unsettled() > 0) wait = std::min<std::int64_t>(wait, 5);
    if (fire_.stages_busy()) wait = std::min<std::int64_t>(wait, 5);  // their results wake it sooner
    if (fire_.stuck()) wait = 10;                                     // due jobs wait for Kafka's reports: do not spin
    return std::max<std::int64_t>(wait, 0);
  }

  // A turn failed: the outage is noted and the loop waits out the backoff (or a stop), serving
  // the ingest thread's handover meanwhile (a rebalance waits for it; offers need no I/O).
  void fail(OutageTracker::Failure what, const std::string& reason) {
    // The ingest threads leave their groups once Redis has failed this long (IngestStage).
    if (what == OutageTracker::Failure::redis && handover_.redis_down_since() == 0) {
      handover_.set_redis_down_since(steady_now_ms());
    }
    const auto until = SteadyClock::now() + std::chrono::milliseconds(outages_.failed(what, reason));
    while (!stop_ && SteadyClock::now() < until) {
      handover_.wait(std::min(std::chrono::duration_cast<std::chrono::milliseconds>(until - SteadyClock::now()),
                              std::chrono::milliseconds(20)));
      try {
        handover_.serve(scheduler_, rebalance_);
      } catch (const std::exception& e) {
        spdlog::warn("serving the ingest thread during an outage: {}", e.what());
      }
    }
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
    const IngestStatus ingest = ingest_.status();
    snapshot.counters = {ingest.counters, fire_.counters()};
    // The loop's own outage first; then the ingest thread's (or its pause).
    snapshot.problem = outages_.problem(false);
    if (snapshot.problem.empty()) snapshot.problem = ingest.problem;
    snapshot.outages = outages_.outages();
    for (const auto& [dependency, on] : ingest.outages)
      snapshot.outages[dependency] = snapshot.outages[dependency] || on;
    snapshot.rebalances = ownership_.rebalances();
    snapshot.lateness = fire_.lateness();
    snapshot.redis_request = redis_latency_;
    snapshot.redis_request.add(ingest.redis_request);
    snapshot.redis_request.add(claimer_.latency());
    snapshot.redis_request.add(marker_.latency());
    snapshot.kafka_produce = fire_.produce_latency();
    snapshot.ingest_lag = ingest.lag;
    snapshot.partitions = ingest.partitions;
    snapshot.delivery = sink_->counters();
    snapshot.delivery.retaken = ownership_.retaken();
    snapshot.delivery.groups_left = ingest.groups_left;
    snapshot.compression = store_.compression();
    snapshot.loading = ownership_.loading();
    snapshot.joining = ingest.joining;
    snapshot.missing_topics = missing_topics();
    snapshot.missing_topics_problem = fire_.missing_topics().problem();
    ServerFindings servers = watch_.findings();
    snapshot.clock_problem = std::move(servers.clock_problem);
    snapshot.clock_offset_s = servers.clock_offset_s;
    if (servers.host_clock) {
      snapshot.clock_synchronized = servers.host_clock->synchronized;
      snapshot.clock_max_error_s = static_cast<double>(servers.host_clock->max_error_us) / 1e6;
    }
    snapshot.redis_settings_problem = std::move(servers.redis_settings_problem);
    if (tracer_ != nullptr) snapshot.traces = tracer_->counters();
    return snapshot;
  }

  // The progress line of the log, every duty::kProgressLog.
  void log_progress() {
    const auto& f = fire_.counters();
    const IngestCounters i = ingest_.status().counters;
    spdlog::info(
        "held {} (wheel {}), in flight {}; accepted {}, duplicates {}, cancelled {}, dead-lettered {}; "
        "delivered {}, retried {} (+{} outage), failed {}, set aside {}; longest turn {} ms",
        scheduler_.held(), scheduler_.in_wheel(), fire_.unsettled(), i.accepted, i.duplicates, i.cancelled,
        i.dead_lettered, f.delivered, f.retried, f.retried_outage, f.failed, f.set_aside, longest_turn_.value());
  }

  const config::Config& c_;
  telemetry::Tracer* tracer_;  // null: tracing off; its counters go into the snapshot
  const std::atomic<bool>& stop_;
  storage::JobStore& store_;
  const DurationHistogram& redis_latency_;
  WallClock clock_;
  Scheduler scheduler_;
  std::optional<TopicCreator> topics_;
  Handover handover_;                 // before the producer and the stages: they wake the loop through it
  std::unique_ptr<RecordSink> sink_;  // the ready records' way to Kafka (kafka.delivery)
  ClaimWorker claimer_;               // the claim stage's thread and connection
  MarkWorker marker_;                 // the settle stage's thread and connection
  FirePath fire_;
  Ownership ownership_;
  Handover::Listener rebalance_;  // Ownership's, run by handover_.serve()
  IngestStages ingest_;           // last: their threads start once everything they hand over to exists

  OutageTracker outages_;
  LingerKick kick_{producer_linger(producer_properties(c_))};  // sends a lone record without the linger
  WindowMax longest_turn_{duty::kTurnWindow};
  Every snapshot_every_{duty::kSnapshot};
  Every wakes_every_{duty::kWakeLists};
  Every progress_log_every_{duty::kProgressLog, Every::First::after_period};
  ServerWatch watch_;  // the clock and settings checks, on a thread of their own (server_watch.hpp)
};

// Connects one Store (retried until Redis answers or a stop is requested; false then).
bool connect_store(const config::Config& c, const std::atomic<bool>& stop, const StartupReport& report,
                   Connections::Store& s) {
  auto redis = until_up("redis", stop, report, [&] { return config::make_redis_client(c); });
  if (!redis) return false;
  s.redis = std::move(*redis);
  s.timed = std::make_unique<TimedRedisClient>(*s.redis, s.redis_latency);
  auto store = until_up("redis", stop, report, [&] {
    return std::make_unique<storage::JobStore>(*s.timed, storage::KeySchema(c.redis.prefix), c.redis.job_retention_s,
                                               config::script_calls(c));
  });
  if (!store) return false;
  s.store = std::move(*store);
  s.store->compress_payloads_above(static_cast<std::size_t>(c.redis.compress_payloads_above_bytes),
                                   c.redis.compression_dictionary);
  return true;
}

// Start-up: Redis first (without it nothing can be accepted, so there is no point joining the
// group), then the ingest and dead-letter topics if delayd creates them. Each step is retried
// until it works; nullptr if a stop was requested first.
// What start-up ends with: the connections, or nothing (a stop was requested, or the version
// interlock refused: broker/version_interlock.hpp).
struct StartUp {
  std::unique_ptr<Connections> conn;
  bool refused = false;
  RedisSettingsFindings redis_settings;  // start-up's verdict on Redis's settings (the loop watches them)
};

// The version interlock's two checks; false (the refusal logged) when one refuses.
bool interlock(const config::Config& c, const std::atomic<bool>& stop, const StartupReport& report, Connections& conn) {
  const auto layout =
      until_up("redis", stop, report, [&] { return conn.loop.store->claim_layout(kLayout, build::kVersion); });
  if (!layout) return true;  // stopping: nothing to refuse
  if (layout->layout > kLayout) {
    spdlog::critical("{}", layout_refusal(*layout, c.redis.prefix));
    return false;
  }
  if (layout->layout < kLayout && layout->layout > 0) {
    spdlog::info(
        "redis prefix '{}' holds delayd 0.3's layout: this delayd {} reads it and moves each record into "
        "layout {} as it meets it",
        c.redis.prefix, build::kVersion, kLayout);
  }
  std::vector<std::string> groups;
  for (const auto& g : config::consumer_groups(c)) groups.push_back(g.group_id);
  // Without an answer (Kafka refusing the login or Describe on a group, or not answering) the
  // check is skipped: the consumer groups' own join then reports what is wrong.
  const auto found = if_up_within(
      "the version interlock's look at the consumer groups", stop, kOptionalStepBound, conn.kafka_silent, [&] {
        connectors::KafkaAdmin admin(config::kafka_properties(c, config::KafkaClient::admin));
        return strangers(admin, groups);
      });
  if (stop) return true;
  if (found && !found->empty()) {
    spdlog::critical("{}", members_refusal(*found));
    return false;
  }
  return true;
}

// The Redis settings check (broker/redis_settings_check.hpp): the verdict, its warnings and what
// could not be read logged, and its refusal when a server may drop waiting jobs once full. Retried
// while Redis does not answer, or answers "not now"; nullopt when a stop was requested first.
std::optional<RedisSettingsFindings> keeps_waiting_jobs(const config::Config& c, const std::atomic<bool>& stop,
                                                        const StartupReport& report, redis::RedisClient& redis) {
  const auto found = until_up("redis", stop, report, [&] {
    return judge_redis_settings(read_redis_settings(redis), redis::mask_redis_url(c.redis.url),
                                c.redis.wait_replicas > 0);
  });
  if (!found) return std::nullopt;
  for (const auto& line : found->unread) spdlog::info("{}", line);
  for (const auto& line : found->warnings) spdlog::warn("{}", line);
  if (!found->refusal.empty()) spdlog::critical("{}; delayd does not start against it", found->refusal);
  return found;
}

// Says how payloads are kept (storage/payload_compression.hpp): the dictionary read from Redis,
// or that one will be trained, and (later, from the ingest thread that trains it) what it made.
void log_compression(const config::Config& c) {
  const auto above = c.redis.compress_payloads_above_bytes;
  if (above == 0) return;
  if (!c.redis.compression_dictionary) {
    spdlog::info("payloads above {} B are kept compressed, each alone", above);
    return;
  }
  const std::shared_ptr<storage::PayloadDictionaries> dictionaries = storage::PayloadDictionaries::of(c.redis.prefix);
  if (const auto d = dictionaries->current()) {
    spdlog::info("payloads above {} B are kept compressed with dictionary {} ({} B, read from {})", above, d->id(),
                 d->bytes().size(), storage::KeySchema(c.redis.prefix).dictionary());
    return;
  }
  spdlog::info("payloads above {} B are kept compressed; a dictionary is trained from the first {}", above,
               storage::kDictionarySamples);
  dictionaries->on_trained([key = storage::KeySchema(c.redis.prefix).dictionary()](
                               const storage::CompressionDictionary* d, std::size_t samples) {
    if (d == nullptr) {
      spdlog::warn("no compression dictionary could be trained from {} payloads: each is compressed alone", samples);
    } else {
      spdlog::info("compression dictionary {} ({} B) trained from {} payloads; kept in Redis as {}", d->id(),
                   d->bytes().size(), samples, key);
    }
  });
}

StartUp start_up(const config::Config& c, const std::atomic<bool>& stop, const StartupReport& report) {
  auto conn = std::make_unique<Connections>();
  if (!connect_store(c, stop, report, conn->loop) || !connect_store(c, stop, report, conn->claim) ||
      !connect_store(c, stop, report, conn->mark)) {
    return {};
  }
  for (std::size_t i = 0; i < config::consumer_groups(c).size(); ++i) {
    if (!connect_store(c, stop, report, conn->ingest.emplace_back())) return {};
  }
  auto watch = until_up("redis", stop, report, [&] { return config::make_redis_client(c); });
  if (!watch) return {};
  conn->watch = std::move(*watch);
  conn->claim.store->enable_fencing(Ownership::member_name());
  if (conn->loop.store->script_calls() == storage::ScriptCalls::functions) {
    spdlog::info("redis: scripts run as the function library {}", storage::lua::library_name());
  } else {
    spdlog::info(
        "redis: scripts run as EVAL scripts ({})",
        c.redis.functions ? "this Redis has no functions, or its ACL denies FUNCTION" : "redis.functions = false");
  }
  spdlog::info("redis {} ready (prefix '{}')", redis::mask_redis_url(c.redis.url), c.redis.prefix);
  auto settings = keeps_waiting_jobs(c, stop, report, *conn->loop.redis);
  if (!settings) return {};
  if (!settings->refusal.empty()) return {nullptr, true, {}};
  log_compression(c);
  if (!interlock(c, stop, report, *conn)) return {nullptr, true, {}};

  if (c.kafka.create_topics) {
    conn->admin.emplace(config::kafka_properties(c, config::KafkaClient::admin));
    const auto made = until_up("kafka", stop, report, [&] {
      std::vector<std::string> topics{c.kafka.dlq_topic};
      for (const auto& t : config::ingest_topics(c)) topics.push_back(t.topic);
      if (!c.etf1.history_topic.empty()) topics.push_back(c.etf1.history_topic);
      if (!c.kafka.status_topic.empty()) topics.push_back(c.kafka.status_topic);
      conn->admin->ensure_topics(topics, static_cast<int>(c.kafka.topic_partitions),
                                 static_cast<int>(c.kafka.topic_replication));
      // exactly_once: each ingest topic's delivery log, with as many partitions as it has
      // (broker/delivery_log.hpp), kept for kafka.delivery_log_retention_ms.
      if (config::delivery_mode(c) == config::DeliveryMode::exactly_once) {
        for (const auto& t : config::ingest_topics(c)) {
          const int partitions =
              conn->admin->partition_count(t.topic).value_or(static_cast<int>(c.kafka.topic_partitions));
          conn->admin->ensure_topics(
              {config::delivery_log_topic(t.topic)}, partitions, static_cast<int>(c.kafka.topic_replication),
              {{"cleanup.policy", "delete"}, {"retention.ms", std::to_string(c.kafka.delivery_log_retention_ms)}});
        }
      }
      return true;
    });
    if (!made) return {};
  }
  // Every shard of every ingest topic is listed in <prefix>:shards before any record is read: a
  // cancel read before its job, on another partition, is remembered in each listed shard
  // (JobStore::cancel_anywhere()), and a shard listed only once its owner loads it (which waits
  // for its producer) or first accepts into it would miss the cancel, and deliver the job.
  // Without Kafka's metadata in time, each shard is listed when it is first loaded or accepted
  // into, as before 0.4.
  if_up_within("listing the ingest topics' shards", stop, kOptionalStepBound, conn->kafka_silent, [&] {
    connectors::KafkaAdmin admin(config::kafka_properties(c, config::KafkaClient::admin));
    for (const auto& t : config::ingest_topics(c)) {
      const int partitions = admin.partition_count(t.topic).value_or(0);  // a missing topic: when it is made
      for (int p = 0; p < partitions; ++p) conn->loop.store->register_shard(storage::shard_id(t.topic, p));
    }
    return true;
  });
  if (stop) return {};
  return {std::move(conn), false, std::move(*settings)};
}

// Turns the loop until a stop is requested (0) or a fatal error ends it (1).
int run_turns(Loop& loop, const std::atomic<bool>& stop) {
  while (!stop) {
    if (!loop.turn()) return 1;
  }
  return 0;
}

}  // namespace

int Service::run(const std::atomic<bool>& stop, const std::function<void(LoopSnapshot)>& publish,
                 const StartupReport& starting) {
  const config::Config& c = config_;
  StartUp up = start_up(c, stop, starting);
  if (up.refused) return 2;
  if (!up.conn) return 0;
  const auto conn = std::move(up.conn);
  Loop loop(c, stop, *conn, up.redis_settings, tracer_);
  loop.publish = publish;
  std::string ingest;
  for (const auto& t : config::ingest_topics(c)) {
    ingest += (ingest.empty() ? "" : ", ") + t.topic +
              (t.format == config::IngestFormat::delayd ? "" : " (" + std::string(to_string(t.format)) + ")");
  }
  std::string groups;
  for (const auto& g : config::consumer_groups(c))
    groups += (groups.empty() ? "" : ", ") + g.topic + " in " + g.group_id;
  spdlog::info("delayd running: ingest {} (groups: {}), ready topics {}, dead letters {}", ingest, groups,
               c.kafka.ready_topic_template, c.kafka.dlq_topic);
  const int status = run_turns(loop, stop);
  loop.shutdown();
  return status;
}

}  // namespace delayd::broker
