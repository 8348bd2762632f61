// Fencing (scale-out): a broker whose shard moved on to another member, in-process against the
// stack's real Redis and Kafka, as fault_paths_test.cpp's cases: it produces nothing from its
// wheel, sends a record held across a stall only once its fence is confirmed, and gives a lost
// shard up once.
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "fire_rig.hpp"

using namespace delayd;
using namespace delayd::testing::fire;
using broker::FireOptions;
using broker::FirePath;
using broker::Scheduler;
namespace kt = connectors::test;

namespace {

// The fixture's store as a fencing broker that owns the shard, and a second member's store.
struct Fenced : Fixture {
  storage::JobStore other{redis, keys, 600};
  Fenced() {
    store.enable_fencing("old/1");
    store.take_shard(shard, wall_now());
    other.enable_fencing("new/2");
  }
};

}  // namespace

TEST_CASE_METHOD(Fenced, "a broker whose shard moved on produces nothing from its wheel and gives the shard up",
                 "[fire][fence]") {
  const std::string ready = kt::create_topic("ready", 1);
  FireRig rig(*this, producer_props(), fire_options(kt::create_topic("dlq", 1)));
  const std::int64_t t0 = wall_now();
  put({job("w1", t0, ready), job("w2", t0, ready)});
  rig.scheduler.refill(t0);
  REQUIRE(rig.scheduler.held() == 2);
  other.take_shard(shard, t0);  // the shard moved while this broker was busy

  CHECK(rig.path.fire_due(wall_now()) == 0);
  CHECK(rig.path.unsettled() == 0);  // no record handed to Kafka
  CHECK(rig.path.counters().fenced == 1);
  CHECK_FALSE(rig.scheduler.owns(shard));
  CHECK(rig.scheduler.held() == 0);
  CHECK(field("w1", "state") == "delay");  // the new owner's to deliver
  CHECK(field("w1", "firing_at") == "<nil>");
}

TEST_CASE_METHOD(Fenced, "a record held across a stall is sent only after the fences are confirmed", "[fire][fence]") {
  const std::string ready = kt::create_topic("ready", 1);
  FireOptions o = fire_options(kt::create_topic("dlq", 1));
  o.claim_ahead_ms = 5'000;
  o.fence_recheck = std::chrono::milliseconds(100);
  FireRig rig(*this, producer_props(), o);
  const std::int64_t t0 = wall_now();
  put({job("kept", t0 + 200, ready)});
  rig.scheduler.refill(t0);
  CHECK(rig.path.fire_due(t0) == 0);
  REQUIRE(rig.path.prepared() == 1);

  bool moved = false;
  SECTION("the shard moved during the stall: the record is dropped unsent") { moved = true; }
  SECTION("the shard is still ours: the record goes out after the check") {}
  if (moved) other.take_shard(shard, t0);
  // The stall itself (a SIGSTOP, a starved process): longer than fence_recheck.
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  const std::int64_t due = t0 + 200;
  CHECK(rig.path.send_prepared(std::max(due, wall_now())) == 0);  // not trusted without a check
  rig.path.fire_due(std::max(due, wall_now()));                   // checks, then sends or drops
  CHECK(rig.path.prepared() == 0);
  if (moved) {
    CHECK(rig.path.unsettled() == 0);
    CHECK(rig.path.counters().fenced == 1);
    CHECK(field("kept", "state") == "delay");
  } else {
    CHECK(rig.path.counters().fenced == 0);
    REQUIRE(rig.run_until([&] { return field("kept", "state") == "ready"; }));
  }
}

namespace {

// An IdempotentSink that counts the closes of each kind (everything else passes through).
class CountingSink final : public broker::RecordSink {
 public:
  CountingSink(const connectors::Properties& props, connectors::KafkaProducer::ReportHandler on_report)
      : inner_(props, std::move(on_report)) {}
  void produce(const connectors::OutRecord& rec, const std::string& shard, std::int64_t late_ms) override {
    inner_.produce(rec, shard, late_ms);
  }
  void prepare(const std::string& topic, const std::string& shard) override { inner_.prepare(topic, shard); }
  int poll(int timeout_ms) override { return inner_.poll(timeout_ms); }
  bool flush(int timeout_ms) override { return inner_.flush(timeout_ms); }
  std::uint64_t produced() const override { return inner_.produced(); }
  bool lingers() const override { return inner_.lingers(); }
  void on_reports_queued(std::function<void()> wake) override { inner_.on_reports_queued(std::move(wake)); }
  bool healthy() override { return inner_.healthy(); }
  void open(const std::string& shard, std::vector<storage::InFlightEntry> earlier) override {
    inner_.open(shard, std::move(earlier));
  }
  Opened opened(const std::string& shard) override { return inner_.opened(shard); }
  void close(const std::string& shard, bool lost) override {
    ++(lost ? lost_closes : revoke_closes);
    inner_.close(shard, lost);
  }
  broker::DeliveryCounters counters() const override { return inner_.counters(); }

  int lost_closes = 0;
  int revoke_closes = 0;

 private:
  broker::IdempotentSink inner_;
};

}  // namespace

TEST_CASE_METHOD(Fenced, "a lost shard's purged records give it up once: its stream is closed once, not once a record",
                 "[fire][fence]") {
  const std::string ready = kt::create_topic("ready", 1);
  FirePath* fire = nullptr;
  // A long linger keeps the records queued, so that the loss purges them.
  CountingSink sink(producer_props({{"linger.ms", "5000"}}),
                    [&](const connectors::DeliveryReport& r) { fire->on_report(r); });
  Scheduler scheduler(Fixture::options(), wall_now(), store);
  FirePath path(scheduler, store, sink, fire_options(kt::create_topic("dlq", 1)));
  fire = &path;
  scheduler.assign(shard);
  const std::int64_t t0 = wall_now();
  put({job("q1", t0, ready), job("q2", t0, ready), job("q3", t0, ready)});
  scheduler.refill(t0);
  REQUIRE(path.fire_due(wall_now()) == 3);
  REQUIRE(path.unsettled() == 3);

  // The group takes the shard away without a revoke (Ownership::give_up(shard, true)), and
  // another member takes its fence.
  sink.close(shard, true);
  scheduler.revoke(shard);
  store.drop_shard(shard);
  other.take_shard(shard, wall_now());
  REQUIRE(sink.lost_closes == 1);

  // Each purged record fails; its retry finds the fence gone (ShardFenced) and the path gives the
  // shard up, which it had already.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (path.unsettled() > 0 && std::chrono::steady_clock::now() < deadline) {
    sink.poll(10);
    path.settle(wall_now());
  }
  REQUIRE(path.unsettled() == 0);
  CHECK(sink.counters().purged == 3);
  CHECK(sink.lost_closes == 1);  // not once more a purged record
  CHECK(path.take_lost().empty());
  CHECK(field("q1", "state") == "delay");  // the new owner's to deliver: its claim stands
}
