// JobStore when Redis holds what it should not or refuses: records damaged by hand (what a
// person, a bug or a half-restored backup could leave), error replies that mean "not now", and
// two brokers that both believe they own a shard (fencing).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "job_store_fixture.hpp"
#include "redis/url.hpp"

using namespace delayd::storage;
using namespace delayd::storage::test;
using namespace delayd::redis;

// Fault tolerance: no byte in Redis can make a call throw or a script fail; each bad job is set
// aside with a reason a person can read, and the others in the same batch go on.
TEST_CASE_METHOD(
    Fixture, "a garbled job record is marked failed as corrupt and kept for people, the rest of the batch is delivered",
    "[store][corrupt]") {
  store.accept(
      std::vector<NewJob>{job("good", 5), job("garbled", 5), job("attempt", 5), job("noline", 5), job("weird", 5)}, 0);
  set_record("garbled", "delay garbage 0 orders\npayload");
  set_record("attempt", "delay 5 1.5 orders\n");
  set_record("noline", "delay 5 0 orders");
  set_record("weird", "half-done 5 0 orders\n");
  const Ids ids{"good", "garbled", "attempt", "noline", "weird"};
  auto c = store.claim(shard, ids, 10, 0, std::vector<std::int64_t>(ids.size(), 5));  // as the loader read them
  REQUIRE(c.size() == 5);
  CHECK(c[0].kind == Claim::Kind::deliver);
  for (size_t i = 1; i < c.size(); ++i) {
    CHECK(c[i].kind == Claim::Kind::corrupt);
    CHECK(c[i].marked_failed);
  }
  CHECK(c[1].reason == "corrupt job record: header line unreadable: 'delay garbage 0 orders'");
  CHECK(c[3].reason == "corrupt job record: header line unreadable: 'delay 5 0 orders'");
  CHECK(c[4].reason == "corrupt job record: header line unreadable: 'half-done 5 0 orders'");
  store.set_aside(shard, c, 10);
  CHECK(field("garbled", "state") == "failed");
  CHECK(field("garbled", "error") == "corrupt job record: header line unreadable: 'delay garbage 0 orders'");
  CHECK(field("garbled", "failed_at") == "10");
  CHECK(record("garbled").find("\ndelay garbage 0 orders\npayload") != std::string::npos);  // the evidence stays
  CHECK(ttl("garbled") > 3500);
  CHECK(pending() == std::vector<PendingEntry>{{"good", 5}});  // only the deliverable one is left
  auto again = store.claim(shard, Ids{"garbled"}, 11);         // its entry is gone; met again only by hand
  CHECK(again[0].kind == Claim::Kind::finished);               // and then it is failed: set aside once
  CHECK(again[0].state == JobState::failed);
}

// A shard's hash of delay records that is not a hash (a hand edit): each of its jobs is set
// aside with the reason, and the claim does not fail.
TEST_CASE_METHOD(Fixture, "a claim on a shard whose hash of delay records is unreadable quarantines its jobs",
                 "[store][corrupt]") {
  store.accept(std::vector<NewJob>{job("w1", 5), job("w2", 5)}, 0);
  redis.command({"DEL", keys.delay_records(shard)});
  redis.command({"SET", keys.delay_records(shard), "not a hash"});
  const auto c = store.claim(shard, Ids{"w1", "w2"}, 10, 0, std::vector<std::int64_t>{5, 5});
  REQUIRE(c.size() == 2);
  for (const auto& one : c) {
    CHECK(one.kind == Claim::Kind::unreadable);
    CHECK(one.reason.find("WRONGTYPE") != std::string::npos);
  }
  CHECK(redis.command({"HLEN", keys.quarantine(shard)}).view().integer() == 2);
  CHECK(pending().empty());
}

TEST_CASE_METHOD(Fixture, "a pending entry without a readable record is moved to the shard's quarantine",
                 "[store][corrupt]") {
  redis.command({"SADD", keys.shards(), shard});
  delayd::testing::put_pending_entry(redis, keys, shard, "ghost", 5);  // no record at all
  delayd::testing::put_pending_entry(redis, keys, shard, "hashy", 5);
  redis.command({"HSET", keys.job(shard, "hashy"), "state", "delay"});  // WRONGTYPE for GET
  const Ids ids{"ghost", "hashy"};
  const std::vector<std::int64_t> seen_at{5, 5};  // where the loader read them: how the claim finds them
  auto c = store.claim(shard, ids, 10, 0, seen_at);
  CHECK(c[0].kind == Claim::Kind::unreadable);
  CHECK(c[1].kind == Claim::Kind::unreadable);
  CHECK(c[1].reason.find("WRONGTYPE") != std::string::npos);
  CHECK(pending().empty());
  auto q = redis.command({"HGET", keys.quarantine(shard), "ghost"});
  CHECK(q.view().str() == "no job record for this pending entry");
  CHECK(redis.command({"HEXISTS", keys.quarantine(shard), "hashy"}).view().integer() == 1);
  auto got = store.get("hashy");  // a person's look-up does not throw either
  REQUIRE(got.has_value());
  CHECK(got->at("error").find("WRONGTYPE") != std::string::npos);
}

