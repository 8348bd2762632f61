// The Redis settings check's verdicts (broker/redis_settings_check.hpp): what refuses, what warns,
// what is only said, for one server and for a Cluster's primaries; what a running instance says
// when they change (RedisSettingsWatch). Delayd refusing such a Redis,
// and starting against a volatile-* one: tests/e2e/outage_test.cpp.
#include "broker/redis_settings_check.hpp"

#include <catch2/catch.hpp>

#include "support/captured_log.hpp"

using namespace delayd::broker;
using delayd::testing::CapturedLog;

namespace {

ServerInfo info(const std::string& maxmemory, const std::string& policy, const std::string& aof = "1") {
  return {"# Memory\r\nused_memory:1000\r\nmaxmemory:" + maxmemory + "\r\nmaxmemory_policy:" + policy +
              "\r\n\r\n# Persistence\r\nloading:0\r\naof_enabled:" + aof + "\r\n",
          ""};
}

RedisSettingsFindings judge_eviction(const std::vector<ServerInfo>& servers, const std::string& redis) {
  return judge_redis_settings(servers, redis, false);
}

}  // namespace

TEST_CASE("redis settings check: a limit with allkeys refuses, naming the server, the limit and what to set",
          "[redis-settings]") {
  const auto f = judge_eviction({info("1073741824", "allkeys-lfu")}, "redis://r:6379");
  CHECK(f.refusal ==
        "redis redis://r:6379 may drop any key once it holds its maxmemory (1024 MiB): maxmemory-policy allkeys-lfu "
        "would take jobs waiting in it, undelivered and without a trace. Set maxmemory-policy noeviction on it (a "
        "full Redis then refuses writes, an outage delayd rides out with nothing lost), or give delayd a Redis of "
        "its own");
  CHECK(f.warnings.empty());
  CHECK(f.unread.empty());
}

TEST_CASE("redis settings check: noeviction, and volatile without a limit, say nothing", "[redis-settings]") {
  for (const auto& server : {info("0", "noeviction"), info("1024", "noeviction"), info("0", "volatile-lru")}) {
    const auto f = judge_eviction({server}, "redis://r:6379");
    CHECK(f.refusal.empty());
    CHECK(f.warnings.empty());
    CHECK(f.unread.empty());
  }
}

TEST_CASE("redis settings check: volatile with a limit, allkeys without one and an unknown policy warn",
          "[redis-settings]") {
  const auto f = judge_eviction({info("2048", "volatile-ttl")}, "redis://r:6379");
  CHECK(f.refusal.empty());
  REQUIRE(f.warnings.size() == 1);
  CHECK_THAT(f.warnings[0], Catch::StartsWith("redis redis://r:6379 drops keys with a time to live once it holds its "
                                              "maxmemory (1 MiB, maxmemory-policy volatile-ttl)"));
  const auto unlimited = judge_eviction({info("0", "allkeys-random")}, "redis://r:6379");
  CHECK(unlimited.refusal.empty());
  REQUIRE(unlimited.warnings.size() == 1);
  CHECK_THAT(unlimited.warnings[0], Catch::Contains("no maxmemory: should a limit be set, it would drop jobs waiting"));
  const auto unknown = judge_eviction({info("2048", "allkeys-someday")}, "redis://r:6379");
  CHECK_FALSE(unknown.refusal.empty());  // allkeys-anything: any key
  const auto odd = judge_eviction({info("2048", "random-eviction")}, "redis://r:6379");
  CHECK(odd.refusal.empty());
  REQUIRE(odd.warnings.size() == 1);
  CHECK_THAT(odd.warnings[0], Catch::Contains("a policy this delayd does not know"));
}

TEST_CASE("redis settings check: a Cluster refuses if any primary would drop, each sentence said once",
          "[redis-settings]") {
  const auto f = judge_eviction({info("0", "noeviction"), info("4096", "volatile-lru"), info("4096", "volatile-lru"),
                                 info("1048576", "allkeys-lru")},
                                "redis-cluster://r:7000");
  CHECK_THAT(f.refusal, Catch::StartsWith("a primary of redis redis-cluster://r:7000 may drop any key"));
  CHECK(f.warnings.size() == 1);
}

