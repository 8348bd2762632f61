// How the work spreads (docs/operating/scaling.md, "How the work spreads"): every topic delayd
// reads is read in a consumer group of its own, so each topic's partitions are spread over the
// running instances within one of each other, whatever else happens to the group:
//   scale_spread_default   the default topic sizes (ingest and status topics of 4 partitions)
//   scale_spread_wide      an ingest topic of 12 partitions, an etf1 schedules topic of 6 and
//                          the status topic of 4
// Each case grows the group to 2, 3 and 5 instances, then one leaves (SIGTERM), one is killed
// (kill -9: its partitions move once the session timeout of 6 s passes) and is started again;
// after each step it waits until the group settled (every partition assigned) and checks that
// each instance's count of each topic is within one of every other's. Each step's counts, per
// topic in slot order, are printed on the case's line:
//   chaos: scale_spread_default: 2 up: ingest 2/2, status 2/2; 3 up: ...
// A few jobs are delivered at the end, so that the instances are seen to work, not only to
// hold partitions.
#include <catch2/catch.hpp>

#include "chaos_support.hpp"
#include "fleet.hpp"
#include "support/requires.hpp"

using namespace delayd::chaos;
using namespace std::chrono_literals;

namespace {

struct SpreadCase {
  SpreadCase(const std::string& name, int ingest_partitions, int etf1_partitions, int status_partitions)
      : w(name), fleet(w) {
    delayd::connectors::KafkaAdmin admin(delayd::testing::kafka_client_properties(w.bootstrap));
    // Made before create_topics(), which leaves an existing topic as it is.
    w.create_ingest_topic(w.ingest_topic, ingest_partitions);
    admin.ensure_topics({w.status_topic}, status_partitions, 1);
    partitions[w.ingest_topic] = ingest_partitions;
    partitions[w.status_topic] = status_partitions;
    names[w.ingest_topic] = "ingest";
    names[w.status_topic] = "status";
    if (etf1_partitions > 0) {
      const std::string schedules = w.ingest_topic + ".etf1";
      w.create_ingest_topic(schedules, etf1_partitions);
      w.settings["DELAYD_KAFKA_INGEST_TOPICS"] = schedules + ":etf1";
      partitions[schedules] = etf1_partitions;
      names[schedules] = "etf1";
    }
    w.create_topics({"orders"});
  }

  // After a change of the group: waits for it to settle, notes the counts, checks them.
  void settled(const std::string& step) {
    const Spread s = fleet.wait_even(partitions, 60s);
    const std::string counts = s.text(names);
    line += (line.empty() ? "" : "; ") + std::to_string(fleet.running()) + " up (" + step + "): " + counts;
    INFO("after " << step << ": " << counts);
    INFO("delayd log:\n" << log_tail(w, 30));
    CHECK(s.even(partitions));
  }

  World w;
  Fleet fleet;
  std::map<std::string, int> partitions;  // topic -> its partition count
  std::map<std::string, std::string> names;
  std::string line;
};

void run_case(const std::string& name, SpreadCase& c) {
  REQUIRE(c.fleet.start_member(0));
  REQUIRE(c.fleet.start_member(1));
  c.settled("started");
  REQUIRE(c.fleet.start_member(2));
  c.settled("one joined");
  REQUIRE(c.fleet.start_member(3));
  REQUIRE(c.fleet.start_member(4));
  c.settled("two joined");
  REQUIRE(c.fleet.at(4).stop() == 0);
  c.settled("one left");
  c.fleet.at(0).kill9();
  c.settled("one killed");
  REQUIRE(c.fleet.start_member(0));
  c.settled("restarted");

  // And they work: jobs spread over every ingest partition, all delivered once, none early.
  Expected expected;
  ReadyWatcher ready(c.w, {c.w.ready_topic("orders")});
  {
    Sender pub(c.w);
    publish_spread(pub, expected, "job-", 200, now_ms() + 2000, 2000);
    pub.flush();
  }
  CaseLine out(name, expected, ready, [&] { return std::to_string(c.fleet.running()) + "/4"; });
  ready.poll_until([&] { return ready.all_seen(expected); }, 60s);
  ready.poll_for(1s);
  out.note("spread", c.line);
  const Tally t = out.print();
  CHECK(t.lost == 0);
  CHECK(t.early == 0);
  CHECK(t.duplicates == 0);
  c.fleet.stop_all();
}

}  // namespace

TEST_CASE("scale_spread_default", "[chaos][scale]") {
  SpreadCase c("spread-default", 4, 0, 4);
  run_case("scale_spread_default", c);
}

TEST_CASE("scale_spread_wide", "[chaos][scale]") {
  SpreadCase c("spread-wide", 12, 6, 4);
  run_case("scale_spread_wide", c);
}
