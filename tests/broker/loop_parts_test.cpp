// The scheduling loop's small parts that need no servers: the periodic helper, the longest-turn
// window, the outage tracker's problem text and backoff, the counters' names, and when the
// loop kicks its producer (and the linger it reads), a rate over a window (RateWindow), and the
// table of missing ready topics.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "broker/linger_kick.hpp"
#include "broker/loop_counters.hpp"
#include "broker/loop_settings.hpp"
#include "broker/missing_topics.hpp"
#include "broker/outage_tracker.hpp"
#include "broker/periodic.hpp"
#include "broker/rate_window.hpp"
#include "connectors/rdkafka_config.hpp"

using namespace delayd::broker;
using namespace std::chrono_literals;

TEST_CASE("Every is due at once, then once per period, without making up missed periods", "[broker][loop]") {
  const auto t0 = Every::Clock::now();
  Every every(100ms);
  CHECK(every.due(t0));
  CHECK_FALSE(every.due(t0));
  CHECK_FALSE(every.due(t0 + 99ms));
  CHECK(every.due(t0 + 100ms));
  CHECK(every.due(t0 + 1000ms));  // late: runs once, and the next one is a period from now
  CHECK_FALSE(every.due(t0 + 1099ms));
  CHECK(every.due(t0 + 1100ms));
}

TEST_CASE("Every with First::after_period waits one period first", "[broker][loop]") {
  Every every(10s, Every::First::after_period);
  const auto now = Every::Clock::now();
  CHECK_FALSE(every.due(now));
  CHECK(every.due(now + 10s));
}

TEST_CASE("WindowMax holds the largest value of the current and the previous window", "[broker][loop]") {
  WindowMax max(20ms);
  CHECK(max.value() == 0);
  max.note(5);
  max.note(3);
  CHECK(max.value() == 5);
  std::this_thread::sleep_for(30ms);
  max.note(2);  // a new window; the previous one's 5 still counts
  CHECK(max.value() == 5);
  std::this_thread::sleep_for(30ms);
  max.note(1);  // the 5 is two windows old now
  CHECK(max.value() == 2);
}

TEST_CASE("OutageTracker: problem in dependency order, backoff doubling to 1 s, reset by a done turn",
          "[broker][loop]") {
  OutageTracker t;
  CHECK(t.problem(false).empty());
  CHECK(t.problem(true) == "ingest paused: Kafka is not acknowledging records fast enough");
  CHECK(t.failed(OutageTracker::Failure::kafka, "broker down") == 100);
  CHECK(t.failed(OutageTracker::Failure::redis, "connection refused") == 200);
  CHECK(t.problem(true) == "redis unavailable: connection refused");  // redis is named first
  for (int i = 0; i < 5; ++i) t.failed(OutageTracker::Failure::other, "x");
  CHECK(t.failed(OutageTracker::Failure::other, "x") == 1000);
  const auto on = t.outages();
  CHECK(on.at("redis"));
  CHECK(on.at("kafka"));
  CHECK(on.at("delayd"));
  CHECK_FALSE(on.at("kafka (deliveries)"));

  t.turn_done(std::string("queue full"));
  CHECK(t.problem(false) == "kafka (deliveries) unavailable: queue full");
  CHECK(t.failed(OutageTracker::Failure::redis, "again") == 100);  // the done turn reset the backoff
  t.turn_done(std::nullopt);
  CHECK(t.problem(false).empty());
  for (const auto& [dependency, active] : t.outages()) CHECK_FALSE(active);

  // Kafka refusing the consumer: on while the refusal lasts, whatever the turns do; it comes
  // before a deliveries' outage.
  t.refusal(std::string("Kafka refused Read on group g to user u (SASL SCRAM-SHA-512): denied"));
  t.turn_done(std::string("queue full"));
  CHECK(t.outages().at("kafka (access)"));
  CHECK(t.problem(false) ==
        "kafka (access) unavailable: Kafka refused Read on group g to user u (SASL SCRAM-SHA-512): denied");
  t.turn_done(std::nullopt);
  CHECK(t.outages().at("kafka (access)"));
  t.refusal(std::nullopt);
  CHECK(t.problem(false).empty());
  for (const auto& [dependency, active] : t.outages()) CHECK_FALSE(active);

  // Kept out of the group: on until the consumer has joined, whatever the turns do; after a
  // refusal, before a deliveries' outage.
  t.not_joined(std::string("consumer group g not joined: no group coordinator has answered for 10 s"));
  t.turn_done(std::string("queue full"));
  CHECK(t.outages().at("kafka (group)"));
  CHECK(t.problem(false) ==
        "kafka (group) unavailable: consumer group g not joined: no group coordinator has answered for 10 s");
  t.refusal(std::string("denied"));
  CHECK(t.problem(false) == "kafka (access) unavailable: denied");
  t.refusal(std::nullopt);
  t.turn_done(std::nullopt);
  CHECK(t.outages().at("kafka (group)"));
  t.not_joined(std::nullopt);
  CHECK(t.problem(false).empty());
  for (const auto& [dependency, active] : t.outages()) CHECK_FALSE(active);
}

