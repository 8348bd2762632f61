// JobStore against the real Redis of the local stack: accept, claim, mark, cancel, release,
// posted calls, stats. Each test works under its own key prefix (job_store_fixture.hpp).
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "job_store_fixture.hpp"
#include "storage/lua_scripts.hpp"
#include "support/lost_scripts.hpp"

using namespace delayd::storage;
using namespace delayd::storage::test;
using namespace delayd::redis;

TEST_CASE_METHOD(Fixture, "accept creates the job record and its pending entry", "[store]") {
  std::vector<NewJob> jobs{job("a", 2000), job("b", 1000)};
  auto out = store.accept(jobs, 500);
  REQUIRE(out.size() == 2);
  CHECK(out[0].created());
  CHECK(out[0].state == JobState::delay);
  CHECK(record("a").rfind("delay 2000 0 orders\n", 0) == 0);  // what redis-cli GET shows first
  CHECK(field("a", "state") == "delay");
  CHECK(field("a", "deliver_at") == "2000");
  CHECK(field("a", "business") == "orders");
  CHECK(field("a", "attempt") == "0");
  CHECK(field("a", "shard") == shard);
  CHECK(field("a", "value") == "v-a");
  CHECK(field("a", "key") == "k-a");
  CHECK(decode_headers(field("a", "headers")) == StoredHeaders{{"trace", "abc"}, {"nullh", std::nullopt}});
  CHECK(ttl("a") == -1);  // a pending job never expires
  CHECK(pending() == std::vector<PendingEntry>{{"b", 1000}, {"a", 2000}});
  auto members = redis.command({"SMEMBERS", keys.shards()});
  REQUIRE(members.view().size() == 1);
  CHECK(members.view()[0].str() == shard);
  auto s = store.stats();
  CHECK(s.by_business_state["orders"]["delay"] == 2);  // counted in the same call
}

TEST_CASE_METHOD(Fixture, "the same job-id twice is one job and the first publish wins", "[store]") {
  std::vector<NewJob> first{job("dup", 1000)};
  store.accept(first, 1);
  NewJob again = job("dup", 9999);
  again.value = "other";
  auto out = store.accept(std::vector<NewJob>{again}, 2);
  CHECK_FALSE(out[0].created());
  CHECK(out[0].deliver_at == 1000);
  CHECK(field("dup", "deliver_at") == "1000");
  CHECK(field("dup", "value") == "v-dup");
  CHECK(pending() == std::vector<PendingEntry>{{"dup", 1000}});
  CHECK(store.stats().by_business_state["orders"]["delay"] == 1);
}

TEST_CASE_METHOD(Fixture, "a replay re-adds a pending entry that was lost, and keeps the first payload",
                 "[store][crash]") {
  std::vector<NewJob> jobs{job("x", 1234)};
  store.accept(jobs, 1);
  REQUIRE(delayd::testing::drop_pending_entry(redis, keys, shard, "x", 1234));  // by hand: they are written together
  REQUIRE(pending().empty());
  jobs[0].value = "replayed";
  auto out = store.accept(jobs, 2);  // the offset was not committed: the record comes again
  CHECK_FALSE(out[0].created());
  CHECK(pending() == std::vector<PendingEntry>{{"x", 1234}});
  CHECK(field("x", "value") == "v-x");
}

TEST_CASE_METHOD(Fixture, "the same job-id in another partition is another job: idempotency is per shard", "[store]") {
  store.accept(std::vector<NewJob>{job("j", 100)}, 1);
  NewJob elsewhere = job("j", 200);
  elsewhere.shard = shard_id("delay-ingest", 7);
  auto out = store.accept(std::vector<NewJob>{elsewhere}, 2);
  CHECK(out[0].created());
  CHECK(store.pending_between(elsewhere.shard, std::nullopt, INT64_MAX, 10) == std::vector<PendingEntry>{{"j", 200}});
  CHECK(pending() == std::vector<PendingEntry>{{"j", 100}});
  CHECK(store.shards_holding("j", elsewhere.shard) == Ids{elsewhere.shard, shard});
  // A cancel read from partition 7 cancels the job there first.
  auto t = store.cancel_anywhere(elsewhere.shard, "j", 5);
  CHECK(t.changed);
  CHECK(t.shard == elsewhere.shard);
  CHECK(pending().size() == 1);
}