TEST_CASE_METHOD(Fixture,
                 "scores of a 0.3 pending set that are not whole milliseconds are moved rounded up, never early",
                 "[store][corrupt]") {
  redis.command({"ZADD", keys.pending_0_3(shard), "10.2", "frac"});
  redis.command({"ZADD", keys.pending_0_3(shard), "-inf", "minus"});
  CHECK(pending() == std::vector<PendingEntry>{{"minus", 0}, {"frac", 11}});
}

TEST_CASE("error replies that mean 'not now' are transient", "[unit][store]") {
  for (const char* e :
       {"LOADING Redis is loading the dataset in memory", "READONLY You can't write against a read only replica.",
        "OOM command not allowed when used memory > 'maxmemory'.", "MISCONF Redis is configured to save RDB snapshots",
        "BUSY Redis is busy running a script.", "TRYAGAIN Multiple keys request during rehashing of slot",
        "CLUSTERDOWN The cluster is down", "MASTERDOWN Link with MASTER is down",
        "NOREPLICAS Not enough good replicas"}) {
    CHECK(is_transient_error_reply(e));
  }
  for (const char* e : {"ERR unknown command", "WRONGTYPE Operation against a key holding the wrong kind of value",
                        "NOSCRIPT No matching script", "LOADINGX", ""}) {
    CHECK_FALSE(is_transient_error_reply(e));
  }
}

namespace {

// A real redis-server of the test's own, made a replica of a primary that does not exist: it
// answers every write with READONLY, as a primary does right after a failover demoted it.
struct ReadOnlyRedis {
  int port = 0;
  ReadOnlyRedis() {
    for (port = 27000 + ::getpid() % 1000; port < 29000; ++port) {
      const std::string cmd = "redis-server --port " + std::to_string(port) +
                              " --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --replicaof 127.0.0.1 1"
                              " --logfile /dev/null --pidfile /tmp/delayd-readonly-" +
                              std::to_string(port) + ".pid";
      if (std::system(cmd.c_str()) != 0) continue;
      for (int i = 0; i < 100; ++i) {
        try {
          RedisConnection probe(RedisOptions{"127.0.0.1", port, "", "", 0, 500, {}});
          if (probe.command({"PING"}).view().is_string()) return;
        } catch (const RedisIoError&) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    FAIL("could not start a redis-server for the test");
  }
  ~ReadOnlyRedis() {
    try {
      RedisConnection c(RedisOptions{"127.0.0.1", port, "", "", 0, 500, {}});
      c.command({"SHUTDOWN", "NOSAVE"});
    } catch (const RedisIoError&) {  // the connection closes as it shuts down
    }
  }
};

}  // namespace

// Item 1 of the fault-tolerance issue: before, an error reply such as READONLY or LOADING came
// back as RedisCommandError, which the service did not catch, so delayd exited.
TEST_CASE("a Redis that refuses writes for now (READONLY after a failover) is a transient error, not a crash",
          "[store][faults]") {
  ReadOnlyRedis replica;
  RedisConnection redis(RedisOptions{"127.0.0.1", replica.port, "", "", 0, 2000, {}});
  KeySchema keys(delayd::testing::unique_name("ro"));
  JobStore store(redis, keys, 60);  // SCRIPT LOAD works on a replica
  NewJob j;
  j.job_id = "ro";
  j.deliver_at = 5;
  j.business = "b";
  j.shard = "delay-ingest:0";
  CHECK_THROWS_AS(store.accept(std::vector<NewJob>{j}, 0), RedisIoError);
  CHECK_THROWS_WITH(store.accept(std::vector<NewJob>{j}, 0), Catch::Contains("READONLY"));
  CHECK_THROWS_AS(redis.command({"SET", "k", "v"}), RedisIoError);
  CHECK(redis.command({"PING"}).view().str() == "PONG");  // and it reconnects by itself
}

// ---- fencing: two brokers that both believe they own a shard ----

namespace {

// A second broker's store on the same keys; both fence.
struct TwoOwners : Fixture {
  JobStore other{redis, keys, 3600};
  TwoOwners() {
    store.enable_fencing("old/1");
    other.enable_fencing("new/2");
  }
  std::string in_flight_entry(const std::string& id) {
    auto r = redis.command({"HGET", keys.in_flight(shard), id});
    return r.view().is_nil() ? "<nil>" : std::string(r.view().str());
  }
};

}  // namespace

TEST_CASE_METHOD(TwoOwners, "take_shard hands out growing epochs and names the owner", "[store][fence]") {
  const std::int64_t first = store.take_shard(shard, 100);
  const std::int64_t second = other.take_shard(shard, 200);
  CHECK(second == first + 1);
  CHECK(store.fence(shard) == first);
  CHECK(redis.command({"GET", keys.owner(shard)}).view().str() == std::to_string(second) + " new/2 200");
  CHECK(store.lost_shards() == Ids{shard});
  CHECK(other.lost_shards().empty());
  store.drop_shard(shard);
  CHECK_FALSE(store.fence(shard).has_value());
  CHECK(store.lost_shards().empty());
}

TEST_CASE_METHOD(TwoOwners, "a fencing store refuses to claim a shard it never took", "[store][fence]") {
  store.accept(std::vector<NewJob>{job("n", 10)}, 0);
  CHECK_THROWS_AS(store.claim(shard, Ids{"n"}, 10), ShardFenced);
  CHECK(in_flight_entry("n") == "<nil>");
}

TEST_CASE_METHOD(TwoOwners, "a stale owner's claim, release and failure are refused whole", "[store][fence]") {
  store.accept(std::vector<NewJob>{job("a", 10), job("b", 10)}, 0);
  const std::int64_t old_epoch = store.take_shard(shard, 1);
  // The old owner claims "a" (its record goes out), then the shard moves.
  REQUIRE(store.claim(shard, Ids{"a"}, 10)[0].kind == Claim::Kind::deliver);
  CHECK(in_flight_entry("a") == "1 10 " + std::to_string(old_epoch));
  const std::int64_t new_epoch = other.take_shard(shard, 2);

  // A claim by the old owner produces nothing and writes nothing.
  CHECK_THROWS_AS(store.claim(shard, Ids{"b"}, 10), ShardFenced);
  CHECK(in_flight_entry("b") == "<nil>");
  // The new owner claims both; "a" again (attempt 2), now under its own epoch.
  auto c = other.claim(shard, Ids{"a", "b"}, 11);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].attempt == 2);
  CHECK(in_flight_entry("a") == "2 11 " + std::to_string(new_epoch));
  CHECK(field("a", "claimed_by") == std::to_string(new_epoch));