TEST_CASE("every counter has one name, and the names are those /stats has always shown (and 0.4's recovered)",
          "[broker][loop]") {
  std::set<std::string_view> names;
  for (const auto& [name, field] : kIngestCounterNames) CHECK(names.insert(name).second);
  for (const auto& [name, field] : kFireCounterNames) CHECK(names.insert(name).second);
  CHECK(names.size() == 28);
  for (const char* name :
       {"accepted",         "duplicates",     "cancelled",        "dead_lettered",      "dead_letter_retries",
        "produced",         "delivered",      "retried",          "retried_outage",     "failed",
        "set_aside",        "dropped_stale",  "fenced",           "redelivered",        "repeated",
        "skipped",          "rescheduled",    "reschedules_late", "reschedules_missed", "reports_running",
        "reports_finished", "reports_failed", "reports_ignored",  "reports_unknown",    "upserted",
        "dropped",          "ignored",        "recovered"}) {
    CHECK(names.count(name) == 1);
  }
  CHECK(dead_lettered_name(DeadLetterReason::ack_timeout) == "dead_lettered.ack_timeout");

  LoopCounters c;
  c.ingest.dead_lettered_by[DeadLetterReason::invalid_record] = 2;
  c.fire.dead_lettered_by[DeadLetterReason::invalid_record] = 1;
  c.fire.dead_lettered_by[DeadLetterReason::too_large] = 4;
  const DeadLetterCounts all = c.dead_lettered_by();
  CHECK(all[DeadLetterReason::invalid_record] == 3);
  CHECK(all[DeadLetterReason::too_large] == 4);
  CHECK(all[DeadLetterReason::ack_timeout] == 0);
}

TEST_CASE("LingerKick kicks new records when the loop is idle, at most once per linger", "[broker][loop]") {
  const auto t0 = LingerKick::Clock::now();
  LingerKick kick(5ms);
  CHECK_FALSE(kick.due(t0, 10ms, 0));         // nothing produced yet
  CHECK_FALSE(kick.due(t0, 0ms, 1));          // no sleep to spend on it
  CHECK_FALSE(kick.due(t0, 1ms, 1));          // a steady load's millisecond: the linger batches
  CHECK(kick.due(t0, 2ms, 1));                // a lone record, the loop idle: sent at once
  CHECK_FALSE(kick.due(t0 + 10ms, 10ms, 1));  // nothing new since
  CHECK_FALSE(kick.due(t0 + 4ms, 10ms, 2));   // new, but within a linger of the last kick
  CHECK(kick.due(t0 + 5ms, 10ms, 2));
  CHECK(kick.due(t0 + 100ms, LingerKick::kMinSleep, 40));
}

TEST_CASE("LingerKick never kicks a producer without linger", "[broker][loop]") {
  LingerKick kick(0ms);
  CHECK_FALSE(kick.due(LingerKick::Clock::now(), 100ms, 7));
}