TEST_CASE_METHOD(Fixture, "locate reads a job's likely partition first and every shard when it is not there",
                 "[store][report]") {
  NewJob in0 = job("twice", 100);
  NewJob in7 = job("twice", 200, "mail");
  in7.shard = shard_id("delay-ingest", 7);
  NewJob only7 = job("seven", 300, "mail");
  only7.shard = in7.shard;
  store.accept(std::vector<NewJob>{in0, in7, only7}, 1);
  const auto shard_of = [](const std::optional<Located>& l) { return l ? l->shard : std::string("none"); };
  // No hint: the first shard in order that holds it.
  auto where = store.locate(Ids{"twice", "seven", "nobody"});
  CHECK(shard_of(where[0]) == shard);
  CHECK(shard_of(where[1]) == in7.shard);
  CHECK(shard_of(where[2]) == "none");
  // The likely partition's shard first: the job there, even when another shard holds its id too.
  where = store.locate(Ids{"twice", "seven", "nobody"}, std::vector<std::int32_t>{7, 7, 7});
  CHECK(shard_of(where[0]) == in7.shard);
  CHECK(where[0]->business == "mail");
  CHECK(shard_of(where[1]) == in7.shard);
  CHECK(shard_of(where[2]) == "none");
  // A wrong guess, a partition no shard has, or none (-1): found wherever it is.
  where = store.locate(Ids{"seven", "seven", "twice", "twice"}, std::vector<std::int32_t>{0, 12, -1, 0});
  CHECK(shard_of(where[0]) == in7.shard);
  CHECK(shard_of(where[1]) == in7.shard);
  CHECK(shard_of(where[2]) == shard);
  CHECK(shard_of(where[3]) == shard);
}

TEST_CASE_METHOD(Fixture, "a cancel read from another partition finds the job in its own shard", "[store][cancel]") {
  store.accept(std::vector<NewJob>{job("c", 100)}, 1);
  auto t = store.cancel_anywhere(shard_id("delay-ingest", 3), "c", 5, 300);
  CHECK(t.changed);
  CHECK(t.shard == shard);
  CHECK(field("c", "state") == "cancelled");
  CHECK(pending().empty());
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

TEST_CASE_METHOD(Fixture, "a batch larger than one script call is accepted, claimed and marked whole", "[store]") {
  std::vector<NewJob> jobs;
  Ids ids;
  for (size_t i = 0; i < JobStore::kJobsPerCall * 2 + 7; ++i) {
    jobs.push_back(job("n" + std::to_string(i), 10));
    ids.push_back(jobs.back().job_id);
  }
  auto out = store.accept(jobs, 0);
  REQUIRE(out.size() == jobs.size());
  CHECK(std::all_of(out.begin(), out.end(), [](const AcceptOutcome& o) { return o.created(); }));
  auto c = store.claim(shard, ids, 10);
  REQUIRE(c.size() == ids.size());
  for (size_t i = 0; i < c.size(); ++i) {
    REQUIRE(c[i].kind == Claim::Kind::deliver);
    CHECK(c[i].job_id == ids[i]);
    CHECK(c[i].value == "v-" + ids[i]);  // each claim carries its own job's payload
  }
  auto t = store.mark_ready(shard, ids, 11);
  CHECK(std::all_of(t.begin(), t.end(), [](const Transition& x) { return x.changed; }));
  CHECK(pending().empty());
  CHECK(store.stats().by_business_state["orders"]["ready"] == static_cast<std::int64_t>(ids.size()));
}

TEST_CASE_METHOD(Fixture, "claim hands out the payload once due, and refuses early", "[store]") {
  NewJob j = job("c", 1000);
  j.key = std::nullopt;  // a null key stays null, distinct from an empty one
  j.value = "";
  store.accept(std::vector<NewJob>{j}, 0);
  Ids ids{"c"};

  auto early = store.claim(shard, ids, 999);
  CHECK(early[0].kind == Claim::Kind::early);
  CHECK(field("c", "attempt") == "0");

  auto c = store.claim(shard, ids, 1000);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].deliver_at == 1000);
  CHECK(c[0].business == "orders");
  CHECK_FALSE(c[0].key.has_value());
  CHECK(c[0].value == std::optional<std::string>(""));
  CHECK(c[0].headers == StoredHeaders{{"trace", "abc"}, {"nullh", std::nullopt}});
  CHECK(c[0].attempt == 1);
  CHECK(field("c", "firing_at") == "1000");
  // The claim leaves the record alone (read, never written again); the attempt under
  // way and its time are in the shard's in-flight hash.
  CHECK(record("c").rfind("delay 1000 0 orders\n", 0) == 0);
  CHECK(redis.command({"HGET", keys.in_flight(shard), "c"}).view().str() == "1 1000 0");  // epoch 0: unfenced

  auto gone = store.claim(shard, Ids{"nope"}, 5000);
  CHECK(gone[0].kind == Claim::Kind::unreadable);
  CHECK(gone[0].reason == "no job record for this pending entry");
}

