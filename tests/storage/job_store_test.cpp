// JobStore against the real Redis of the local stack. Each test works under its own key prefix.
// Crash points are reproduced by doing by hand the half of a step that a crash would leave.
#include <catch2/catch.hpp>

#include "storage/job_store.hpp"
#include "storage/redis_url.hpp"
#include "support/redis_cleanup.hpp"
#include "support/test_env.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace delayd::storage;

namespace {

struct Fixture {
  RedisConnection redis{parse_redis_url(delayd::testing::require_env("REDIS_URL"))};
  KeySchema keys{delayd::testing::unique_name("t")};
  JobStore store{redis, keys, 3600};
  const std::string shard = shard_id("delay-ingest", 0);

  NewJob job(const std::string& id, std::int64_t at, std::string business = "orders") {
    NewJob j;
    j.job_id = id;
    j.deliver_at = at;
    j.business = business;
    j.topic = "ready." + business;
    j.shard = shard;
    j.source = "delay-ingest/0/1";
    j.key = "k-" + id;
    j.value = "v-" + id;
    j.headers = {{"trace", "abc"}, {"nullh", std::nullopt}};
    return j;
  }
  std::vector<PendingEntry> pending() { return store.pending_between(shard, std::nullopt, INT64_MAX, 1000); }
  std::string payload_field(const std::string& id, const std::string& f) {
    auto job = store.get(id);
    if (!job || !job->count(f)) return "<nil>";
    return job->at(f);
  }
  bool has_payload(const std::string& id) {
    return redis.command({"EXISTS", keys.payload(id)}).view().integer() == 1;
  }
  std::string field(const std::string& id, const std::string& f) {
    auto r = redis.command({"HGET", keys.job(id), f});
    return r.view().is_nil() ? "<nil>" : std::string(r.view().str());
  }
  ~Fixture() { delayd::testing::delete_prefixed_keys(redis, keys.prefix()); }
};

}  // namespace

TEST_CASE_METHOD(Fixture, "accept creates the job hash and its pending entry", "[store]") {
  std::vector<NewJob> jobs{job("a", 2000), job("b", 1000)};
  auto out = store.accept(jobs, 500);
  REQUIRE(out.size() == 2);
  CHECK(out[0].created);
  CHECK(out[0].state == JobState::delay);
  CHECK(field("a", "state") == "delay");
  CHECK(field("a", "deliver_at") == "2000");
  CHECK(field("a", "business") == "orders");
  CHECK(field("a", "topic") == "ready.orders");
  CHECK(field("a", "created_at") == "500");
  CHECK(field("a", "attempt") == "0");
  CHECK(field("a", "value") == "<nil>");  // the payload lives apart from the hash
  CHECK(payload_field("a", "value") == "v-a");
  CHECK(payload_field("a", "key") == "k-a");
  CHECK(decode_headers(payload_field("a", "headers")) == StoredHeaders{{"trace", "abc"}, {"nullh", std::nullopt}});
  CHECK(pending() == std::vector<PendingEntry>{{"b", 1000}, {"a", 2000}});
  auto members = redis.command({"SMEMBERS", keys.shards()});
  REQUIRE(members.view().size() == 1);
  CHECK(members.view()[0].str() == shard);
}

TEST_CASE_METHOD(Fixture, "the same job-id twice is one job and the first publish wins", "[store]") {
  std::vector<NewJob> first{job("dup", 1000)};
  store.accept(first, 1);
  NewJob again = job("dup", 9999);
  again.value = "other";
  auto out = store.accept(std::vector<NewJob>{again}, 2);
  CHECK_FALSE(out[0].created);
  CHECK(out[0].deliver_at == 1000);
  CHECK(field("dup", "deliver_at") == "1000");
  CHECK(payload_field("dup", "value") == "v-dup");
  CHECK(pending() == std::vector<PendingEntry>{{"dup", 1000}});
}

TEST_CASE_METHOD(Fixture, "a replay after a crash between the hash and the ZADD restores the entry", "[store][crash]") {
  std::vector<NewJob> jobs{job("x", 1234)};
  store.accept(jobs, 1);
  redis.command({"ZREM", keys.pending(shard), "x"});  // the crash: hash written, payload and entry not
  redis.command({"DEL", keys.payload("x")});
  REQUIRE(pending().empty());
  auto out = store.accept(jobs, 2);  // the offset was not committed: the record comes again
  CHECK_FALSE(out[0].created);
  CHECK(pending() == std::vector<PendingEntry>{{"x", 1234}});
  CHECK(payload_field("x", "value") == "v-x");
}

