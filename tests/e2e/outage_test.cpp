// An outage of Redis while jobs are due and more are arriving: delayd logs it, backs off,
// and when Redis answers again every job is delivered, none early, none lost. The outage is
// real: CLIENT PAUSE makes the stack's Redis stop answering every client for a while. Then a
// missing ready topic, and a Redis that would evict waiting jobs once full.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "harness.hpp"
#include "redis/cluster.hpp"
#include "redis/connection.hpp"
#include "support/redis_connect.hpp"
#include "support/requires.hpp"

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
    const delayd::redis::Command pause{"CLIENT", "PAUSE", "3000", "ALL"};
    if (auto* cluster = dynamic_cast<delayd::redis::RedisCluster*>(redis.get())) {
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

  CHECK_THAT(log_text(w), Catch::Contains("redis unavailable"));
}

namespace {

std::size_t count_lines(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos ? 1 : 0;
  return n;
}

std::size_t count_id_prefix(const std::vector<delayd::connectors::Record>& recs, const std::string& prefix) {
  std::size_t n = 0;
  for (const auto& r : recs) n += header(r, "job-id").value_or("").rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

// Publishes `n` jobs "<prefix>-<i>" due at `at` and waits until Kafka has them.
void publish_due(Publisher& pub, const std::string& prefix, int n, std::int64_t at) {
  for (int i = 0; i < n; ++i) {
    const std::string id = prefix + "-" + std::to_string(i);
    pub.send(job_at(id, at, "v", id));
  }
  pub.flush();
}

}  // namespace

// A ready topic deleted under delayd while its jobs fall due. With kafka.create_topics on, the
// topic is created again and every job goes out; the log says so once, not once per job.
TEST_CASE("a ready topic deleted under delayd is created again and its jobs go out", "[e2e][outage][topics]") {
  World w("topic-gone");
  w.settings["DELAYD_KAFKA_CREATE_TOPICS"] = "true";
  w.create_topics({"orders"});
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);
  Collector ready(w, {w.ready_topic("orders")});
  REQUIRE(ready.wait_assigned());
  // One delivery first, so that the producer knows the topic before it goes.
  publish_due(pub, "warm", 1, now_ms());
  REQUIRE(ready.collect_until([](const auto& recs) { return count_id_prefix(recs, "warm") == 1; },
                              std::chrono::seconds(30)));

  delayd::connectors::KafkaAdmin admin(delayd::testing::kafka_client_properties(w.bootstrap));
  admin.delete_topics({w.ready_topic("orders")});
  constexpr int kJobs = 300;
  publish_due(pub, "gone", kJobs, now_ms() + 1000);

  // The collector's consumer saw the old topic deleted: a fresh one reads the new topic.
  Collector after(w, {w.ready_topic("orders")});
  const bool all = after.collect_until(
      [&](const auto& recs) { return count_id_prefix(recs, "gone") >= static_cast<std::size_t>(kJobs); },
      std::chrono::seconds(120));
  CHECK(delayd.stop() == 0);
  const std::string log = log_text(w);
  INFO(log.substr(log.size() > 4000 ? log.size() - 4000 : 0));
  REQUIRE(all);
  JobReader redis(w);
  std::vector<std::string> ids;
  for (int i = 0; i < kJobs; ++i) ids.push_back("gone-" + std::to_string(i));
  const auto states = redis.states(ids);
  CHECK(std::count(states.begin(), states.end(), "ready") == kJobs);
  // No attempt was spent on the missing topic: every job went out on its first attempt.
  const auto attempts = redis.fields(ids, "attempt");
  CHECK(std::count(attempts.begin(), attempts.end(), "1") == kJobs);
  // Said once for the topic, not once per job.
  CHECK(count_lines(log, "does not exist: its jobs wait") == 1);
  CHECK(count_lines(log, "failed (") <= 3);
  std::printf(
      "missing topic (create_topics on): %d of %d jobs delivered after the topic was deleted; "
      "%zu log lines about the missing topic, %zu about failed attempts\n",
      static_cast<int>(std::count(states.begin(), states.end(), "ready")), kJobs, count_lines(log, "does not exist"),
      count_lines(log, "failed ("));
}