TEST_CASE_METHOD(Fixture, "mark_ready finishes the job, removes its entry and sets the retention", "[store]") {
  store.accept(std::vector<NewJob>{job("r", 10)}, 0);
  Ids ids{"r"};
  store.claim(shard, ids, 10);
  auto t = store.mark_ready(shard, ids, 12);
  CHECK(t[0].changed);
  CHECK(field("r", "state") == "ready");
  CHECK(field("r", "ready_at") == "12");
  CHECK(field("r", "firing_at") == "<nil>");
  CHECK(record("r") == "ready 10 1 orders ready_at=12\n");  // the attempt settled into the record
  CHECK(redis.command({"HEXISTS", keys.in_flight(shard), "r"}).view().integer() == 0);
  CHECK(pending().empty());
  CHECK(ttl("r") > 3500);
  CHECK_FALSE(has_payload("r"));  // delivered: the payload is on the ready topic now

  auto again = store.mark_ready(shard, ids, 13);  // a duplicate acknowledgement changes nothing
  CHECK_FALSE(again[0].changed);
  CHECK(field("r", "ready_at") == "12");
  auto s = store.stats();
  CHECK(s.by_business_state["orders"]["delay"] == 0);
  CHECK(s.by_business_state["orders"]["ready"] == 1);
}

// claim.lua and mark_ready.lua read and write a batch's in-flight entries with one command each;
// a batch that names a job twice, or holds a record MGET cannot return, must end as the same
// jobs done one call at a time (the slow reference: shard B).
TEST_CASE_METHOD(Fixture, "a batch naming a job twice ends as the same jobs claimed and marked one call at a time",
                 "[store]") {
  const std::string a = shard_id("delay-ingest", 1), b = shard_id("delay-ingest", 2);
  const Ids batch{"x", "y", "x", "gone", "empty", "z", "z"};
  for (const auto& sh : {a, b}) {
    std::vector<NewJob> jobs{job("x", 10), job("y", 10), job("z", 10)};
    for (auto& j : jobs) j.shard = sh;
    store.accept(jobs, 0);
    delayd::testing::put_pending_entry(redis, keys, sh, "gone", 10);  // an entry without its record
    delayd::testing::put_pending_entry(redis, keys, sh, "empty", 10);
    redis.command({"SET", keys.job(sh, "empty"), ""});  // a record that is an empty string
  }
  auto dump = [&](const std::string& sh) {
    std::string out;
    for (const auto& id : {"x", "y", "z", "gone", "empty"}) {
      out += std::string(id) + "=" + delayd::testing::record_of(redis, keys, sh, id).value_or("<nil>") + ";";
    }
    auto flat = [&](const delayd::redis::Command& c) {
      std::vector<std::string> v;
      auto r = redis.command(c);
      for (std::size_t i = 0; i < r.view().size(); ++i) v.emplace_back(r.view()[i].str());
      std::string joined;
      for (const auto& e : v) joined += e + ",";
      return joined;
    };
    out += " inflight " + flat({"HGETALL", keys.in_flight(sh)});
    out += " pending ";
    for (const auto& [id, score] : delayd::testing::pending_entries(redis, keys, sh)) {
      out += id + "," + std::to_string(score) + ",";
    }
    out += " ready " + flat({"ZRANGE", keys.state_index(sh, "ready"), "0", "-1", "WITHSCORES"});
    out += " quarantine " + flat({"HGETALL", keys.quarantine(sh)});
    out += " stats " + flat({"HGETALL", keys.stats(sh)});
    return out;
  };
  auto kinds = [](const std::vector<Claim>& cs) {
    std::string out;
    for (const auto& c : cs) {
      out += c.job_id + ":" + std::to_string(static_cast<int>(c.kind)) + ":" + std::to_string(c.attempt) + ":" +
             c.reason + ":" + c.value.value_or("-") + ";";
    }
    return out;
  };
  auto delivered = [](const std::vector<Claim>& cs) {
    std::vector<JobStore::Delivered> d;
    for (const auto& c : cs) {
      if (c.kind == Claim::Kind::deliver) d.push_back({c.job_id, c.deliver_at, c.attempt, c.business});
    }
    return d;
  };
  auto transitions = [](const std::vector<Transition>& ts) {
    std::string out;
    for (const auto& t : ts)
      out += t.job_id + ":" + (t.changed ? "1" : "0") + ":" + std::string(to_string(t.state)) + ";";
    return out;
  };

  const auto claimed_a = store.claim(a, batch, 10);
  std::vector<Claim> claimed_b;
  for (const auto& id : batch) claimed_b.push_back(store.claim(b, Ids{id}, 10).front());
  CHECK(kinds(claimed_a) == kinds(claimed_b));
  CHECK(claimed_a[2].attempt == 2);  // the second x sees the first one's in-flight entry
  CHECK(claimed_a[3].reason == "no job record for this pending entry");
  CHECK(claimed_a[4].reason == "no job record for this pending entry");
  CHECK(dump(a) == dump(b));

  const auto da = delivered(claimed_a), db = delivered(claimed_b);
  REQUIRE(da.size() == 5);
  const auto marked_a = store.mark_ready(a, std::span<const JobStore::Delivered>(da), 12);
  std::vector<Transition> marked_b;
  for (const auto& d : db) {
    marked_b.push_back(store.mark_ready(b, std::span<const JobStore::Delivered>(&d, 1), 12).front());
  }
  CHECK(transitions(marked_a) == transitions(marked_b));
  CHECK(dump(a) == dump(b));
  // x's first claim (attempt 1) was superseded by its second (attempt 2, the in-flight entry):
  // only the mark of the claim in flight settles it, once.
  CHECK_FALSE(marked_a[0].changed);
  CHECK(marked_a[2].changed);
  CHECK(delayd::testing::record_of(redis, keys, a, "x").value_or("").rfind("ready 10 2 ", 0) == 0);
}