TEST_CASE_METHOD(Fixture, "a duplicate published to another partition leaves the first shard alone", "[store]") {
  store.accept(std::vector<NewJob>{job("j", 100)}, 1);
  NewJob elsewhere = job("j", 100);
  elsewhere.shard = shard_id("delay-ingest", 7);
  auto out = store.accept(std::vector<NewJob>{elsewhere}, 2);
  CHECK(out[0].shard == shard);
  CHECK(store.pending_between(elsewhere.shard, std::nullopt, INT64_MAX, 10).empty());
  CHECK(pending().size() == 1);
}

TEST_CASE_METHOD(Fixture, "pending_between returns after < deliver_at <= upto, ascending, limited", "[store]") {
  std::vector<NewJob> jobs;
  for (int i = 1; i <= 5; ++i) jobs.push_back(job("p" + std::to_string(i), i * 100));
  store.accept(jobs, 0);
  CHECK(store.pending_between(shard, 100, 300, 10) == std::vector<PendingEntry>{{"p2", 200}, {"p3", 300}});
  CHECK(store.pending_between(shard, std::nullopt, 100, 10) == std::vector<PendingEntry>{{"p1", 100}});
  CHECK(store.pending_between(shard, std::nullopt, 500, 2).size() == 2);
  CHECK(store.pending_between(shard, 500, 10000, 10).empty());
}

TEST_CASE_METHOD(Fixture, "claim hands out the payload once due, and refuses early", "[store]") {
  NewJob j = job("c", 1000);
  j.key = std::nullopt;  // a null key stays null, distinct from an empty one
  j.value = "";
  store.accept(std::vector<NewJob>{j}, 0);
  std::vector<std::string> ids{"c"};

  auto early = store.claim(ids, 999);
  CHECK(early[0].kind == Claim::Kind::early);
  CHECK(field("c", "attempt") == "0");

  auto c = store.claim(ids, 1000);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].deliver_at == 1000);
  CHECK(c[0].topic == "ready.orders");
  CHECK_FALSE(c[0].key.has_value());
  CHECK(c[0].value == std::optional<std::string>(""));
  CHECK(c[0].headers == StoredHeaders{{"trace", "abc"}, {"nullh", std::nullopt}});
  CHECK(c[0].attempt == 1);
  CHECK(c[0].shard == shard);
  CHECK(field("c", "firing_at") == "1000");

  auto gone = store.claim(std::vector<std::string>{"nope"}, 5000);
  CHECK(gone[0].kind == Claim::Kind::unreadable);
  CHECK(gone[0].reason == "no job hash for this pending entry");
}

TEST_CASE_METHOD(Fixture, "mark_ready finishes the job, removes its entry and sets the retention", "[store]") {
  store.accept(std::vector<NewJob>{job("r", 10)}, 0);
  std::vector<std::string> ids{"r"};
  store.claim(ids, 10);
  auto t = store.mark_ready(ids, 12);
  CHECK(t[0].changed);
  CHECK(field("r", "state") == "ready");
  CHECK(field("r", "ready_at") == "12");
  CHECK(field("r", "firing_at") == "<nil>");
  CHECK(pending().empty());
  auto ttl = redis.command({"TTL", keys.job("r")});
  CHECK(ttl.view().integer() > 3500);
  CHECK_FALSE(has_payload("r"));  // delivered: the payload is on the ready topic now

  auto again = store.mark_ready(ids, 13);  // a duplicate acknowledgement changes nothing
  CHECK_FALSE(again[0].changed);
  CHECK(field("r", "ready_at") == "12");
}

TEST_CASE_METHOD(Fixture, "a crash between mark ready and ZREM leaves an entry that claim reports finished", "[store][crash]") {
  store.accept(std::vector<NewJob>{job("z", 10)}, 0);
  redis.command({"HSET", keys.job("z"), "state", "ready"});  // marked, the ZREM never ran
  REQUIRE(pending().size() == 1);
  auto c = store.claim(std::vector<std::string>{"z"}, 20);
  CHECK(c[0].kind == Claim::Kind::finished);
  CHECK(c[0].state == JobState::ready);
  store.set_aside(shard, c, 20);
  CHECK(pending().empty());
  CHECK_FALSE(has_payload("z"));
}