// With kafka.create_topics off, the jobs of a missing topic wait without spending attempts,
// /healthz says which topic is missing, and only after kafka.missing_topic_timeout_ms are they
// dead-lettered, with a reason a person can read.
TEST_CASE("with topic creation off, a missing ready topic's jobs wait, then are dead-lettered after the timeout",
          "[e2e][outage][topics]") {
  World w("topic-missing");
  w.settings["DELAYD_KAFKA_MISSING_TOPIC_TIMEOUT_MS"] = "4000";
  w.settings["DELAYD_KAFKA_PRODUCER_PROPERTIES"] = kQuickTopicMetadata;
  const std::uint16_t port = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(port);
  w.create_topics({"orders"});
  delayd::connectors::KafkaAdmin admin(delayd::testing::kafka_client_properties(w.bootstrap));
  admin.delete_topics({w.ready_topic("orders")});
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);
  Collector dlq(w, {w.dlq_topic});
  constexpr int kJobs = 50;
  const std::int64_t due = now_ms() + 500;
  publish_due(pub, "lost", kJobs, due);

  // While it waits: /healthz degraded, naming the topic.
  std::string health;
  dlq.collect_until(
      [&](const auto&) {
        health = http_get(port, "/healthz");
        return health.find(w.ready_topic("orders")) != std::string::npos;
      },
      std::chrono::seconds(60));  // "unknown topic" after topic.metadata.propagation.max.ms (kQuickTopicMetadata)
  CHECK_THAT(health, Catch::Contains("degraded") && Catch::Contains(w.ready_topic("orders")));

  REQUIRE(dlq.collect_until([&](const auto& recs) { return recs.size() >= static_cast<std::size_t>(kJobs); },
                            std::chrono::seconds(90)));
  CHECK(delayd.stop() == 0);
  std::int64_t first_dead = 0;
  for (const auto& r : dlq.records()) {
    CHECK_THAT(header(r, "error").value_or(""), Catch::Contains("has not existed for"));
    // Not before the timeout: the topic was missing at least that long.
    CHECK(r.timestamp_ms >= due + 4000);
    first_dead = first_dead == 0 ? r.timestamp_ms : std::min(first_dead, r.timestamp_ms);
  }
  JobReader redis(w);
  std::vector<std::string> ids;
  for (int i = 0; i < kJobs; ++i) ids.push_back("lost-" + std::to_string(i));
  const auto states = redis.states(ids);
  CHECK(std::count(states.begin(), states.end(), "failed") == kJobs);
  const std::string log = log_text(w);
  CHECK(count_lines(log, "does not exist: its jobs wait") == 1);
  CHECK(count_lines(log, "failed (") <= 3);
  std::printf(
      "missing topic (create_topics off): %d of %d jobs dead-lettered, the first %lld ms after due; "
      "%zu log lines about the missing topic\n",
      static_cast<int>(std::count(states.begin(), states.end(), "failed")), kJobs,
      static_cast<long long>(first_dead - due), count_lines(log, "does not exist"));
}

namespace {

// A redis-server of the test's own on a free loopback port, with no persistence, started with
// `args` and shut down by the destructor.
struct OwnRedis {
  std::uint16_t port = free_port();
  explicit OwnRedis(const std::string& args) {
    delayd::testing::require_tool("redis-server", "Debian package redis-server");
    const std::string cmd = "redis-server --port " + std::to_string(port) +
                            " --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --logfile /dev/null"
                            " --pidfile /tmp/delayd-own-redis-" +
                            std::to_string(port) + ".pid " + args;
    REQUIRE(std::system(cmd.c_str()) == 0);
    for (int i = 0; i < 100; ++i) {
      try {
        if (client().command({"PING"}).view().is_string()) return;
      } catch (const delayd::redis::RedisIoError&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL("redis-server on port " << port << " did not answer");
  }
  ~OwnRedis() {
    try {
      client().command({"SHUTDOWN", "NOSAVE"});
    } catch (const std::exception&) {
      // it went: the connection closes under SHUTDOWN
    }
  }
  OwnRedis(const OwnRedis&) = delete;
  OwnRedis& operator=(const OwnRedis&) = delete;
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port); }
  delayd::redis::RedisConnection client() const {
    return delayd::redis::RedisConnection(delayd::testing::redis_options(url()));
  }
};

}  // namespace