TEST_CASE("redis settings check: a server whose INFO is denied or names no policy is said, not refused",
          "[redis-settings]") {
  const auto f = judge_eviction(
      {{"", "NOPERM this user has no permissions to run the 'info' command"}, {"# Memory\r\nused_memory:1\r\n", ""}},
      "redis://r:6379");
  CHECK(f.refusal.empty());
  CHECK(f.warnings.empty());
  REQUIRE(f.unread.size() == 2);
  CHECK_THAT(f.unread[0], Catch::Contains("could not be read (INFO: NOPERM this user has no permissions"));
  CHECK_THAT(f.unread[1], Catch::Contains("INFO names no maxmemory_policy"));
}

TEST_CASE("redis settings check: no append-only file warns, unless replicas acknowledge each batch",
          "[redis-settings]") {
  const auto f = judge_redis_settings({info("0", "noeviction", "0")}, "redis://r:6379", false);
  CHECK(f.refusal.empty());
  REQUIRE(f.warnings.size() == 1);
  CHECK(f.warnings[0] ==
        "redis redis://r:6379 keeps no append-only file (appendonly no): a restart forgets what it was told since "
        "its last snapshot, so a job accepted since is lost and one delivered since is delivered again. Set "
        "appendonly yes (appendfsync everysec: at most its last second), or redis.wait_replicas for replicas that "
        "take over");
  CHECK(judge_redis_settings({info("0", "noeviction", "0")}, "redis://r:6379", true).warnings.empty());
  CHECK(judge_redis_settings({info("0", "noeviction", "1")}, "redis://r:6379", false).warnings.empty());
  // Both said, for a server that would also drop settled records.
  CHECK(judge_redis_settings({info("4096", "volatile-lru", "0")}, "redis://r:6379", false).warnings.size() == 2);
}

TEST_CASE("redis settings watch: a policy that turns unsafe while running is a problem said once, and its end",
          "[redis-settings]") {
  CapturedLog log("%l: %v");
  const auto safe = judge_eviction({info("4096", "noeviction")}, "redis://r:6379");
  RedisSettingsWatch watch(safe);
  CHECK(watch.problem().empty());
  watch.note(safe);
  CHECK(log.take().empty());

  const auto unsafe = judge_eviction({info("1048576", "allkeys-lru")}, "redis://r:6379");
  watch.note(unsafe);
  CHECK(watch.problem() == unsafe.refusal);
  CHECK(log.take() == "critical: " + unsafe.refusal +
                          " (its settings changed while delayd runs; /healthz is degraded until they are safe)\n");
  watch.note(unsafe);  // still so: nothing more said
  CHECK(watch.problem() == unsafe.refusal);
  CHECK(log.take().empty());

  watch.note(safe);
  CHECK(watch.problem().empty());
  CHECK(log.take() == "info: redis: no server may drop waiting jobs any more (maxmemory-policy changed)\n");
}

TEST_CASE("redis settings watch: start-up's warnings are not said again, a new one once", "[redis-settings]") {
  CapturedLog log("%l: %v");
  const auto no_aof = judge_redis_settings({info("0", "noeviction", "0")}, "redis://r:6379", false);
  REQUIRE(no_aof.warnings.size() == 1);
  RedisSettingsWatch watch(no_aof);
  watch.note(no_aof);
  CHECK(log.take().empty());
  const auto both = judge_redis_settings({info("4096", "volatile-lru", "0")}, "redis://r:6379", false);
  watch.note(both);
  watch.note(both);
  CHECK(log.take() == "warning: " + both.warnings[1] + "\n");
  CHECK(watch.problem().empty());
}

TEST_CASE("redis settings watch: a refusal at start is the problem from the start", "[redis-settings]") {
  const auto unsafe = judge_eviction({info("1048576", "allkeys-lfu")}, "redis://r:6379");
  CHECK(RedisSettingsWatch(unsafe).problem() == unsafe.refusal);
}