TEST_CASE_METHOD(Fixture, "cancel wins before delivery, loses in flight and after, and wins again after a failed attempt", "[store][cancel]") {
  std::vector<NewJob> jobs{job("k1", 100), job("k2", 100), job("k3", 100)};
  store.accept(jobs, 0);

  auto t = store.cancel("k1", 50);
  CHECK(t.changed);
  CHECK(t.state == JobState::cancelled);
  CHECK(field("k1", "state") == "cancelled");
  CHECK(field("k1", "cancelled_at") == "50");
  CHECK(store.claim(std::vector<std::string>{"k1"}, 100)[0].kind == Claim::Kind::finished);

  store.claim(std::vector<std::string>{"k2"}, 100);
  t = store.cancel("k2", 101);
  CHECK_FALSE(t.changed);
  CHECK(t.state == JobState::in_flight);
  CHECK(field("k2", "state") == "delay");
  store.release("k2", "broker down", 5000, {});
  CHECK(field("k2", "last_error") == "broker down");
  CHECK(field("k2", "deliver_at") == "100");  // the record keeps its deliver-at
  CHECK(pending() == std::vector<PendingEntry>{{"k3", 100}, {"k2", 5000}});  // k1 was cancelled
  auto score = redis.command({"ZSCORE", keys.pending(shard), "k2"});
  CHECK(score.view().str() == "5000");  // the retry waits in Redis as well
  t = store.cancel("k2", 102);
  CHECK(t.changed);

  store.claim(std::vector<std::string>{"k3"}, 100);
  store.mark_ready(std::vector<std::string>{"k3"}, 100);
  t = store.cancel("k3", 200);
  CHECK_FALSE(t.changed);
  CHECK(t.state == JobState::ready);
  CHECK(field("k3", "state") == "ready");

  CHECK(store.cancel("never-existed", 1).state == JobState::missing);
  CHECK_FALSE(has_payload("k1"));
  CHECK(pending().empty());
}

TEST_CASE_METHOD(Fixture, "mark_failed records the reason and removes the entry", "[store]") {
  store.accept(std::vector<NewJob>{job("f", 1)}, 0);
  store.claim(std::vector<std::string>{"f"}, 1);
  auto t = store.mark_failed("f", "topic ready.orders does not exist", 9);
  CHECK(t.changed);
  CHECK(field("f", "state") == "failed");
  CHECK(field("f", "error") == "topic ready.orders does not exist");
  CHECK(pending().empty());
}

TEST_CASE_METHOD(Fixture, "a due job whose payload was deleted is reported, not delivered empty", "[store]") {
  store.accept(std::vector<NewJob>{job("p", 5)}, 0);
  redis.command({"DEL", keys.payload("p")});
  auto c = store.claim(std::vector<std::string>{"p"}, 5);
  CHECK(c[0].kind == Claim::Kind::corrupt);
  CHECK_FALSE(c[0].marked_failed);
  CHECK(c[0].reason == "corrupt job record: payload missing from Redis");
  store.set_aside(shard, c, 6);
  CHECK(field("p", "state") == "failed");
  CHECK(field("p", "error") == "corrupt job record: payload missing from Redis");
  CHECK(pending().empty());
}

TEST_CASE_METHOD(Fixture, "scripts flushed from Redis are loaded again transparently", "[store]") {
  redis.command({"SCRIPT", "FLUSH"});
  auto out = store.accept(std::vector<NewJob>{job("s", 5)}, 0);
  CHECK(out[0].created);
  CHECK(pending().size() == 1);
}

TEST_CASE_METHOD(Fixture, "stats count pending entries, the next due time and transitions per business", "[store][stats]") {
  std::vector<NewJob> jobs{job("s1", 300, "orders"), job("s2", 200, "orders"), job("s3", 900, "mail")};
  store.accept(jobs, 0);
  store.cancel("s3", 1);
  store.claim(std::vector<std::string>{"s2"}, 200);
  store.mark_ready(std::vector<std::string>{"s2"}, 201);
  auto s = store.stats();
  CHECK(s.pending == 1);
  CHECK(s.next_due == std::optional<std::int64_t>(300));
  CHECK(s.by_business_state["orders"]["delay"] == 1);
  CHECK(s.by_business_state["orders"]["ready"] == 1);
  CHECK(s.by_business_state["mail"]["delay"] == 0);
  CHECK(s.by_business_state["mail"]["cancelled"] == 1);
}

