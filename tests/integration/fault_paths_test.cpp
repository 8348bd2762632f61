// The fault-tolerance items, each where it can break: the fire path, the scheduler, the clock
// and the topic creator, in-process against the stack's real Redis and Kafka (no delayd process,
// so each fault can be made exactly: a producer limit, a dead broker address, a fatal error,
// a revoke in the middle of a delivery, a clock that steps).
// The numbers in the test names are those of the fault-tolerance issue's list. The fencing cases
// (a shard moved on to another member) are in fencing_paths_test.cpp, over the same rig.
#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "broker/fire_path.hpp"
#include "broker/ingest_path.hpp"
#include "broker/scheduler.hpp"
#include "broker/topic_creator.hpp"
#include "broker/wall_clock.hpp"
#include "connectors/kafka_test_support.hpp"
#include "fire_rig.hpp"
#include "redis/url.hpp"
#include "storage/job_store.hpp"
#include "support/pending_entries.hpp"
#include "support/redis_cleanup.hpp"
#include "support/redis_connect.hpp"
#include "support/test_env.hpp"

using namespace delayd;
using broker::FireOptions;
using broker::FirePath;
using broker::Scheduler;
using connectors::DeliveryError;
namespace kt = connectors::test;

using namespace delayd::testing::fire;

TEST_CASE("what a failed delivery costs depends on what Kafka said", "[unit][fire]") {
  FireOptions o;
  o.max_attempts = 3;
  auto transient = broker::decide(DeliveryError::transient, 3, o);
  CHECK(transient.kind == broker::FailureAction::Kind::retry);
  CHECK(transient.refund);  // item 5: an outage never burns an attempt, even the last one
  CHECK_FALSE(transient.keep_firing);
  auto maybe = broker::decide(DeliveryError::possibly_persisted, 3, o);
  CHECK(maybe.kind == broker::FailureAction::Kind::retry);
  CHECK(maybe.refund);
  CHECK(maybe.keep_firing);  // item 6: no cancel may win against a record that may be in Kafka
  CHECK(broker::decide(DeliveryError::fatal, 1, o).keep_firing);
  auto big = broker::decide(DeliveryError::too_large, 1, o);
  CHECK(big.kind == broker::FailureAction::Kind::dead_letter);  // item 2: after one attempt
  CHECK(big.strip_value);
  // Kafka refusing the client (a missing Write ACL, a failed login): the job waits, no attempt spent.
  CHECK(broker::decide(DeliveryError::refused, 3, o).kind == broker::FailureAction::Kind::retry);
  CHECK(broker::decide(DeliveryError::refused, 3, o).refund);
  CHECK_FALSE(broker::decide(DeliveryError::refused, 3, o).keep_firing);
  CHECK(broker::decide(DeliveryError::permanent, 2, o).kind == broker::FailureAction::Kind::retry);
  CHECK_FALSE(broker::decide(DeliveryError::permanent, 2, o).refund);
  CHECK(broker::decide(DeliveryError::permanent, 3, o).kind == broker::FailureAction::Kind::dead_letter);
}

TEST_CASE_METHOD(Fixture,
                 "2: a job whose ready record is too large fails after one attempt, dead-lettered without its value",
                 "[fire][faults]") {
  const std::string ready = kt::create_topic("ready", 1);
  const std::string dlq = kt::create_topic("dlq", 1);
  put({job("big", wall_now(), ready, std::string(3000, 'x')), job("small", wall_now(), ready)});
  {
    FireRig rig(*this, producer_props({{"message.max.bytes", "2000"}}), fire_options(dlq, 5));
    REQUIRE(rig.run_until([&] { return field("big", "state") != "delay" && field("small", "state") != "delay"; }));
    CHECK(field("small", "state") == "ready");
    CHECK(field("big", "state") == "failed");
    CHECK(field("big", "attempt") == "1");
    CHECK_THAT(field("big", "error"), Catch::Contains("refused as too large"));
  }
  connectors::KafkaConsumer consumer(kt::consumer_props(kt::unique_name("g")), {});
  consumer.subscribe({dlq});
  auto got = kt::consume_n(consumer, 1);
  REQUIRE(got.size() == 1);
  CHECK_FALSE(got[0].value.has_value());
  auto* bytes = connectors::find_header(got[0].headers, "value-bytes");
  REQUIRE(bytes != nullptr);
  CHECK(**bytes == "3000");
  consumer.close();
}