TEST_CASE("producer_linger reads the last linger.ms or its alias", "[broker][loop]") {
  using delayd::connectors::Properties;
  CHECK(producer_linger(Properties{}) == 5ms);
  CHECK(producer_linger(Properties{{"linger.ms", "5"}, {"acks", "all"}, {"linger.ms", "0.5"}}) == 500us);
  CHECK(producer_linger(Properties{{"linger.ms", "1"}, {"queue.buffering.max.ms", "20"}}) == 20ms);
  CHECK(producer_linger(Properties{{"linger.ms", "soon"}}) == 0us);
  const delayd::config::Config c = delayd::config::load_config({}, {});
  CHECK(producer_linger(producer_properties(c)) == 5ms);  // delayd's default
}

TEST_CASE("a linger set under librdkafka's alias replaces delayd's default", "[broker][loop]") {
  delayd::config::ConfigFlags flags;
  flags.sets = {"kafka.producer_properties.queue.buffering.max.ms=20"};
  const delayd::connectors::Properties props = producer_properties(delayd::config::load_config(flags, {}));
  CHECK(producer_linger(props) == 20ms);
  const auto named_linger = [](const auto& kv) { return kv.first == "linger.ms"; };
  CHECK(std::none_of(props.begin(), props.end(), named_linger));  // not left beside it for librdkafka to order
  CHECK(delayd::connectors::find_property(props, "batch.num.messages") == "10000");  // the other defaults stay
}

TEST_CASE("RateWindow reads the last whole window's rate, 0 before one ended, a quiet spell as quiet",
          "[broker][loop]") {
  using Clock = RateWindow::Clock;
  const Clock::time_point t0 = Clock::now();
  RateWindow w(100ms);
  CHECK(w.per_second(t0) == 0.0);
  w.add(10, t0 + 10ms);
  w.add(10, t0 + 50ms);
  CHECK(w.per_second(t0 + 99ms) == 0.0);           // the first window has not ended
  CHECK(w.per_second(t0 + 100ms) == Approx(200));  // 20 events in 100 ms
  w.add(5, t0 + 150ms);
  CHECK(w.per_second(t0 + 199ms) == Approx(200));  // still the last whole window's
  CHECK(w.per_second(t0 + 1100ms) == Approx(5));   // 5 events over the 1 s since: quiet
  CHECK(w.per_second(t0 + 1200ms) == 0.0);         // a window with none
}

TEST_CASE("a lingering transaction's producer lingers as long, unless the user sets linger.ms", "[broker][loop]") {
  const auto linger_of = [](std::vector<std::string> sets) {
    delayd::config::ConfigFlags flags;
    flags.sets = std::move(sets);
    return producer_linger(transactional_properties(delayd::config::load_config(flags, {}), "delay-ingest:0"));
  };
  CHECK(linger_of({}) == 20ms);                                // the default transaction linger
  CHECK(linger_of({"kafka.transaction_linger_ms=0"}) == 5ms);  // none: the ready producer's 5 ms
  CHECK(linger_of({"kafka.transaction_linger_ms=20"}) == 20ms);
  CHECK(linger_of({"kafka.transaction_linger_ms=250"}) == 250ms);
  CHECK(linger_of({"kafka.transaction_linger_ms=20", "kafka.producer_properties.linger.ms=2"}) == 2ms);
  CHECK(linger_of({"kafka.transaction_linger_ms=20", "kafka.producer_properties.queue.buffering.max.ms=3"}) == 3ms);
  // the ready producer of at_least_once keeps its own
  delayd::config::ConfigFlags flags;
  flags.sets = {"kafka.transaction_linger_ms=20"};
  CHECK(producer_linger(producer_properties(delayd::config::load_config(flags, {}))) == 5ms);
}

namespace {

// An ingest topic's group and the status topic's, as config::consumer_groups() names them for
// kafka.group_id = "g".
std::pair<delayd::config::ConsumerGroup, delayd::config::ConsumerGroup> ingest_and_status_groups() {
  return {delayd::config::ConsumerGroup{.group_id = "g", .topic = "delay-ingest", .reports = false, .seed_from = ""},
          delayd::config::ConsumerGroup{
              .group_id = "g.delay-status", .topic = "delay-status", .reports = true, .seed_from = ""}};
}

}  // namespace