// accept.lua adds the pending entries of a batch's new jobs in one ZADD; a batch that creates a
// job and then upserts it, or names it twice, must end as the same jobs accepted one at a time
// (the slow reference: shard B).
TEST_CASE_METHOD(Fixture, "a batch creating and then upserting a job ends as the same jobs accepted one at a time",
                 "[store]") {
  const std::string a = shard_id("delay-ingest", 1), b = shard_id("delay-ingest", 2);
  auto batch = [&](const std::string& sh) {
    std::vector<NewJob> jobs{job("p", 10), job("u", 20), job("p", 30), job("u", 40), job("q", 50), job("u", 60)};
    jobs[1].version = 7;  // u created by an upsert, then moved by a later version, then an older one
    jobs[3].version = 9;
    jobs[5].version = 8;
    for (auto& j : jobs) j.shard = sh;
    return jobs;
  };
  auto dump = [&](const std::string& sh) {
    std::string out;
    for (const auto& id : {"p", "u", "q"})
      out += std::string(id) + "=" + delayd::testing::record_of(redis, keys, sh, id).value_or("<nil>") + ";";
    for (const auto& [id, score] : delayd::testing::pending_entries(redis, keys, sh)) {
      out += id + "," + std::to_string(score) + ",";
    }
    return out;
  };
  const auto together = store.accept(batch(a), 0);
  std::vector<AcceptOutcome> alone;
  for (const auto& j : batch(b)) alone.push_back(store.accept(std::vector<NewJob>{j}, 0).front());
  REQUIRE(together.size() == alone.size());
  for (std::size_t i = 0; i < together.size(); ++i) {
    CHECK(together[i].kind == alone[i].kind);
    CHECK(together[i].state == alone[i].state);
    CHECK(together[i].deliver_at == alone[i].deliver_at);
  }
  CHECK(dump(a) == dump(b));
  CHECK(delayd::testing::pending_score_of(redis, keys, a, "u") == 40);  // the later version's time, not the first's
  CHECK(delayd::testing::pending_score_of(redis, keys, a, "p") == 10);  // the first publish wins
}