TEST_CASE_METHOD(Fixture, "3: a failed retry after a revoke and re-assign of the same shard does not strand the job",
                 "[fire][faults]") {
  Scheduler s(options(), wall_now(), store);
  s.assign(shard);
  const std::int64_t t0 = wall_now();
  put({job("r", t0, "ready.b")});
  s.refill(t0);
  auto due = s.take_due(t0);
  REQUIRE(due.size() == 1);  // in flight now
  s.revoke(shard);           // an eager rebalance takes the shard away ...
  s.assign(shard);           // ... and gives it straight back
  s.refill(t0);              // skips the held job and moves the horizon past it
  REQUIRE(s.horizon(shard).value_or(0) > t0);
  // The delivery fails and is retried: the job must stay held, or nothing would ever fire it.
  CHECK(s.retry_at(due[0], t0 + 5));
  CHECK(s.holds(shard, "r"));
  CHECK(s.take_due(t0 + 5).size() == 1);
}

TEST_CASE_METHOD(Fixture, "4: a Redis failure while setting jobs aside leaves no claimed job stuck in flight",
                 "[fire][faults]") {
  const std::string ready = kt::create_topic("ready", 1);
  const std::string dlq = kt::create_topic("dlq", 1);
  const std::int64_t t0 = wall_now();
  put({job("a", t0, ready), job("b", t0, ready), job("c", t0, ready)});
  delayd::testing::put_pending_entry(redis, keys, shard, "b-ghost", t0);  // no record: set aside
  redis.command({"SET", keys.quarantine(shard), "not a hash"});           // ... and that fails
  FireRig rig(*this, producer_props(), fire_options(dlq));
  rig.scheduler.refill(t0);
  rig.path.fire_due(wall_now());
  // Every deliverable job of the batch went out; the one that could not be set aside waits.
  CHECK(rig.path.unsettled() == 3);
  CHECK(rig.scheduler.holds(shard, "b-ghost"));
  redis.command({"DEL", keys.quarantine(shard)});  // Redis is fine again
  REQUIRE(rig.run_until([&] { return rig.path.unsettled() == 0 && !rig.scheduler.holds(shard, "b-ghost"); }));
  for (const char* id : {"a", "b", "c"}) CHECK(field(id, "state") == "ready");
  CHECK(redis.command({"HEXISTS", keys.quarantine(shard), "b-ghost"}).view().integer() == 1);
}

TEST_CASE_METHOD(Fixture, "5: a Kafka outage delays jobs without burning attempts or dead-lettering them",
                 "[fire][faults]") {
  put({job("o", wall_now(), "ready.nowhere")});
  // Nothing listens on port 1: every record times out unsent (not persisted).
  connectors::Properties dead{{"bootstrap.servers", "127.0.0.1:1"}, {"message.timeout.ms", "200"}, {"linger.ms", "1"}};
  FireRig rig(*this, dead, fire_options("dlq.nowhere", 2));
  // Before the fix each timeout counted, so the job was failed after two of them.
  REQUIRE(rig.run_until([&] { return rig.path.counters().retried_outage >= 4; }));
  CHECK(field("o", "state") == "delay");
  CHECK(field("o", "attempt") == "0");
  CHECK(rig.path.counters().failed == 0);
  CHECK(rig.path.counters().retried == 0);
}