// A Redis that may drop any key once full (a limit with allkeys-lru) would lose waiting jobs
// without a trace: delayd refuses to start against it, saying what to set, exit status 2. With
// volatile-lru (only keys with a time to live, which no waiting job has) it starts, warns once
// (and once that the server keeps no append-only file), and delivers. Turned unsafe while it
// runs, /healthz and the gauge say so until the policy is safe again.
TEST_CASE(
    "delayd refuses a Redis that may evict waiting jobs, and warns of one that evicts settled records or keeps no AOF",
    "[e2e][outage][eviction]") {
  OwnRedis server("--maxmemory 64mb --maxmemory-policy allkeys-lru");
  World w("redis-eviction");
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(free_port());
  w.settings["DELAYD_REDIS_SETTINGS_CHECK_INTERVAL_MS"] = "1000";
  w.create_topics({"orders"});
  DelaydProcess delayd(w);
  delayd.set_env("DELAYD_REDIS_URL", server.url());
  // A plain server of its own, also where the stack's Redis is TLS (its files in the world's env).
  for (const char* tls : {"DELAYD_REDIS_TLS_CA_FILE", "DELAYD_REDIS_TLS_CERT_FILE", "DELAYD_REDIS_TLS_KEY_FILE"}) {
    delayd.set_env(tls, "");
  }
  delayd.set_die_with_test(true);
  CHECK(delayd.run_to_exit(std::chrono::seconds(30)) == 2);
  const std::string refused = delayd.log_since_start();
  INFO("delayd's log:\n" << refused);
  CHECK_THAT(refused, Catch::Contains("redis redis://127.0.0.1:" + std::to_string(server.port) +
                                      " may drop any key once it holds its maxmemory (64 MiB): maxmemory-policy "
                                      "allkeys-lru would take jobs waiting in it") &&
                          Catch::Contains("Set maxmemory-policy noeviction"));
  CHECK_THAT(refused, !Catch::Contains("delayd running"));

  REQUIRE(server.client().command({"CONFIG", "SET", "maxmemory-policy", "volatile-lru"}).view().str() == "OK");
  delayd.start();
  Publisher pub(w);
  Collector ready(w, {w.ready_topic("orders")});
  pub.send(job_at("after-eviction-check", now_ms() + 500, "v"));
  pub.flush();
  CHECK(ready.collect_until([](const auto& recs) { return !recs.empty(); }, std::chrono::seconds(30)));
  CHECK(count_in_log(delayd.log_path(),
                     "drops keys with a time to live once it holds its maxmemory (64 MiB, "
                     "maxmemory-policy volatile-lru)") == 1);
  // The test's server keeps no append-only file: said once a start (the refused one too).
  CHECK(count_in_log(delayd.log_path(), "keeps no append-only file (appendonly no)") == 2);

  // While it runs, the policy turns unsafe (CONFIG SET): read again every second here, /healthz
  // says it and the gauge is 1, the log once; the policy put back, both clear.
  const auto admin = w.settings["DELAYD_ADMIN_LISTEN"];
  const std::uint16_t port = static_cast<std::uint16_t>(std::stoi(admin.substr(admin.rfind(':') + 1)));
  REQUIRE(server.client().command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"}).view().str() == "OK");
  const auto waits = [&](const std::string& path, const std::string& text) {
    std::string said;
    ready.collect_until(
        [&](const auto&) {
          said = http_get(port, path);
          return said.find(text) != std::string::npos;
        },
        std::chrono::seconds(20));
    INFO(path << ": " << said);
    CHECK_THAT(said, Catch::Contains(text));
  };
  waits("/healthz", "degraded: redis redis://127.0.0.1:" + std::to_string(server.port) +
                        " may drop any key once it holds its maxmemory (64 MiB): maxmemory-policy allkeys-lfu");
  waits("/metrics", "\ndelayd_redis_may_drop_waiting_jobs 1\n");
  CHECK_THAT(http_get(port, "/readyz"), Catch::Contains(" 200 "));
  REQUIRE(server.client().command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}).view().str() == "OK");
  waits("/healthz", "\nok\n");
  waits("/metrics", "\ndelayd_redis_may_drop_waiting_jobs 0\n");
  CHECK(count_in_log(delayd.log_path(), "(its settings changed while delayd runs") == 1);
  CHECK(count_in_log(delayd.log_path(), "no server may drop waiting jobs any more") == 1);
  CHECK(delayd.stop() == 0);
}
