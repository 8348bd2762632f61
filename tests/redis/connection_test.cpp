#include "redis/connection.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <stdexcept>

#include "redis/server_time.hpp"
#include "redis/url.hpp"
#include "support/redis_connect.hpp"
#include "support/test_env.hpp"

using namespace delayd::redis;

TEST_CASE("redis urls parse into host, port, credentials and db", "[redis][url]") {
  auto o = parse_redis_url("redis://127.0.0.1:16379");
  CHECK(o.host == "127.0.0.1");
  CHECK(o.port == 16379);
  CHECK(o.password.empty());
  CHECK(o.db == 0);

  o = parse_redis_url("redis://:s3cret@cache.internal:7000/3");
  CHECK(o.host == "cache.internal");
  CHECK(o.port == 7000);
  CHECK(o.user.empty());
  CHECK(o.password == "s3cret");
  CHECK(o.db == 3);

  o = parse_redis_url("redis://alice:pw@h");
  CHECK(o.user == "alice");
  CHECK(o.password == "pw");
  CHECK(o.port == 6379);

  CHECK_THROWS_WITH(parse_redis_url("http://h:1"), Catch::Contains("redis://"));
  CHECK_THROWS_WITH(parse_redis_url("redis://h:port"), Catch::Contains("port"));
  CHECK_THROWS_WITH(parse_redis_url("redis://h:70000"), Catch::Contains("port"));
  CHECK_THROWS_WITH(parse_redis_url("redis://h:1/x"), Catch::Contains("database"));
  CHECK_THROWS_WITH(parse_redis_url("redis://secret@h"), !Catch::Contains("secret"));
  o = parse_redis_url("redis://u:p%40ss@[::1]:6380/2");
  CHECK(o.host == "::1");
  CHECK(o.password == "p@ss");
  CHECK(o.port == 6380);
  CHECK(o.db == 2);
  CHECK(mask_redis_url("redis://u:pw@h:1") == "redis://u:***@h:1");
  CHECK_THROWS_WITH(parse_redis_url("redis://:1"), Catch::Contains("host"));
}

TEST_CASE("a pipeline returns one reply per command, in order, errors included", "[redis]") {
  RedisConnection c(delayd::testing::redis_options(delayd::testing::require_env("REDIS_URL")));
  const std::string key = delayd::testing::unique_name("conn");
  auto replies = c.pipeline({{"SET", key, std::string("a\0b", 3)}, {"GET", key}, {"INCR", key}, {"DEL", key}});
  REQUIRE(replies.size() == 4);
  CHECK(replies[0].view().str() == "OK");
  CHECK(replies[1].view().str() == std::string("a\0b", 3));
  CHECK(replies[2].view().is_error());
  CHECK_THROWS_AS(replies[2].view().integer(), RedisCommandError);
  CHECK(replies[3].view().integer() == 1);
}

TEST_CASE("an unreachable redis is an I/O error naming the address", "[redis]") {
  RedisOptions o;
  o.host = "127.0.0.1";
  o.port = 1;  // nothing listens on port 1
  o.timeout_ms = 500;
  CHECK_THROWS_WITH(RedisConnection(o), Catch::Contains("127.0.0.1:1") && Catch::Contains("cannot connect"));
}

TEST_CASE("posts run in the order they were made and are collected one post at a time", "[redis]") {
  RedisConnection c(delayd::testing::redis_options(delayd::testing::require_env("REDIS_URL")));
  const std::string key = delayd::testing::unique_name("post");
  // Each post is one step of a list; Redis must run them in order for the list to read 1 2 3.
  c.post({{"RPUSH", key, "1"}, {"RPUSH", key, "2"}});
  c.post({{"RPUSH", key, "3"}});
  CHECK_THROWS_AS(c.pipeline({{"PING"}}), std::logic_error);  // replies are owed first
  const auto first = c.collect();
  REQUIRE(first.size() == 2);
  CHECK(first[0].view().integer() == 1);
  CHECK(first[1].view().integer() == 2);
  const auto second = c.collect();
  REQUIRE(second.size() == 1);
  CHECK(second[0].view().integer() == 3);
  CHECK_THROWS_AS(c.collect(), std::logic_error);  // nothing posted
  auto read = c.command({"LRANGE", key, "0", "-1"});
  REQUIRE(read.view().size() == 3);
  CHECK(read.view()[2].str() == "3");

  // Abandoned posts are forgotten with their connection: the next call reconnects and works.
  c.post({{"RPUSH", key, "4"}});
  c.abandon();
  CHECK_FALSE(c.connected());
  CHECK(c.command({"DEL", key}).view().integer() == 1);
}

TEST_CASE("a post collected after its connection broke is an I/O error, and no post is left owed", "[redis]") {
  ::signal(SIGPIPE, SIG_IGN);
  RedisConnection c(delayd::testing::redis_options(delayd::testing::require_env("REDIS_URL")));
  RedisConnection admin(delayd::testing::redis_options(delayd::testing::require_env("REDIS_URL")));
  const std::string key = delayd::testing::unique_name("never");
  const long long id = c.command({"CLIENT", "ID"}).view().integer();
  // Two posts, the first blocked in Redis (nothing is ever pushed to `key`) when the connection dies.
  c.post({{"BLPOP", key, "0"}});
  c.post({{"PING"}});
  REQUIRE(admin.command({"CLIENT", "KILL", "ID", std::to_string(id)}).view().integer() == 1);
  CHECK_THROWS_AS(c.collect(), RedisIoError);
  CHECK_THROWS_AS(c.collect(), std::logic_error);  // the second post was forgotten with the first
  CHECK(c.command({"PING"}).view().str() == "PONG");
}

TEST_CASE("server_time_us is Redis's clock, which on one host is this process's", "[redis]") {
  RedisConnection c(delayd::testing::redis_options(delayd::testing::require_env("REDIS_URL")));
  const auto local_us = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const std::int64_t before = local_us();
  const std::optional<std::int64_t> redis = server_time_us(c);
  const std::int64_t after = local_us();
  REQUIRE(redis);
  // The stack's Redis runs on this host: the same clock, read between the two local readings
  // (TIME has microseconds; a millisecond either way for the rounding of the two clocks' reads).
  CHECK(*redis >= before - 1000);
  CHECK(*redis <= after + 1000);
}