  // The old owner's failed attempt cannot wipe the new owner's in-flight entry (a cancel would
  // then win against the new owner's record) nor re-score the job.
  CHECK_THROWS_AS(store.release(shard, "a", "timed out", 5000, {}, 1000), ShardFenced);
  CHECK(in_flight_entry("a") == "2 11 " + std::to_string(new_epoch));
  CHECK(pending() == std::vector<PendingEntry>{{"a", 10}, {"b", 10}});
  auto cancel = store.cancel(shard, "a", 12);
  CHECK(cancel.state == JobState::in_flight);
  // Nor fail a job the new owner may deliver.
  CHECK_THROWS_AS(store.mark_failed(shard, "a", "gave up", 12), ShardFenced);
  CHECK(field("a", "state") == "delay");

  // The new owner's own retry is accepted.
  auto r = other.release(shard, "b", "broker not available", 20, {.refund = true, .keep_firing = false}, 1000);
  CHECK(r.changed);
}

TEST_CASE_METHOD(TwoOwners, "a stale owner's delivery report still marks the job ready", "[store][fence]") {
  store.accept(std::vector<NewJob>{job("m", 10)}, 0);
  store.take_shard(shard, 1);
  auto c = store.claim(shard, Ids{"m"}, 10);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  other.take_shard(shard, 2);
  // Kafka acknowledged the old owner's record: that is a fact, so the job is ready...
  const std::vector<JobStore::Delivered> done{{"m", c[0].deliver_at, c[0].attempt, c[0].business}};
  auto t = store.mark_ready(shard, std::span<const JobStore::Delivered>(done), 12);
  CHECK(t[0].changed);
  CHECK(field("m", "state") == "ready");
  // ...and the new owner, loading it from its pending set a moment late, does not produce it again.
  auto again = other.claim(shard, Ids{"m"}, 13);
  CHECK(again[0].kind == Claim::Kind::finished);
  CHECK(again[0].state == JobState::ready);
}