TEST_CASE_METHOD(Fixture, "7: a full producer queue does not block the fire path, and every job still goes out",
                 "[fire][faults]") {
  const std::string ready = kt::create_topic("ready", 1);
  const std::int64_t t0 = wall_now();
  std::vector<storage::NewJob> jobs;
  for (int i = 0; i < 200; ++i) jobs.push_back(job("q" + std::to_string(i), t0, ready));
  put(jobs);
  FireRig rig(*this, producer_props({{"queue.buffering.max.messages", "20"}}), fire_options("dlq.unused"));
  rig.scheduler.refill(t0);
  const std::size_t produced = rig.path.fire_due(wall_now());  // before the fix: blocked up to 5 s per record
  CHECK(produced == 200);
  CHECK(rig.path.unsettled() == 200);
  REQUIRE(rig.run_until([&] { return rig.path.counters().delivered == 200; }));
  CHECK(rig.path.counters().retried_outage > 0);  // the queue was full for some: retried, not counted
  CHECK(field("q199", "attempt") == "1");
}

TEST_CASE_METHOD(Fixture, "8: after a producer fatal error a new producer delivers, and no attempt is burned",
                 "[fire][faults]") {
  const std::string ready = kt::create_topic("ready", 1);
  FireRig rig(*this, producer_props(), fire_options("dlq.unused", 1));
  rig.producer.inject_fatal_error_for_testing("injected by the test");
  put({job("x", wall_now(), ready)});
  rig.scheduler.refill(wall_now());
  // The fatal producer refuses the record (class fatal): the job stays in flight and retries.
  REQUIRE(rig.run_until([&] { return rig.path.counters().retried_outage >= 1; }));
  CHECK(field("x", "state") == "delay");
  CHECK(field("x", "firing_at") != "<nil>");  // possibly written: a cancel cannot win now
  CHECK(store.cancel(shard, "x", wall_now()).state == storage::JobState::in_flight);
  // What the service does each turn: replace the broken producer.
  const auto reason = rig.producer.recover_if_fatal();
  REQUIRE(reason.has_value());
  CHECK_THAT(*reason, Catch::Contains("injected by the test"));
  CHECK_FALSE(rig.producer.fatal_error().has_value());
  REQUIRE(rig.run_until([&] { return field("x", "state") == "ready"; }));
  CHECK(field("x", "attempt") == "1");  // max_attempts is 1: the fatal error did not count
}

TEST_CASE_METHOD(Fixture, "9: a forward clock step that is corrected leaves nothing firing early afterwards",
                 "[scheduler][faults]") {
  std::int64_t wall = 1'795'000'000'000;
  broker::WallClock clock([&] { return wall; });
  Scheduler s(options(), clock.now_ms(), store);
  s.assign(shard);
  s.refill(clock.now_ms());
  wall += 3'600'000;  // NTP steps an hour ahead ...
  s.take_due(clock.now_ms());
  s.refill(clock.now_ms());
  wall -= 3'600'000;  // ... and back
  s.refill(clock.now_ms());
  put({job("after", wall + 1000, "ready.b")});
  s.offer(shard, "after", wall + 1000);
  REQUIRE(s.holds(shard, "after"));
  // Before the fix delayd's clock stayed pinned an hour ahead, so this fired at once.
  CHECK(s.take_due(clock.now_ms()).empty());
  wall += 999;
  CHECK(s.take_due(clock.now_ms()).empty());
  wall += 1;
  CHECK(s.take_due(clock.now_ms()).size() == 1);
  CHECK(s.next_due() == std::nullopt);
}

