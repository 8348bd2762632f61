// JobStore against the real Redis of the local stack. Each test works under its own key prefix.
// Crash points are reproduced by doing by hand the half of a step that a crash would leave.
#include <catch2/catch.hpp>

#include "storage/job_store.hpp"
#include "storage/redis_url.hpp"
#include "support/redis_cleanup.hpp"
#include "support/test_env.hpp"

#include <string>
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
  CHECK(out[0].state == "delay");
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
  CHECK(gone[0].kind == Claim::Kind::gone);
  CHECK(gone[0].state == "missing");
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

TEST_CASE_METHOD(Fixture, "a crash between mark ready and ZREM leaves an entry that claim reports gone", "[store][crash]") {
  store.accept(std::vector<NewJob>{job("z", 10)}, 0);
  redis.command({"HSET", keys.job("z"), "state", "ready"});  // marked, the ZREM never ran
  REQUIRE(pending().size() == 1);
  auto c = store.claim(std::vector<std::string>{"z"}, 20);
  CHECK(c[0].kind == Claim::Kind::gone);
  CHECK(c[0].state == "ready");
  store.drop_pending(shard, std::vector<std::string>{"z"});
  CHECK(pending().empty());
  CHECK_FALSE(has_payload("z"));
}

TEST_CASE_METHOD(Fixture, "cancel wins before delivery, loses in flight and after, and wins again after a failed attempt", "[store][cancel]") {
  std::vector<NewJob> jobs{job("k1", 100), job("k2", 100), job("k3", 100)};
  store.accept(jobs, 0);

  auto t = store.cancel("k1", 50);
  CHECK(t.changed);
  CHECK(t.state == "cancelled");
  CHECK(field("k1", "state") == "cancelled");
  CHECK(field("k1", "cancelled_at") == "50");
  CHECK(store.claim(std::vector<std::string>{"k1"}, 100)[0].kind == Claim::Kind::gone);

  store.claim(std::vector<std::string>{"k2"}, 100);
  t = store.cancel("k2", 101);
  CHECK_FALSE(t.changed);
  CHECK(t.state == "in_flight");
  CHECK(field("k2", "state") == "delay");
  store.release("k2", "broker down", 5000);
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
  CHECK(t.state == "ready");
  CHECK(field("k3", "state") == "ready");

  CHECK(store.cancel("never-existed", 1).state == "missing");
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
  CHECK(c[0].kind == Claim::Kind::gone);
  CHECK(c[0].state == "payload_missing");
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