TEST_CASE_METHOD(Fixture, "mark_ready with the claim's fields writes the finished record without reading it",
                 "[store]") {
  store.accept(std::vector<NewJob>{job("d1", 10), job("d2", 10)}, 0);
  auto c = store.claim(shard, Ids{"d1", "d2"}, 10);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  const std::vector<JobStore::Delivered> done{{"d1", c[0].deliver_at, c[0].attempt, c[0].business},
                                              {"d2", c[1].deliver_at, c[1].attempt, c[1].business}};
  redis.command({"HDEL", keys.in_flight(shard), "d2"});  // as if lost with Redis's last second
  auto t = store.mark_ready(shard, std::span<const JobStore::Delivered>(done), 12);
  CHECK(t[0].changed);
  CHECK(record("d1") == "ready 10 1 orders ready_at=12\n");
  CHECK(ttl("d1") > 3500);
  CHECK(store.stats().by_business_state["orders"]["ready"] == 1);
  // Without the claim's entry nothing says which delivery d2 waits for: it stays delay, and is
  // claimed and delivered again (a duplicate after Redis lost a write, never a loss).
  CHECK_FALSE(t[1].changed);
  CHECK(t[1].state == JobState::delay);
  CHECK(pending() == std::vector<PendingEntry>{{"d2", 10}});
  CHECK(store.claim(shard, Ids{"d2"}, 13)[0].attempt == 1);
  auto again = store.mark_ready(shard, std::span<const JobStore::Delivered>(done), 13);  // a duplicate ack
  CHECK_FALSE(again[0].changed);
  CHECK(again[1].changed);  // the new claim's entry names attempt 1 again
  CHECK(record("d1") == "ready 10 1 orders ready_at=12\n");
  CHECK(pending().empty());
}

TEST_CASE_METHOD(Fixture, "an entry whose job is already finished is dropped by the claim that meets it",
                 "[store][crash]") {
  store.accept(std::vector<NewJob>{job("z", 10)}, 0);
  set_record("z", "ready 10 1 orders ready_at=11\n");  // by hand: finished, entry left behind
  REQUIRE(pending().size() == 1);
  auto c = store.claim(shard, Ids{"z"}, 20, 0, std::vector<std::int64_t>{10});  // as the loader read it
  CHECK(c[0].kind == Claim::Kind::finished);
  CHECK(c[0].state == JobState::ready);
  CHECK(pending().empty());
}

TEST_CASE_METHOD(Fixture,
                 "cancel wins before delivery, loses in flight and after, and wins again after a failed attempt",
                 "[store][cancel]") {
  std::vector<NewJob> jobs{job("k1", 100), job("k2", 100), job("k3", 100)};
  store.accept(jobs, 0);

  auto t = store.cancel(shard, "k1", 50);
  CHECK(t.changed);
  CHECK(t.state == JobState::cancelled);
  CHECK(field("k1", "state") == "cancelled");
  CHECK(field("k1", "cancelled_at") == "50");
  CHECK(store.claim(shard, Ids{"k1"}, 100)[0].kind == Claim::Kind::finished);

  store.claim(shard, Ids{"k2"}, 100);
  t = store.cancel(shard, "k2", 101);
  CHECK_FALSE(t.changed);
  CHECK(t.state == JobState::in_flight);
  CHECK(field("k2", "state") == "delay");
  store.release(shard, "k2", "broker down", 1000 + 4000, {}, 1000);
  CHECK(field("k2", "last_error") == "broker down");                         // free text survives the record's one line
  CHECK(field("k2", "history") == "1000 retry 1 broker down");               // stamped with the caller's now
  CHECK(field("k2", "deliver_at") == "100");                                 // the record keeps its deliver-at
  CHECK(pending() == std::vector<PendingEntry>{{"k3", 100}, {"k2", 5000}});  // k1 was cancelled
  CHECK(delayd::testing::pending_score_of(redis, keys, shard, "k2") == 5000);  // the retry waits in Redis as well
  CHECK(field("k2", "not_before") == "5000");                                  // and its record says where
  CHECK(misplaced() == Ids{});
  t = store.cancel(shard, "k2", 102);
  CHECK(t.changed);

  store.claim(shard, Ids{"k3"}, 100);
  store.mark_ready(shard, Ids{"k3"}, 100);
  t = store.cancel(shard, "k3", 200);
  CHECK_FALSE(t.changed);
  CHECK(t.state == JobState::ready);
  CHECK(field("k3", "state") == "ready");

  CHECK(store.cancel(shard, "never-existed", 1).state == JobState::missing);
  CHECK_FALSE(has_payload("k1"));
  CHECK(pending().empty());
}