// Fault tolerance: no byte in Redis can make a call throw or a script fail; each bad job is set
// aside with a reason a person can read, and the others in the same batch go on.
TEST_CASE_METHOD(Fixture, "a job hash with a garbled field is marked failed as corrupt, the rest of the batch is delivered", "[store][corrupt]") {
  store.accept(std::vector<NewJob>{job("good", 5), job("garbled", 5), job("attempt", 5), job("notopic", 5),
                                   job("weird", 5)},
               0);
  redis.command({"HSET", keys.job("garbled"), "deliver_at", "garbage"});
  redis.command({"HSET", keys.job("attempt"), "attempt", "1.5"});
  redis.command({"HDEL", keys.job("notopic"), "topic"});
  redis.command({"HSET", keys.job("weird"), "state", "half-done"});
  const std::vector<std::string> ids{"good", "garbled", "attempt", "notopic", "weird"};
  auto c = store.claim(ids, 10);  // before the fix: "ERR user_script:5: attempt to compare number with nil"
  REQUIRE(c.size() == 5);
  CHECK(c[0].kind == Claim::Kind::deliver);
  for (size_t i = 1; i < c.size(); ++i) {
    CHECK(c[i].kind == Claim::Kind::corrupt);
    CHECK(c[i].marked_failed);
  }
  CHECK(c[1].reason == "corrupt job record: deliver_at is not an integer: 'garbage'");
  CHECK(c[2].reason == "corrupt job record: attempt is not an integer: '1.5'");
  CHECK(c[3].reason == "corrupt job record: topic is missing");
  CHECK(c[4].reason == "corrupt job record: state is not one delayd writes: 'half-done'");
  store.set_aside(shard, c, 10);
  CHECK(field("garbled", "state") == "failed");
  CHECK(field("garbled", "error") == "corrupt job record: deliver_at is not an integer: 'garbage'");
  CHECK(field("garbled", "failed_at") == "10");
  CHECK_FALSE(has_payload("garbled"));
  CHECK(pending() == std::vector<PendingEntry>{{"good", 5}});  // only the deliverable one is left
  auto again = store.claim(std::vector<std::string>{"garbled"}, 11);
  CHECK(again[0].kind == Claim::Kind::finished);  // set aside once, not again and again
}

TEST_CASE_METHOD(Fixture, "a pending entry without a readable hash is moved to the shard's quarantine", "[store][corrupt]") {
  redis.command({"ZADD", keys.pending(shard), "5", "ghost"});        // no hash at all
  redis.command({"ZADD", keys.pending(shard), "5", "stringy"});
  redis.command({"SET", keys.job("stringy"), "not a hash"});          // WRONGTYPE for every script
  store.accept(std::vector<NewJob>{job("truncated", 5)}, 0);
  redis.command({"SET", keys.payload("truncated"), std::string("\x00\x00\x00\x09" "abc", 7)});
  const std::vector<std::string> ids{"ghost", "stringy", "truncated"};
  auto c = store.claim(ids, 10);
  CHECK(c[0].kind == Claim::Kind::unreadable);
  CHECK(c[1].kind == Claim::Kind::unreadable);
  CHECK(c[1].reason.find("WRONGTYPE") != std::string::npos);
  CHECK(c[2].kind == Claim::Kind::corrupt);
  CHECK(c[2].reason.rfind("corrupt job record: payload unreadable: ", 0) == 0);
  store.set_aside(shard, c, 10);
  CHECK(pending().empty());
  auto q = redis.command({"HGET", keys.quarantine(shard), "ghost"});
  CHECK(q.view().str() == "no job hash for this pending entry");
  CHECK(redis.command({"HEXISTS", keys.quarantine(shard), "stringy"}).view().integer() == 1);
  CHECK(field("truncated", "state") == "failed");
  auto got = store.get("stringy");  // a person's look-up does not throw either
  REQUIRE(got.has_value());
  CHECK(got->at("error").find("WRONGTYPE") != std::string::npos);
}

TEST_CASE_METHOD(Fixture, "scores that are not whole milliseconds are read rounded up, never early", "[store][corrupt]") {
  redis.command({"ZADD", keys.pending(shard), "10.2", "frac"});
  redis.command({"ZADD", keys.pending(shard), "-inf", "minus"});
  CHECK(pending() == std::vector<PendingEntry>{{"minus", 0}, {"frac", 11}});
}

