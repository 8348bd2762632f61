// Load shapes that stress one part of delayd at a time.
//
//   burst_one_ms            20 000 jobs on the same millisecond, all in one shard (one ingest
//                           partition): all delivered, none early.
//   new_business_while_due  jobs of an existing business fall due continuously for 5 s while
//                           records for 5 new businesses arrive, whose ready topics do not exist
//                           yet (kafka.create_topics on: delayd creates them). All delivered,
//                           none early. The line also gives the worst lateness of the existing
//                           business's jobs (what creating topics on the way costs them) and
//                           max_turn_ms from delayd's /stats when it reports one (else n/a).
#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "chaos_support.hpp"

using namespace delayd::chaos;
using namespace std::chrono_literals;

TEST_CASE("burst_one_ms", "[chaos]") {
  World w("chaos-burst");
  w.create_topics({"orders"});
  ReadyWatcher ready(w, {w.ready_topic("orders")});
  Expected expected;
  DelaydProcess delayd(w);
  CaseLine line("burst_one_ms", expected, ready, [&] { return up_word(delayd); });
  REQUIRE(start_delayd(delayd));

  constexpr int kJobs = 20000;
  // Time to publish and ingest them all before they fall due, on a busy 2-core machine.
  const std::int64_t due = now_ms() + 10000;
  Sender pub(w);
  for (int i = 0; i < kJobs; ++i) {
    const std::string id = "burst-" + std::to_string(i);
    expected[id] = due;
    pub.send(delayd::e2e::job_at(id, due, "v" + std::to_string(i)), 0);
    if (i % 1000 == 0) pub.poll();
  }
  pub.flush();
  line.note("published until due minus ms", std::to_string(due - now_ms()));

  settle(ready, expected, delayd, std::chrono::milliseconds(due - now_ms()) + 45s);
  std::int64_t last_first = 0;  // when the last job's first record was written
  {
    std::set<std::string> seen;
    for (const auto& d : ready.deliveries()) {
      const auto id = delayd::e2e::header(d.record, "job-id").value_or("");
      if (seen.insert(id).second) last_first = std::max(last_first, d.record.timestamp_ms);
    }
  }
  line.note("last one out after due ms", last_first > 0 ? std::to_string(last_first - due) : "n/a");
  const std::string up = up_word(delayd);
  const Tally t = line.print();
  check_outcome(t, w, true, up);
  if (delayd.running()) delayd.stop();
}

TEST_CASE("new_business_while_due", "[chaos]") {
  World w("chaos-new-business");
  w.settings["DELAYD_KAFKA_CREATE_TOPICS"] = "true";
  const std::uint16_t admin = delayd::e2e::free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(admin);
  w.create_topics({"orders"});  // the existing business; the 5 new ones get their topics from delayd
  std::vector<std::string> topics{w.ready_topic("orders")};
  std::vector<std::string> fresh;
  for (int b = 0; b < 5; ++b) {
    fresh.push_back("fresh" + std::to_string(b));
    topics.push_back(w.ready_topic(fresh.back()));
  }
  ReadyWatcher ready(w, topics);
  Expected expected;
  Expected existing;  // the "orders" jobs alone, for their lateness
  DelaydProcess delayd(w);
  CaseLine line("new_business_while_due", expected, ready, [&] { return up_word(delayd); });
  REQUIRE(start_delayd(delayd));

  Sender pub(w);
  const std::int64_t t0 = now_ms();
  publish_spread(pub, existing, "orders-", 1000, t0 + 500, 5000);
  expected.insert(existing.begin(), existing.end());
  pub.flush();
  // One new business per second while the orders jobs fall due; each new job due within 0.5 s.
  for (int b = 0; b < 5; ++b) {
    const std::int64_t at = t0 + 1000 + 1000 * b;
    ready.poll_until([&] { return now_ms() >= at; }, 10s);
    for (int i = 0; i < 20; ++i) {
      const std::string id = fresh[static_cast<std::size_t>(b)] + "-" + std::to_string(i);
      expected[id] = now_ms() + 25 * i;
      pub.send(
          delayd::e2e::job_at(id, expected[id], "value of " + id, std::nullopt, fresh[static_cast<std::size_t>(b)]));
    }
    pub.poll();
  }
  pub.flush();

  settle(ready, expected, delayd, 30s);
  const Tally orders = tally(existing, ready);
  line.note("orders max late ms", std::to_string(orders.max_late_ms));
  const std::string turn = max_turn_ms(admin);
  line.note("max_turn_ms", turn);
  // The loop never waited for topic creation: its longest turn (idle waits excluded) stays far
  // below what creating a topic costs (an admin round trip plus a metadata wait per topic, each
  // of which the loop used to wait for, up to 30 s when Kafka is slow).
  REQUIRE(turn != "n/a");
  CHECK(std::stoll(turn) < 500);
  const std::string up = up_word(delayd);
  const Tally t = line.print();
  check_outcome(t, w, true, up);
  if (delayd.running()) delayd.stop();
}