TEST_CASE_METHOD(Fixture, "mark_failed records the reason and removes the entry", "[store]") {
  store.accept(std::vector<NewJob>{job("f", 1)}, 0);
  store.claim(shard, Ids{"f"}, 1);
  auto t = store.mark_failed(shard, "f", "topic ready.orders does not exist\n(100%)", 9);
  CHECK(t.changed);
  CHECK(field("f", "state") == "failed");
  CHECK(field("f", "error") == "topic ready.orders does not exist\n(100%)");
  // h=1: a failure is always written to the job's history too.
  CHECK(record("f") ==
        "failed 1 1 orders failed_at=9 error=topic%20ready.orders%20does%20not%20exist%0A(100%25) h=1\n");
  CHECK(pending().empty());
  const auto fields = store.get("f");
  REQUIRE(fields);
  CHECK(fields->at("history") == "9 dead 1 topic ready.orders does not exist (100%)");
}

TEST_CASE_METHOD(Fixture, "a due job whose payload does not decode is reported, not delivered empty", "[store]") {
  store.accept(std::vector<NewJob>{job("p", 5)}, 0);
  set_record("p", std::string("delay 5 0 orders\n\x05"
                              "abc",
                              21));
  auto c = store.claim(shard, Ids{"p"}, 5);
  CHECK(c[0].kind == Claim::Kind::corrupt);
  CHECK_FALSE(c[0].marked_failed);
  CHECK(c[0].reason.rfind("corrupt job record: payload unreadable: ", 0) == 0);
  store.set_aside(shard, c, 6);
  CHECK(field("p", "state") == "failed");
  CHECK(field("p", "error") == c[0].reason);
  CHECK(pending().empty());
}

TEST_CASE_METHOD(Fixture, "scripts flushed from Redis are loaded again transparently", "[store]") {
  // Both ways of calling them: the function library (the default) and EVAL scripts.
  const ScriptCalls calls = GENERATE(ScriptCalls::functions, ScriptCalls::eval);
  JobStore s(redis, keys, 3600, calls);
  REQUIRE(s.script_calls() == calls);
  const std::string id = calls == ScriptCalls::functions ? "f" : "e";
  delayd::testing::lose_scripts(redis);
  auto out = s.accept(std::vector<NewJob>{job(id, 5)}, 0);
  CHECK(out[0].created());
  CHECK(field(id, "state") == "delay");
  // A claim is a script call followed by the reads of its records: both are sent again, in order.
  delayd::testing::lose_scripts(redis);
  const auto claimed = s.claim(shard, Ids{id}, 5);
  REQUIRE(claimed.size() == 1);
  CHECK(claimed[0].kind == Claim::Kind::deliver);
  CHECK(claimed[0].value == "v-" + id);  // the record read right after the call that ran
  // The single call that takes a shard's fence.
  delayd::testing::lose_scripts(redis);
  CHECK(s.take_shard(shard, 10) >= 1);
}

TEST_CASE_METHOD(Fixture, "a user the ACL denies FUNCTION gets the scripts as EVAL, with the same outcomes",
                 "[store]") {
  // A Redis before 7 has no FUNCTION either; both fall back the same way (JobStore()).
  const std::string user = "delayd-nofn-" + keys.prefix();
  REQUIRE(redis.command({"ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all", "-function"}).view().is_string());
  struct DropUser {
    RedisConnection& redis;
    std::string user;
    ~DropUser() {
      try {
        redis.command({"ACL", "DELUSER", user});
      } catch (...) {  // the test's result matters more than its clean-up
      }
    }
  } drop{redis, user};
  auto options = delayd::testing::redis_options(delayd::testing::require_env("REDIS_URL"));
  options.user = user;
  options.password = "pw";
  RedisConnection limited(options);
  JobStore eval_store(limited, keys, 3600);
  CHECK(eval_store.script_calls() == ScriptCalls::eval);
  CHECK(store.script_calls() == ScriptCalls::functions);
  // The same lives through each: accept, claim, mark ready; the records end alike.
  for (JobStore* s : {&store, &eval_store}) {
    const std::string id = s == &store ? "by-function" : "by-eval";
    CHECK(s->accept(std::vector<NewJob>{job(id, 5)}, 0)[0].created());
    const auto claimed = s->claim(shard, Ids{id}, 5);
    REQUIRE(claimed.size() == 1);
    CHECK(claimed[0].kind == Claim::Kind::deliver);
    CHECK(s->mark_ready(shard, Ids{id}, 6)[0].changed);
  }
  CHECK(record("by-function") == record("by-eval"));
  CHECK(field("by-eval", "state") == "ready");
  CHECK(store.stats().by_business_state["orders"]["ready"] == 2);
}

