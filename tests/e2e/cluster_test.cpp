// Redis Cluster under delayd while jobs flow (scripts/test.sh --cluster; REDIS_URL must be a
// redis-cluster:// url of the stack started with DELAYD_REDIS_CLUSTER=3): slots move with
// redis-cli --cluster reshard, then a replica takes over its primary with CLUSTER FAILOVER FORCE
// (no handshake: writes the old primary had not replicated yet are gone). With
// redis.wait_replicas = 1 no job is lost, and none is delivered early. Redis answers throughout
// (a WAIT that the new primary's replicas cannot yet acknowledge is a lag, not a cut), so delayd
// never leaves its consumer groups: it once left and joined again thousands of times a second
// here, and read nothing meanwhile.
#include "redis/cluster.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "harness.hpp"
#include "storage/key_schema.hpp"
#include "support/redis_connect.hpp"
#include "support/requires.hpp"

using namespace delayd::e2e;
using delayd::redis::RedisCluster;
using delayd::redis::RedisNodeAddress;

namespace {

std::string node_id(RedisCluster& redis, const RedisNodeAddress& node) {
  return std::string(redis.command_on(node, {"CLUSTER", "MYID"}).view().str());
}

// host:port of the first replica of a primary, from CLUSTER REPLICAS.
std::optional<RedisNodeAddress> replica_of(RedisCluster& redis, const RedisNodeAddress& primary) {
  const auto r = redis.command_on(primary, {"CLUSTER", "REPLICAS", node_id(redis, primary)});
  if (!r.view().is_array() || r.view().size() == 0) return std::nullopt;
  std::istringstream line{std::string(r.view()[0].str())};
  std::string id, addr;
  line >> id >> addr;  // "<id> <ip>:<port>@<bus> ..."
  addr = addr.substr(0, addr.find('@'));
  const auto colon = addr.rfind(':');
  return RedisNodeAddress{addr.substr(0, colon), std::stoi(addr.substr(colon + 1))};
}

}  // namespace

TEST_CASE("cluster: slots move and a primary fails over while jobs flow: none lost, none early", "[e2e][cluster]") {
  const char* url = std::getenv("REDIS_URL");
  delayd::testing::require_setup(url != nullptr && std::string_view(url).starts_with("redis-cluster"),
                                 "REDIS_URL is not a redis-cluster:// url: run scripts/test.sh --cluster");
  World w("cluster");
  auto client = delayd::testing::connect_redis(w.redis_url);
  auto* redis = dynamic_cast<RedisCluster*>(client.get());
  if (redis == nullptr) FAIL("REDIS_URL is not a redis-cluster:// url: run scripts/test.sh --cluster");
  w.settings["DELAYD_REDIS_WAIT_REPLICAS"] = "1";
  w.settings["DELAYD_REDIS_WAIT_TIMEOUT_MS"] = "500";
  w.create_topics({"orders"});

  DelaydProcess delayd(w);
  delayd.set_die_with_test(true);
  delayd.start();

  // The move: the first 1000 slots of the primary that holds slot 0 go to another primary.
  const RedisNodeAddress from = *redis->slot_owner(0);
  RedisNodeAddress to;
  for (const auto& n : redis->primaries()) {
    if (!(n == from)) to = n;
  }
  // Over TLS (a stack started with DELAYD_REDIS_TLS=1) redis-cli takes its arguments from REDIS_CLI_TLS.
  const char* cli_tls = std::getenv("REDIS_CLI_TLS");
  const std::string reshard = "redis-cli " + std::string(cli_tls == nullptr ? "" : cli_tls) + " --cluster reshard " +
                              from.to_string() + " --cluster-from " + node_id(*redis, from) + " --cluster-to " +
                              node_id(*redis, to) +
                              " --cluster-slots 1000 --cluster-yes --cluster-pipeline 10 >/dev/null 2>&1";

  std::map<std::string, std::int64_t> expected;
  Publisher pub(w);
  int n = 0;
  auto publish_for = [&](std::chrono::milliseconds how_long) {
    const auto end = std::chrono::steady_clock::now() + how_long;
    while (std::chrono::steady_clock::now() < end) {
      for (int i = 0; i < 50; ++i, ++n) {
        const std::string id = "c" + std::to_string(n);
        const std::int64_t at = now_ms() + 200 + (n * 37) % 3000;
        expected[id] = at;
        pub.send(job_at(id, at, id, id));
      }
      pub.flush();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };

  publish_for(std::chrono::seconds(1));
  int reshard_status = -1;
  std::thread mover([&] { reshard_status = std::system(reshard.c_str()); });
  publish_for(std::chrono::seconds(1));
  mover.join();
  publish_for(std::chrono::milliseconds(500));

  // The failover: the replica of the primary that holds partition 0's shard takes over at once.
  redis->refresh_slots();
  const RedisNodeAddress victim =
      *redis->slot_owner(delayd::redis::redis_key_slot(delayd::storage::shard_id(w.ingest_topic, 0)));
  const auto replica = replica_of(*redis, victim);
  REQUIRE(replica);
  REQUIRE(redis->command_on(*replica, {"CLUSTER", "FAILOVER", "FORCE"}).view().str() == "OK");
  publish_for(std::chrono::seconds(3));

  Collector ready(w, {w.ready_topic("orders")});
  auto all_seen = [&](const std::vector<delayd::connectors::Record>& recs) {
    std::set<std::string> ids;
    for (const auto& r : recs) ids.insert(header(r, "job-id").value_or(""));
    return ids.size() >= expected.size();
  };
  const bool complete = ready.collect_until(all_seen, std::chrono::seconds(90));
  std::set<std::string> seen;
  int early = 0, duplicates = 0;
  for (const auto& r : ready.records()) {
    const auto id = header(r, "job-id").value_or("");
    if (!seen.insert(id).second) ++duplicates;
    if (expected.count(id) && r.timestamp_ms < expected[id]) ++early;
  }
  std::size_t lost = 0;
  for (const auto& [id, at] : expected) lost += seen.count(id) == 0 ? 1 : 0;
  redis->refresh_slots();
  std::cout << "cluster test: " << expected.size() << " jobs, reshard exit " << reshard_status << ", failover "
            << victim.to_string() << " -> " << replica->to_string() << ", lost " << lost << ", early " << early
            << ", duplicates " << duplicates << ", groups left " << groups_left(w) << "\n";
  CHECK(reshard_status == 0);
  CHECK(complete);
  CHECK(lost == 0);
  CHECK(early == 0);
  CHECK(groups_left(w) == 0);
  CHECK(delayd.running());
  CHECK(delayd.stop() == 0);
}
