// kill -9 of delayd while jobs are pending and in flight, more jobs published while it is down,
// then a restart: every job is delivered at least once, none early, and Redis ends with every
// job ready. Duplicates are allowed (at-least-once) and counted; each carries its job-id.
#include <catch2/catch.hpp>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "harness.hpp"

using namespace delayd::e2e;

TEST_CASE("a crash loses no job and delivers none early", "[e2e][crash]") {
  World w("crash");
  w.create_topics({"orders", "mail"});
  Collector ready(w, {w.ready_topic("orders"), w.ready_topic("mail")});
  std::map<std::string, std::int64_t> expected;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int64_t> delay(0, 8000);
  Publisher pub(w);
  auto publish = [&](const std::string& prefix, int n, std::int64_t base) {
    for (int i = 0; i < n; ++i) {
      Job j;
      j.job_id = prefix + std::to_string(i);
      j.business = i % 2 ? "orders" : "mail";
      const std::int64_t at = base + delay(rng);
      j.deliver_at = std::to_string(at);
      j.value = j.job_id;
      expected[j.job_id] = at;
      pub.send(j);
    }
    pub.flush();
  };

  {
    DelaydProcess first(w);
    first.start();
    publish("before-", 1500, now_ms());
    // Crash once a good part has gone out: the rest is pending in the wheel, in Redis, or in
    // flight between the producer and Redis.
    REQUIRE(ready.collect_until([](const auto& recs) { return recs.size() >= 400; }, std::chrono::seconds(60)));
    first.kill9();
  }
  // Published while no delayd runs: waits in Kafka, uncommitted.
  publish("during-", 300, now_ms());

  DelaydProcess second(w);
  second.start();
  auto all_seen = [&](const std::vector<delayd::connectors::Record>& recs) {
    std::set<std::string> ids;
    for (const auto& r : recs) ids.insert(header(r, "job-id").value_or(""));
    return std::all_of(expected.begin(), expected.end(), [&](const auto& kv) { return ids.count(kv.first) == 1; });
  };
  const bool complete = ready.collect_until(all_seen, std::chrono::seconds(120));

  std::map<std::string, int> seen;
  int early = 0;
  for (const auto& r : ready.records()) {
    const auto id = header(r, "job-id");
    REQUIRE(id.has_value());
    REQUIRE(expected.count(*id) == 1);
    ++seen[*id];
    if (r.timestamp_ms < expected[*id]) ++early;
  }
  int duplicates = 0;
  for (const auto& [id, n] : seen) duplicates += n - 1;
  std::cout << "crash test: " << expected.size() << " jobs, " << seen.size() << " delivered, " << duplicates
            << " duplicates\n";
  CHECK(complete);
  CHECK(seen.size() == expected.size());
  CHECK(early == 0);

  CHECK(second.stop() == 0);  // settles the last acknowledgements in Redis
  JobReader redis(w);
  std::vector<std::string> ids;
  for (const auto& [id, at] : expected) ids.push_back(id);
  const auto states = redis.states(ids);
  for (size_t i = 0; i < ids.size(); ++i) {
    INFO(ids[i]);
    CHECK(states[i] == "ready");
  }
}