TEST_CASE_METHOD(Fixture, "a release after an outage refunds the attempt, and a possibly written one keeps the job in flight", "[store]") {
  store.accept(std::vector<NewJob>{job("o", 5), job("p", 5)}, 0);
  store.claim(std::vector<std::string>{"o", "p"}, 5);
  CHECK(field("o", "attempt") == "1");
  store.release("o", "timed out before sending", 100, {.refund = true, .keep_firing = false});
  CHECK(field("o", "attempt") == "0");
  CHECK(field("o", "firing_at") == "<nil>");
  store.release("p", "timed out in flight", 100, {.refund = true, .keep_firing = true});
  CHECK(field("p", "attempt") == "0");
  CHECK(field("p", "firing_at") == "5");
  CHECK(store.cancel("p", 50).state == JobState::in_flight);  // no cancel can win against a maybe-written record
  CHECK(store.cancel("o", 50).changed);
}

TEST_CASE("error replies that mean 'not now' are transient", "[unit][store]") {
  for (const char* e : {"LOADING Redis is loading the dataset in memory", "READONLY You can't write against a read only replica.",
                        "OOM command not allowed when used memory > 'maxmemory'.", "MISCONF Redis is configured to save RDB snapshots",
                        "BUSY Redis is busy running a script.", "TRYAGAIN Multiple keys request during rehashing of slot",
                        "CLUSTERDOWN The cluster is down", "MASTERDOWN Link with MASTER is down", "NOREPLICAS Not enough good replicas"}) {
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
                              " --logfile /dev/null --pidfile /tmp/delayd-readonly-" + std::to_string(port) + ".pid";
      if (std::system(cmd.c_str()) != 0) continue;
      for (int i = 0; i < 100; ++i) {
        try {
          RedisConnection probe(RedisOptions{"127.0.0.1", port, "", "", 0, 500});
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
      RedisConnection c(RedisOptions{"127.0.0.1", port, "", "", 0, 500});
      c.command({"SHUTDOWN", "NOSAVE"});
    } catch (const RedisIoError&) {  // the connection closes as it shuts down
    }
  }
};

}  // namespace

// Item 1 of the fault-tolerance issue: before, an error reply such as READONLY or LOADING came
// back as RedisCommandError, which the service did not catch, so delayd exited.
TEST_CASE("a Redis that refuses writes for now (READONLY after a failover) is a transient error, not a crash", "[store][faults]") {
  ReadOnlyRedis replica;
  RedisConnection redis(RedisOptions{"127.0.0.1", replica.port, "", "", 0, 2000});
  KeySchema keys(delayd::testing::unique_name("ro"));
  JobStore store(redis, keys, 60);  // SCRIPT LOAD works on a replica
  NewJob j;
  j.job_id = "ro";
  j.deliver_at = 5;
  j.business = "b";
  j.topic = "ready.b";
  j.shard = "delay-ingest:0";
  CHECK_THROWS_AS(store.accept(std::vector<NewJob>{j}, 0), RedisIoError);
  CHECK_THROWS_WITH(store.accept(std::vector<NewJob>{j}, 0), Catch::Contains("READONLY"));
  CHECK_THROWS_AS(redis.command({"SET", "k", "v"}), RedisIoError);
  CHECK(redis.command({"PING"}).view().str() == "PONG");  // and it reconnects by itself
}

TEST_CASE_METHOD(Fixture, "a cancel for an unknown id is remembered, and the job arriving later is accepted as cancelled", "[store][cancel]") {
  CHECK(store.cancel("early", 100, 300).state == JobState::missing);
  CHECK(field("early", "state") == "cancelled");
  CHECK(field("early", "cancelled_early") == "1");
  const auto ttl = redis.command({"TTL", keys.job("early")}).view().integer();
  CHECK(ttl > 0);
  CHECK(ttl <= 300);
  auto out = store.accept(std::vector<NewJob>{job("early", 5000)}, 200);
  CHECK_FALSE(out[0].created);
  CHECK(out[0].cancelled_early);
  CHECK(out[0].state == JobState::cancelled);
  CHECK(field("early", "deliver_at") == "5000");  // filled in, for people and delayctl get
  CHECK(field("early", "business") == "orders");
  CHECK(pending().empty());            // never to be delivered
  CHECK_FALSE(has_payload("early"));
  CHECK(redis.command({"TTL", keys.job("early")}).view().integer() > 3000);  // the job's retention now
  CHECK(store.stats().by_business_state["orders"]["cancelled"] == 1);
  auto again = store.accept(std::vector<NewJob>{job("early", 5000)}, 300);  // a replay: just a duplicate
  CHECK_FALSE(again[0].cancelled_early);
  CHECK(again[0].state == JobState::cancelled);

  CHECK(store.cancel("not-remembered", 100, 0).state == JobState::missing);
  CHECK(field("not-remembered", "state") == "<nil>");
}
