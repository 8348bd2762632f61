// An outage of Redis while jobs are due and more are arriving: delayd logs it, backs off,
// and when Redis answers again every job is delivered, none early, none lost. The outage is
// real: CLIENT PAUSE makes the stack's Redis stop answering every client for a while.
#include "harness.hpp"
#include "storage/redis_cluster.hpp"
#include "support/redis_connect.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>

using namespace delayd::e2e;

TEST_CASE("a Redis outage delays jobs but loses none", "[e2e][outage]") {
  World w("redis-outage");
  w.settings["DELAYD_REDIS_TIMEOUT_MS"] = "300";
  const std::uint16_t admin = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(admin);
  w.create_topics({"orders"});
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);
  Collector ready(w, {w.ready_topic("orders")});

  std::map<std::string, std::int64_t> expected;
  auto publish = [&](const std::string& prefix, int n, std::int64_t from, std::int64_t spread) {
    for (int i = 0; i < n; ++i) {
      const std::int64_t at = from + (spread * i) / n;
      expected[prefix + std::to_string(i)] = at;
      pub.send(job_at(prefix + std::to_string(i), at, "v"));
    }
    pub.flush();
  };
  publish("early-", 200, now_ms() + 200, 4000);
  REQUIRE(ready.collect_until([](const auto& recs) { return recs.size() >= 20; }, std::chrono::seconds(30)));

  CHECK_THAT(http_get(admin, "/healthz"), Catch::StartsWith("HTTP/1.0 200") && Catch::EndsWith("ok\n"));
  {
    // Every primary of a cluster (REDIS_URL=redis-cluster://...), or the one server.
    auto redis = delayd::testing::connect_redis(w.redis_url);
    const delayd::storage::Command pause{"CLIENT", "PAUSE", "3000", "ALL"};
    if (auto* cluster = dynamic_cast<delayd::storage::RedisCluster*>(redis.get())) {
      for (const auto& node : cluster->primaries()) REQUIRE(cluster->command_on(node, pause).view().str() == "OK");
    } else {
      REQUIRE(redis->command(pause).view().str() == "OK");
    }
  }
  // The admin endpoint tells the outage while it lasts (the loop keeps turning, so 200).
  bool degraded = false;
  const auto pause_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  while (!degraded && std::chrono::steady_clock::now() < pause_end) {
    degraded = http_get(admin, "/healthz").find("degraded: redis unavailable") != std::string::npos;
    if (!degraded) ready.collect_until([](const auto&) { return false; }, std::chrono::milliseconds(50));
  }
  CHECK(degraded);
  // Arrives during the outage: ingest cannot write it to Redis, so it is not committed yet.
  publish("during-", 100, now_ms(), 1000);

  auto all_seen = [&](const std::vector<delayd::connectors::Record>& recs) {
    std::set<std::string> ids;
    for (const auto& r : recs) ids.insert(header(r, "job-id").value_or(""));
    return std::all_of(expected.begin(), expected.end(), [&](const auto& kv) { return ids.count(kv.first) == 1; });
  };
  CHECK(ready.collect_until(all_seen, std::chrono::seconds(60)));
  int early = 0;
  for (const auto& r : ready.records()) {
    const auto id = header(r, "job-id").value_or("");
    REQUIRE(expected.count(id) == 1);
    if (r.timestamp_ms < expected[id]) ++early;
  }
  CHECK(early == 0);

  // A clean stop settles every acknowledged record in Redis, so the states are final after it.
  CHECK(delayd.stop() == 0);
  JobReader redis(w);
  std::vector<std::string> ids;
  for (const auto& [id, at] : expected) ids.push_back(id);
  const auto states = redis.states(ids);
  CHECK(std::count(states.begin(), states.end(), "ready") == static_cast<long>(ids.size()));

  std::ifstream log(w.log_path);
  std::stringstream text;
  text << log.rdbuf();
  CHECK_THAT(text.str(), Catch::Contains("redis unavailable"));
}