TEST_CASE_METHOD(Fixture, "9: a timer set before a backward step is re-timed by the claim, never produced early",
                 "[scheduler][faults]") {
  std::int64_t wall = 1'795'000'000'000;
  Scheduler s(options(), wall, store);
  s.assign(shard);
  s.refill(wall);
  put({job("before", wall + 500, "ready.b")});
  s.offer(shard, "before", wall + 500);
  wall -= 10'000;  // the clock steps back 10 s
  s.refill(wall);
  wall += 500;  // the wheel reaches the old deadline while the wall clock is 9.5 s before it
  auto due = s.take_due(wall);
  REQUIRE(due.size() == 1);
  auto claim = store.claim(shard, std::vector<std::string>{"before"}, wall);
  REQUIRE(claim[0].kind == storage::Claim::Kind::early);  // the fire path re-times it:
  REQUIRE(s.retry_at(due[0], claim[0].deliver_at));
  // deliver_at is wall + 10 000 now: it fires when the wall clock gets there, not before.
  CHECK(s.take_due(wall + 9'999).empty());
  CHECK(s.take_due(wall + 10'000).size() == 1);
}

TEST_CASE_METHOD(Fixture, "11: a run of equal deliver-at longer than every page still moves the horizon",
                 "[scheduler][faults]") {
  const std::int64_t t0 = wall_now();
  std::vector<storage::NewJob> jobs;
  for (int i = 0; i < 2500; ++i) jobs.push_back(job("same" + std::to_string(i), t0 + 100, "ready.b"));
  jobs.push_back(job("later", t0 + 200, "ready.b"));
  put(jobs);
  Scheduler s(options(100), t0, store);  // pages of 100; before the fix, 4 doublings reached 1600 and stopped
  s.assign(shard);
  s.refill(t0, 4);
  s.refill(t0, 4);
  CHECK(s.held() == 2501);
  CHECK(s.horizon(shard) == t0 + 60000);
  CHECK(s.take_due(t0 + 100).size() == 2500);
}

TEST_CASE("12: the topic creator refuses new topics beyond its cap and never makes the caller wait",
          "[faults][topics]") {
  broker::TopicCreator creator(kt::base_props(), {1, 1, 2});
  const std::string a = kt::unique_name("cap-a"), b = kt::unique_name("cap-b"), c = kt::unique_name("cap-c");
  CHECK(creator.request(a));
  CHECK(creator.request(b));
  CHECK(creator.request(a));  // asked before: still fine
  CHECK_FALSE(creator.request(c));
  CHECK(creator.requested() == 2);
  // The topics appear without anyone waiting for them.
  connectors::KafkaAdmin admin(kt::base_props());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline && !(admin.partition_count(a) && admin.partition_count(b))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(admin.partition_count(a) == std::optional<int>(1));
  CHECK(admin.partition_count(b) == std::optional<int>(1));
  CHECK(admin.partition_count(c) == std::nullopt);
}

namespace {

connectors::Record ingest_record(const std::string& topic, std::int64_t offset, bool valid) {
  connectors::Record r;
  r.topic = topic;
  r.partition = 0;
  r.offset = offset;
  r.timestamp_ms = wall_now();
  r.value = "v";
  if (valid) {
    r.headers = {{"deliver-at", std::to_string(wall_now() + 60'000)},
                 {"business", "b"},
                 {"job-id", "in-" + std::to_string(offset)}};
  } else {
    r.headers = {{"business", "b"}};  // no deliver-at: dead-lettered
  }
  return r;
}

struct IngestRig {
  Scheduler scheduler;
  broker::SchedulerFeed feed{scheduler};
  broker::IngestPath* ingest = nullptr;
  connectors::KafkaProducer producer;
  broker::IngestPath path;

  IngestRig(Fixture& f, connectors::Properties props, const std::string& dlq, std::size_t max_waiting = 64)
      : scheduler(Fixture::options(), wall_now(), f.store),
        producer(std::move(props), [this](const connectors::DeliveryReport& r) { ingest->on_report(r); }),
        path(feed, f.store, producer, nullptr, options(dlq, max_waiting)) {
    ingest = &path;
  }
  static broker::IngestOptions options(const std::string& dlq, std::size_t max_waiting) {
    broker::IngestOptions o;
    o.dlq_topic = dlq;
    o.max_waiting_batches = max_waiting;
    return o;
  }
};

}  // namespace

namespace {

// A Redis client whose one round trip matching `lose` runs on the server and then fails as if
// Redis had closed the connection before answering (what a Redis restart does to the calls in
// flight): the caller sees RedisIoError and sends the call again.
class LosesOneAnswer final : public redis::RedisClient {
 public:
  LosesOneAnswer(redis::RedisClient& real, std::function<bool(const redis::Command&)> lose)
      : real_(real), lose_(std::move(lose)) {}
  redis::RedisReply command(const redis::Command& argv) override { return real_.command(argv); }
  std::vector<redis::RedisReply> command_on_every_server(const redis::Command& argv) override {
    return real_.command_on_every_server(argv);
  }
  std::vector<redis::RedisReply> pipeline(const std::vector<redis::Command>& commands) override {
    auto replies = real_.pipeline(commands);
    if (!lost_ && std::any_of(commands.begin(), commands.end(), lose_)) {
      lost_ = true;
      throw redis::RedisIoError("connection lost (the test dropped the answer)");
    }
    return replies;
  }
  void post(const std::vector<redis::Command>& commands) override { real_.post(commands); }
  std::vector<redis::RedisReply> collect() override { return real_.collect(); }
  void abandon() noexcept override { real_.abandon(); }
  void wait_replicas(int replicas, int timeout_ms) override { real_.wait_replicas(replicas, timeout_ms); }
  bool lost() const { return lost_; }

 private:
  redis::RedisClient& real_;
  std::function<bool(const redis::Command&)> lose_;
  bool lost_ = false;
};

}  // namespace

TEST_CASE_METHOD(Fixture, "a mark whose answer was lost neither skips a repeat's occurrence nor strands the next one",
                 "[fire][faults]") {
  const std::string ready = kt::create_topic("ready", 1);
  const std::string dlq = kt::create_topic("dlq", 1);
  // The mark of a repeat that keeps no payload is the one script call (FCALL, or EVALSHA where
  // Redis has no functions) with a "drop" argument.
  LosesOneAnswer lossy(redis, [](const redis::Command& c) {
    return !c.empty() && (c[0] == "FCALL" || c[0] == "EVALSHA") && std::find(c.begin(), c.end(), "drop") != c.end();
  });
  storage::JobStore lossy_store(lossy, keys, 600);
  storage::NewJob j = job("rep", wall_now(), ready);
  j.repeat.every = std::chrono::milliseconds(300);
  j.repeat.count = 3;
  put({j});
  Scheduler scheduler(options(), wall_now(), lossy_store);
  FirePath* fire = nullptr;
  broker::IdempotentSink sink(producer_props(), [&](const connectors::DeliveryReport& r) { fire->on_report(r); });
  FirePath path(scheduler, lossy_store, sink, fire_options(dlq));
  fire = &path;
  scheduler.assign(shard);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (field("rep", "state") != "ready" && std::chrono::steady_clock::now() < deadline) {
    try {
      const std::int64_t now = wall_now();
      path.fire_due(now);
      sink.producer().poll(10);
      path.settle(wall_now());
      scheduler.refill(now);
    } catch (const redis::RedisIoError&) {
      // as the service's loop: the turn failed, the marks stay queued and go again
    }
  }
  REQUIRE(lossy.lost());
  CHECK(field("rep", "state") == "ready");  // the series ended with its third occurrence
  connectors::KafkaConsumer consumer(kt::consumer_props(kt::unique_name("g")), {});
  consumer.subscribe({ready});
  auto got = kt::consume_n(consumer, 4, std::chrono::seconds(5));  // a fourth would be a duplicate
  std::vector<std::string> occurrences;
  for (const auto& r : got) {
    const auto* rep = connectors::find_header(r.headers, "repeat");
    occurrences.push_back(rep != nullptr && *rep ? std::string(**rep) : "-");
  }
  CHECK(occurrences == std::vector<std::string>{"1", "2", "3"});
  consumer.close();
}

TEST_CASE_METHOD(Fixture, "a wake list popped without an answer strands no job once the loop reloads its horizons",
                 "[horizon][faults]") {
  // What the loop does (broker/service.cpp): pop the wake lists, and on a failed connection
  // forget the horizons (Scheduler::reload()). The pop's answer is lost, its effect stands.
  LosesOneAnswer lossy(redis, [](const redis::Command& c) { return !c.empty() && c[0] == "LPOP"; });
  storage::JobStore lossy_store(lossy, keys, 600);
  const std::int64_t now = wall_now();
  Scheduler scheduler(options(), now, lossy_store);
  scheduler.assign(shard);
  put({job("moved", now + 3'600'000, "b")});  // beyond the horizon: the loader leaves it
  scheduler.refill(now);
  REQUIRE(scheduler.horizon(shard) == now + 60'000);
  REQUIRE_FALSE(scheduler.holds(shard, "moved"));
  // Another member reads a reschedule of it: its pending entry moves below our horizon, and its
  // id goes on the shard's wake list for us.
  REQUIRE(store.reschedule_anywhere(shard, "moved", now + 200, now).state == storage::JobState::delay);
  const std::array shards{shard};
  CHECK_THROWS_AS(lossy_store.take_wakes(shards), redis::RedisIoError);
  REQUIRE(lossy.lost());
  CHECK(lossy_store.take_wakes(shards).empty());  // the pop ran: the news is gone
  scheduler.refill(wall_now());
  CHECK_FALSE(scheduler.holds(shard, "moved"));  // below the horizon, held by no one: stranded

  scheduler.reload();
  CHECK_FALSE(scheduler.horizon(shard).has_value());
  scheduler.refill(wall_now());
  CHECK(scheduler.holds(shard, "moved"));
  std::vector<std::string> fired;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (fired.empty() && std::chrono::steady_clock::now() < deadline) {
    for (const auto slot : scheduler.take_due(wall_now())) fired.push_back(scheduler.job(slot).job_id);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(fired == std::vector<std::string>{"moved"});
  CHECK(wall_now() >= now + 200);  // at its new time, not before
}

TEST_CASE_METHOD(Fixture,
                 "7: ingest never waits for dead-letter acknowledgements, and commits in batch order once they are in",
                 "[ingest][faults]") {
  const std::string dlq = kt::create_topic("dlq", 1);
  IngestRig rig(*this, producer_props(), dlq);
  // Batch 1 has a dead letter, batch 2 only good jobs: 2 may not be committed before 1.
  rig.path.process(std::vector<connectors::Record>{ingest_record("in", 0, true), ingest_record("in", 1, false)},
                   wall_now());
  rig.path.process(std::vector<connectors::Record>{ingest_record("in", 2, true)}, wall_now());
  rig.path.settle();                         // batch 2 was posted (send-ahead): its replies read now
  CHECK(field("in-0", "state") == "delay");  // the jobs are durable at once
  CHECK(field("in-2", "state") == "delay");
  CHECK(rig.path.take_committable().empty());  // batch 1's dead letter is not acknowledged yet
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  broker::IngestPath::Offsets offsets;
  while (offsets.empty() && std::chrono::steady_clock::now() < deadline) {
    rig.producer.poll(50);
    offsets = rig.path.take_committable();
  }
  REQUIRE(offsets.size() == 1);
  CHECK(offsets[0].first == connectors::TopicPartition{"in", 0});
  CHECK(offsets[0].second == 3);  // both batches at once, in order
}

TEST_CASE_METHOD(Fixture,
                 "7: with Kafka down, dead letters back up until ingest reports a backlog, and nothing is committed",
                 "[ingest][faults]") {
  connectors::Properties dead{{"bootstrap.servers", "127.0.0.1:1"}, {"message.timeout.ms", "200"}, {"linger.ms", "1"}};
  IngestRig rig(*this, dead, "dlq.nowhere", 3);
  for (std::int64_t b = 0; b < 3; ++b) {
    CHECK_FALSE(rig.path.backlogged());
    rig.path.process(
        std::vector<connectors::Record>{ingest_record("in", 2 * b, true), ingest_record("in", 2 * b + 1, false)},
        wall_now());
  }
  rig.path.settle();
  CHECK(rig.path.backlogged());  // the service pauses reading now
  // The copies fail (timed out) and are retried with backoff; they are never dropped.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rig.path.counters().dead_letter_retries < 3 && std::chrono::steady_clock::now() < deadline) {
    rig.producer.poll(50);
    rig.path.retry_dead_letters();
  }
  CHECK(rig.path.counters().dead_letter_retries >= 3);
  CHECK(rig.path.waiting_dead_letters() == 3);
  CHECK(rig.path.take_committable().empty());
  CHECK(field("in-4", "state") == "delay");  // the good jobs went on regardless
}

TEST_CASE_METHOD(Fixture,
                 "send-ahead: a batch is posted, collected with the next one, and processed again if abandoned",
                 "[ingest][post]") {
  const std::string dlq = kt::create_topic("dlq", 1);
  IngestRig rig(*this, producer_props(), dlq);
  const std::string shard_in = storage::shard_id("in", 0);
  const std::int64_t t0 = wall_now();
  rig.scheduler.assign(shard_in);
  rig.scheduler.refill(t0);  // loaded: offers within the horizon are held
  auto record = [&](std::int64_t offset) {
    connectors::Record r = ingest_record("in", offset, true);
    r.headers[0].value = std::to_string(t0 + 10'000);  // deliver-at, within the load window
    return r;
  };
  const std::vector<connectors::Record> b1{record(0), record(1)};
  const std::vector<connectors::Record> b2{record(2)};

  rig.path.process(b1, t0);
  CHECK(rig.path.in_flight() == 1);  // posted: its replies not read yet
  CHECK_FALSE(rig.path.processed(b1));
  CHECK(rig.path.take_committable().empty());          // so its offsets wait
  CHECK_FALSE(rig.scheduler.holds(shard_in, "in-0"));  // and the wheel hears of it only once acknowledged
  rig.path.process(b2, t0);                            // posts b2, then collects b1
  CHECK(rig.path.in_flight() == 1);
  CHECK(rig.path.processed(b1));
  CHECK_FALSE(rig.path.processed(b2));
  // Reads that start at b1's first record but end elsewhere (a partition read again after a
  // rebalance) are other records: skipping them after a failure would lose their jobs.
  CHECK_FALSE(rig.path.processed(std::vector<connectors::Record>{record(0), record(1), record(2)}));
  CHECK_FALSE(rig.path.processed(std::vector<connectors::Record>{record(0)}));
  CHECK(rig.scheduler.holds(shard_in, "in-0"));
  CHECK(rig.scheduler.holds(shard_in, "in-1"));
  auto offsets = rig.path.take_committable();
  REQUIRE(offsets.size() == 1);
  CHECK(offsets[0].second == 2);

  // Forgotten before its replies were read (an outage): b2 is processed again, and ends the same.
  rig.path.abandon();
  CHECK(rig.path.in_flight() == 0);
  CHECK_FALSE(rig.path.processed(b2));
  rig.path.process(b2, t0);
  rig.path.settle();
  CHECK(rig.path.in_flight() == 0);
  CHECK(rig.path.processed(b2));
  CHECK(rig.scheduler.holds(shard_in, "in-2"));
  CHECK(field("in-2", "state") == "delay");
  offsets = rig.path.take_committable();
  REQUIRE(offsets.size() == 1);
  CHECK(offsets[0].second == 3);
  // b2's job written once or twice (whether Redis ran the abandoned post is unknown): one job.
  CHECK(rig.path.counters().accepted + rig.path.counters().duplicates == 3);
  CHECK(rig.path.counters().accepted >= 2);

  // A batch holding a job and its cancel while the batch before is posted: the cancel, which
  // goes before its job's accept, first collects the posted batch (the store takes no other
  // call meanwhile), and the job is accepted straight into cancelled.
  rig.path.process(std::vector<connectors::Record>{record(3)}, t0);
  REQUIRE(rig.path.in_flight() == 1);
  connectors::Record cancel = ingest_record("in", 5, true);
  cancel.headers = {{"op", "cancel"}, {"job-id", "in-4"}};
  rig.path.process(std::vector<connectors::Record>{record(4), cancel}, t0);
  rig.path.settle();
  CHECK(field("in-3", "state") == "delay");
  CHECK(field("in-4", "state") == "cancelled");
  CHECK_FALSE(rig.scheduler.holds(shard_in, "in-4"));
  offsets = rig.path.take_committable();
  REQUIRE(offsets.size() == 1);
  CHECK(offsets[0].second == 6);
}

// Throughput: jobs are claimed claim_ahead_ms before they are due, so that at the due instant
// only the producer call is left. Never early still holds by the wall clock, and a cancel in
// that window is late (truthfully: the record will go).
TEST_CASE_METHOD(Fixture, "a job claimed ahead is held until its deliver-at, and a cancel meanwhile is late",
                 "[fire][ahead]") {
  const std::string ready = kt::create_topic("ready", 1);
  const std::string dlq = kt::create_topic("dlq", 1);
  FireOptions o = fire_options(dlq);
  o.claim_ahead_ms = 5'000;
  FireRig rig(*this, producer_props(), o);
  const std::int64_t t0 = wall_now();
  put({job("soon", t0 + 3'000, ready), job("later", t0 + 60'000, ready)});
  rig.scheduler.refill(t0);

  CHECK(rig.path.fire_due(t0) == 0);  // nothing is due yet ...
  CHECK(rig.path.prepared() == 1);    // ... but "soon" is claimed and its record waits
  CHECK(rig.path.next_prepared() == std::optional<std::int64_t>(t0 + 3'000));
  CHECK(field("soon", "attempt") == "1");
  CHECK(field("later", "attempt") == "0");
  CHECK(store.cancel(shard, "soon", t0 + 10).state == storage::JobState::in_flight);

  CHECK(rig.path.send_prepared(t0 + 2'999) == 0);  // never early
  CHECK(rig.path.unsettled() == 0);
  CHECK(rig.path.send_prepared(t0 + 3'000) == 1);
  REQUIRE(rig.run_until([&] { return field("soon", "state") == "ready"; }));
  CHECK(field("later", "state") == "delay");
  CHECK(rig.path.prepared() == 0);
}

// Fewer, larger claim calls: a round starts when a job falls due within claim_ahead_ms and takes
// with it what falls due up to claim_gather_ms later; nothing starts a round earlier than that.
TEST_CASE_METHOD(Fixture, "a claim round takes the jobs due within the gather window, and only once one is due",
                 "[fire][ahead]") {
  const std::string ready = kt::create_topic("ready", 1);
  FireOptions o = fire_options(kt::create_topic("dlq", 1));
  o.claim_ahead_ms = 5'000;
  o.claim_gather_ms = 3'000;
  FireRig rig(*this, producer_props(), o);
  const std::int64_t t0 = wall_now();
  bool first_due = false;
  SECTION("one job due within claim_ahead_ms: the round gathers") { first_due = true; }
  SECTION("none due within claim_ahead_ms: no round") {}
  if (first_due) put({job("first", t0 + 4'000, ready)});
  put({job("gathered", t0 + 7'500, ready), job("left", t0 + 8'500, ready)});
  rig.scheduler.refill(t0);

  CHECK(rig.path.fire_due(t0) == 0);
  if (first_due) {
    CHECK(rig.path.prepared() == 2);
    CHECK(field("first", "attempt") == "1");
    CHECK(field("gathered", "attempt") == "1");  // due 3 500 ms after the window: within the gather
    CHECK(rig.path.next_prepared() == std::optional<std::int64_t>(t0 + 4'000));
  } else {
    CHECK(rig.path.prepared() == 0);
    CHECK(field("gathered", "attempt") == "0");  // within the gather, but no job started a round
  }
  CHECK(field("left", "attempt") == "0");  // beyond claim_ahead_ms + claim_gather_ms
  CHECK(field("left", "state") == "delay");
  CHECK(rig.path.send_prepared(t0 + 3'999) == 0);  // never early

  // A job accepted after the round, due within what the round looked at (so its timer is filed
  // below the wheel's time): claimed at once, not when the next job comes within claim_ahead_ms.
  // (Without a round before, it is simply due within claim_ahead_ms.)
  put({job("accepted-after", t0 + 1'000, ready)});
  REQUIRE(rig.scheduler.offer(shard, "accepted-after", t0 + 1'000));
  CHECK(rig.path.claim_wait_ms(t0) == std::optional<std::int64_t>(0));
  CHECK(rig.path.fire_due(t0) == 0);
  CHECK(field("accepted-after", "attempt") == "1");
  CHECK(rig.path.prepared() == (first_due ? 3U : 2U));  // without a round before, this one gathers
  CHECK(field("gathered", "attempt") == "1");
  CHECK(field("left", "attempt") == "0");
  CHECK(rig.path.claim_wait_ms(t0) == std::optional<std::int64_t>(8'500 - 5'000));
}
