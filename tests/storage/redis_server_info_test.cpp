// What delayd reads of a Redis server's settings (storage/redis_server_info.hpp): INFO read, each
// eviction policy classed, the append-only file. The start-up check it feeds: tests/e2e/outage_test.cpp.
#include "storage/redis_server_info.hpp"

#include <catch2/catch.hpp>

#include "support/redis_connect.hpp"
#include "support/test_env.hpp"

using namespace delayd::storage;

TEST_CASE("every maxmemory-policy is classed by what it may drop", "[unit][eviction]") {
  CHECK(eviction_of("noeviction") == Eviction::none);
  for (const char* p : {"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"}) {
    CHECK(eviction_of(p) == Eviction::settled_only);
  }
  for (const char* p : {"allkeys-lru", "allkeys-lfu", "allkeys-random"}) CHECK(eviction_of(p) == Eviction::any_key);
  CHECK(eviction_of("") == Eviction::unknown);
  CHECK(eviction_of("sometimes") == Eviction::unknown);
}

TEST_CASE("INFO memory gives the limit and the policy, and only a limit set with allkeys drops waiting jobs",
          "[unit][eviction]") {
  const auto p = parse_eviction_policy(
      "# Memory\r\nused_memory:1048576\r\nmaxmemory:67108864\r\nmaxmemory_human:64.00M\r\n"
      "maxmemory_policy:allkeys-lru\r\n");
  REQUIRE(p);
  CHECK(p->policy == "allkeys-lru");
  CHECK(p->maxmemory == 67108864);
  CHECK(p->drops_waiting_jobs());
  const auto unlimited = parse_eviction_policy("maxmemory:0\nmaxmemory_policy:allkeys-lfu\n");
  REQUIRE(unlimited);
  CHECK_FALSE(unlimited->drops_waiting_jobs());  // no limit: the policy never applies
  const auto settled = parse_eviction_policy("maxmemory:1024\r\nmaxmemory_policy:volatile-ttl");
  REQUIRE(settled);
  CHECK(settled->eviction() == Eviction::settled_only);
  CHECK_FALSE(settled->drops_waiting_jobs());
  CHECK_FALSE(parse_eviction_policy("# Memory\r\nused_memory:1\r\nmaxmemory:5\r\n"));  // no policy named
  const auto garbled = parse_eviction_policy("maxmemory:12x\r\nmaxmemory_policy:allkeys-random\r\n");
  REQUIRE(garbled);
  CHECK(garbled->maxmemory == 0);
}

TEST_CASE("INFO's aof_enabled says whether the server keeps an append-only file", "[unit][eviction]") {
  CHECK(parse_aof_enabled("# Persistence\r\nloading:0\r\naof_enabled:1\r\n") == true);
  CHECK(parse_aof_enabled("aof_enabled:0\n") == false);
  CHECK_FALSE(parse_aof_enabled("# Persistence\r\nloading:0\r\n"));
  CHECK_FALSE(parse_aof_enabled("aof_enabled:yes\r\n"));
}

TEST_CASE("the stack's Redis names its policy and its append-only file in INFO", "[eviction]") {
  const auto redis = delayd::testing::connect_redis(delayd::testing::require_env("REDIS_URL"));
  for (const auto& reply : redis->command_on_every_server({"INFO"})) {
    REQUIRE(reply.view().is_string());
    const auto p = parse_eviction_policy(reply.view().str());
    REQUIRE(p);
    CHECK(p->eviction() != Eviction::unknown);
    CHECK(parse_aof_enabled(reply.view().str()) == true);  // scripts/stack.sh: appendonly yes
  }
}