namespace {

// A Redis client that passes every command on and notes the first two words of each.
class Noting final : public RedisClient {
 public:
  explicit Noting(RedisClient& real) : real_(real) {}
  RedisReply command(const Command& argv) override {
    note(argv);
    return real_.command(argv);
  }
  std::vector<RedisReply> pipeline(const std::vector<Command>& commands) override {
    for (const auto& c : commands) note(c);
    return real_.pipeline(commands);
  }
  std::vector<RedisReply> command_on_every_server(const Command& argv) override {
    note(argv);
    return real_.command_on_every_server(argv);
  }
  void post(const std::vector<Command>& commands) override {
    for (const auto& c : commands) note(c);
    real_.post(commands);
  }
  std::vector<RedisReply> collect() override { return real_.collect(); }
  void abandon() noexcept override { real_.abandon(); }
  void wait_replicas(int replicas, int timeout_ms) override { real_.wait_replicas(replicas, timeout_ms); }
  std::size_t sent(const std::string& words) const {
    return static_cast<std::size_t>(std::count(sent_.begin(), sent_.end(), words));
  }

 private:
  void note(const Command& c) { sent_.push_back(c.empty() ? "" : c.size() == 1 ? c[0] : c[0] + " " + c[1]); }
  RedisClient& real_;
  std::vector<std::string> sent_;
};

}  // namespace

TEST_CASE_METHOD(Fixture, "a store made where the library is loaded asks, and loads nothing", "[store]") {
  // The fixture's store loaded it. A LOAD of a library Redis has is refused, and Redis counts that
  // as a failed call and an error (INFO commandstats, errorstats): a new store asks first.
  REQUIRE(store.script_calls() == ScriptCalls::functions);
  Noting noting(redis);
  JobStore s(noting, keys, 3600);
  CHECK(s.script_calls() == ScriptCalls::functions);
  CHECK(noting.sent("FUNCTION LIST") == 1);
  CHECK(noting.sent("FUNCTION LOAD") == 0);
  CHECK(s.accept(std::vector<NewJob>{job("asked", 5)}, 0)[0].created());
  CHECK(noting.sent("FCALL " + lua::function_name(lua::info(lua::Script::accept))) == 1);
}

TEST_CASE_METHOD(Fixture, "posted accepts do what accept() does, in the order they were posted", "[store][post]") {
  // Two posts in flight at once (the ingest stage's send-ahead); the second repeats an id of the
  // first with another time: Redis runs them in order, so the first publish wins, as with accept().
  std::vector<NewJob> first{job("p1", 2000), job("p2", 1000)};
  NewJob later = job("p1", 9000);
  later.value = "other";
  std::vector<NewJob> second{later, job("p3", 3000)};
  auto a = store.accept_post(first, 500);
  auto b = store.accept_post(second, 501);
  const auto out_a = store.accept_collect(a);
  const auto out_b = store.accept_collect(b);
  REQUIRE(out_a.size() == 2);
  REQUIRE(out_b.size() == 2);
  CHECK(out_a[0].created());
  CHECK(out_a[1].created());
  CHECK(out_b[0].kind == AcceptKind::existed);
  CHECK(out_b[0].deliver_at == 2000);
  CHECK(out_b[1].created());
  CHECK(field("p1", "value") == "v-p1");
  CHECK(pending() == std::vector<PendingEntry>{{"p2", 1000}, {"p1", 2000}, {"p3", 3000}});
  // The post registered the shard, as accept() does.
  auto members = redis.command({"SMEMBERS", keys.shards()});
  REQUIRE(members.view().size() == 1);
  CHECK(members.view()[0].str() == shard);
  CHECK(store.stats().by_business_state["orders"]["delay"] == 3);

  // Scripts lost before a post ran: an I/O error (the caller posts again), and the scripts are back.
  delayd::testing::lose_scripts(redis);
  auto lost = store.accept_post(std::vector<NewJob>{job("p4", 4000)}, 502);
  CHECK_THROWS_AS(store.accept_collect(lost), delayd::redis::RedisIoError);
  CHECK(pending().size() == 3);  // p4 was not written
  auto again = store.accept_post(std::vector<NewJob>{job("p4", 4000)}, 503);
  CHECK(store.accept_collect(again)[0].created());
  // Abandoned posts leave the store usable at once.
  [[maybe_unused]] auto dropped = store.accept_post(std::vector<NewJob>{job("p5", 5000)}, 504);
  store.abandon_posts();
  CHECK(store.accept(std::vector<NewJob>{job("p5", 5000)}, 505)[0].state == JobState::delay);
  CHECK(field("p5", "deliver_at") == "5000");
}