TEST_CASE("the ingest groups fetch in batches within 10 ms, the status group within 50, and a user's setting wins",
          "[broker][loop]") {
  using delayd::connectors::find_property;
  const auto [ingest, status] = ingest_and_status_groups();
  const delayd::config::Config c = delayd::config::load_config({}, {});
  CHECK(find_property(consumer_properties(c, ingest), "fetch.min.bytes") == "8192");
  CHECK(find_property(consumer_properties(c, ingest), "fetch.wait.max.ms") == "10");
  CHECK(find_property(consumer_properties(c, status), "fetch.min.bytes") == "8192");
  CHECK(find_property(consumer_properties(c, status), "fetch.wait.max.ms") == "50");
  delayd::config::ConfigFlags flags;
  flags.sets = {"kafka.consumer_properties.fetch.wait.max.ms=3", "kafka.consumer_properties.fetch.min.bytes=1"};
  const delayd::config::Config mine = delayd::config::load_config(flags, {});
  for (const auto& group : {ingest, status}) {
    CHECK(find_property(consumer_properties(mine, group), "fetch.wait.max.ms") == "3");
    CHECK(find_property(consumer_properties(mine, group), "fetch.min.bytes") == "1");
  }
}

TEST_CASE("kafka.group_instance_id makes the instance a static member of each of its groups, and only then",
          "[loop_settings]") {
  using delayd::connectors::find_property;
  const auto [ingest, status] = ingest_and_status_groups();
  const delayd::config::Config dynamic = delayd::config::load_config({}, {});
  delayd::config::ConfigFlags flags;
  flags.sets = {"kafka.group_instance_id=delayd-0"};
  const delayd::config::Config fixed = delayd::config::load_config(flags, {});
  for (const auto& group : {ingest, status}) {
    CHECK_FALSE(find_property(consumer_properties(dynamic, group), "group.instance.id").has_value());
    CHECK(find_property(consumer_properties(fixed, group), "group.instance.id") == "delayd-0");
    CHECK(find_property(consumer_properties(fixed, group), "group.id") == group.group_id);
  }
}

TEST_CASE("the groups rebalance cooperatively unless the user names another strategy", "[loop_settings]") {
  CHECK(delayd::broker::cooperative_rebalancing(delayd::config::load_config({}, {})));
  delayd::config::ConfigFlags flags;
  flags.sets = {"kafka.consumer_properties.partition.assignment.strategy=range,roundrobin"};
  CHECK_FALSE(delayd::broker::cooperative_rebalancing(delayd::config::load_config(flags, {})));
  flags.sets = {"kafka.consumer_properties.partition.assignment.strategy=cooperative-sticky"};
  CHECK(delayd::broker::cooperative_rebalancing(delayd::config::load_config(flags, {})));
}

TEST_CASE("a missing topic is one outage however its reports interleave: a straggler opens none", "[missing_topics]") {
  MissingTopics t;
  // Missing from 1 000: two failures, one outage.
  REQUIRE(t.failed("ready.orders", 1'000, 900) != nullptr);
  MissingTopics::Entry* e = t.failed("ready.orders", 1'100, 1'050);
  REQUIRE(e != nullptr);
  CHECK(e->since_ms == 1'000);
  CHECK(e->failures == 2);
  // Seen back at 2 000.
  const auto was = t.delivered("ready.orders", 2'000);
  REQUIRE(was.has_value());
  CHECK(was->failures == 2);
  CHECK(t.empty());
  // A record sent at 1 500, before the topic was back, fails after: a straggler, no new outage.
  CHECK(t.failed("ready.orders", 2'010, 1'500) == nullptr);
  CHECK(t.empty());
  CHECK(t.missing_for("ready.orders", 2'010) == 0ms);
  // Another topic's first failure is its own outage.
  CHECK(t.failed("ready.mail", 2'020, 1'500) != nullptr);
  // A record sent after the topic was back fails: it is gone again, a new outage.
  e = t.failed("ready.orders", 3'000, 2'500);
  REQUIRE(e != nullptr);
  CHECK(e->since_ms == 3'000);
  CHECK(e->failures == 1);
  // While it is missing, an older record's failure counts towards the same outage.
  e = t.failed("ready.orders", 3'100, 1'900);
  REQUIRE(e != nullptr);
  CHECK(e->failures == 2);
  CHECK(t.problem() ==
        "ready topics ready.mail, ready.orders do not exist (3 failed deliveries so far; their jobs wait)");
}