TEST_CASE_METHOD(Fixture, "stats count pending entries, the next due time and transitions per business",
                 "[store][stats]") {
  std::vector<NewJob> jobs{job("s1", 300, "orders"), job("s2", 200, "orders"), job("s3", 900, "mail")};
  store.accept(jobs, 0);
  store.cancel(shard, "s3", 1);
  store.claim(shard, Ids{"s2"}, 200);
  store.mark_ready(shard, Ids{"s2"}, 201);
  auto s = store.stats();
  CHECK(s.pending == 1);
  CHECK(s.next_due == std::optional<std::int64_t>(300));
  CHECK(s.by_business_state["orders"]["delay"] == 1);
  CHECK(s.by_business_state["orders"]["ready"] == 1);
  CHECK(s.by_business_state["mail"]["delay"] == 0);
  CHECK(s.by_business_state["mail"]["cancelled"] == 1);
}

TEST_CASE_METHOD(Fixture,
                 "a release after an outage refunds the attempt, and a possibly written one keeps the job in flight",
                 "[store]") {
  store.accept(std::vector<NewJob>{job("o", 5), job("p", 5)}, 0);
  store.claim(shard, Ids{"o", "p"}, 5);
  CHECK(field("o", "attempt") == "1");
  store.release(shard, "o", "timed out before sending", 100, {.refund = true, .keep_firing = false}, 1000);
  CHECK(field("o", "attempt") == "0");
  CHECK(field("o", "firing_at") == "<nil>");
  store.release(shard, "p", "timed out in flight", 100, {.refund = true, .keep_firing = true}, 1000);
  CHECK(field("p", "attempt") == "0");
  CHECK(field("p", "firing_at") == "5");
  CHECK(store.cancel(shard, "p", 50).state == JobState::in_flight);  // no cancel can win against a maybe-written record
  CHECK(misplaced() == Ids{});                                       // both wait at their retry time, written as nb
  CHECK(store.cancel(shard, "o", 50).changed);
}

TEST_CASE_METHOD(Fixture,
                 "a cancel for an unknown id is remembered, and the job arriving later is accepted as cancelled",
                 "[store][cancel]") {
  CHECK(store.cancel(shard, "early", 100, 300).state == JobState::missing);
  CHECK(field("early", "state") == "cancelled");
  CHECK(field("early", "cancelled_early") == "1");
  const auto remembered = ttl("early");
  CHECK(remembered > 0);
  CHECK(remembered <= 300);
  auto out = store.accept(std::vector<NewJob>{job("early", 5000)}, 200);
  CHECK_FALSE(out[0].created());
  CHECK(out[0].kind == AcceptKind::cancelled_early);
  CHECK(out[0].state == JobState::cancelled);
  CHECK(field("early", "deliver_at") == "5000");  // filled in, for people and delayctl get
  CHECK(field("early", "business") == "orders");
  CHECK(pending().empty());  // never to be delivered
  CHECK_FALSE(has_payload("early"));
  CHECK(ttl("early") > 3000);  // the job's retention now
  CHECK(store.stats().by_business_state["orders"]["cancelled"] == 1);
  auto again = store.accept(std::vector<NewJob>{job("early", 5000)}, 300);  // a replay: just a duplicate
  CHECK(again[0].kind != AcceptKind::cancelled_early);
  CHECK(again[0].state == JobState::cancelled);

  CHECK(store.cancel(shard, "not-remembered", 100, 0).state == JobState::missing);
  CHECK(field("not-remembered", "state") == "<nil>");
}

TEST_CASE_METHOD(Fixture, "due_counts counts pending jobs per window, the first one with what is overdue", "[store]") {
  store.accept(std::vector<NewJob>{job("o", 5), job("a", 100), job("b", 150), job("c", 200), job("d", 900)}, 0);
  store.cancel(shard, "b", 1);  // no longer pending
  const std::vector<std::int64_t> bounds{100, 200, 500};
  CHECK(store.due_counts(bounds) == std::vector<std::int64_t>{2, 1, 0});  // "d" lies beyond the last window
}
