// JobStore against the real Redis of the local stack. Each test works under its own key prefix.
// Records damaged by hand stand for what a person, a bug or a half-restored backup could leave.
#include "storage/job_store.hpp"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redis/url.hpp"
#include "storage/header_codec.hpp"
#include "storage/job_record.hpp"
#include "storage/payload_compression.hpp"
#include "support/job_records.hpp"
#include "support/pending_entries.hpp"
#include "support/redis_cleanup.hpp"
#include "support/redis_connect.hpp"
#include "support/test_env.hpp"

using namespace delayd::storage;
using namespace delayd::redis;

namespace {

using Ids = std::vector<std::string>;

struct Fixture {
  RedisConnection redis{delayd::testing::redis_options(delayd::testing::require_env("REDIS_URL"))};
  KeySchema keys{delayd::testing::unique_name("t")};
  JobStore store{redis, keys, 3600};
  const std::string shard = shard_id("delay-ingest", 0);

  NewJob job(const std::string& id, std::int64_t at, std::string business = "orders") {
    NewJob j;
    j.job_id = id;
    j.deliver_at = at;
    j.business = business;
    j.shard = shard;
    j.key = "k-" + id;
    j.value = "v-" + id;
    j.headers = {{"trace", "abc"}, {"nullh", std::nullopt}};
    return j;
  }
  std::vector<PendingEntry> pending() { return store.pending_between(shard, std::nullopt, INT64_MAX, 1000); }
  // A field as store.get() (and so delayctl get) shows it; "<nil>" if absent.
  std::string field(const std::string& id, const std::string& f) {
    auto job = store.get(id);
    if (!job || !job->count(f)) return "<nil>";
    return job->at(f);
  }
  bool has_payload(const std::string& id) { return field(id, "headers") != "<nil>"; }
  // The record as a person sees it with redis-cli HGET (a delay job's) or GET (any other's).
  std::string record(const std::string& id) {
    return delayd::testing::record_of(redis, keys, shard, id).value_or("<nil>");
  }
  void set_record(const std::string& id, const std::string& v) {
    delayd::testing::put_record(redis, keys, shard, id, v);
  }
  // The record's time to live in seconds: -1 in the shard's hash (a delay record never expires),
  // else its key's TTL (-2: no record).
  std::int64_t ttl(const std::string& id) {
    if (redis.command({"HEXISTS", keys.delay_records(shard), id}).view().integer() == 1) return -1;
    return redis.command({"TTL", keys.job(shard, id)}).view().integer();
  }
  // Every job of the shard whose pending entry is not where its record says (pending_score():
  // at the later of deliver_at and nb for a delay job, at nb for a ready or running one, none
  // otherwise), as "<id>: entry <score or none>, record '<line>'"; empty when all agree.
  std::vector<std::string> misplaced() {
    std::map<std::string, std::string> entries;
    for (const auto& [id, score] : delayd::testing::pending_entries(redis, keys, shard)) {
      entries[id] = std::to_string(score);
    }
    std::vector<std::string> out;
    for (const std::string& id : delayd::testing::record_ids(redis, keys, shard)) {
      const std::string line = record(id).substr(0, record(id).find('\n'));
      const auto r = parse_job_record(record(id));
      const auto want = r ? pending_score(*r) : std::nullopt;
      const auto it = entries.find(id);
      const std::string have = it == entries.end() ? "none" : it->second;
      if (have != (want ? std::to_string(*want) : "none"))
        out.push_back(id + ": entry " + have + ", record '" + line + "'");
      if (it != entries.end()) entries.erase(it);
    }
    for (const auto& [id, score] : entries) out.push_back(id + ": entry " + score + ", no record");
    return out;
  }
  ~Fixture() { delayd::testing::delete_prefixed_keys(redis, keys.prefix()); }
};

}  // namespace

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
  redis.command({"SCRIPT", "FLUSH"});
  auto out = store.accept(std::vector<NewJob>{job("s", 5)}, 0);
  CHECK(out[0].created());
  CHECK(pending().size() == 1);
  // A claim is a script call followed by the reads of its records: both are sent again, in order.
  redis.command({"SCRIPT", "FLUSH"});
  const auto claimed = store.claim(shard, Ids{"s"}, 5);
  REQUIRE(claimed.size() == 1);
  CHECK(claimed[0].kind == Claim::Kind::deliver);
  CHECK(claimed[0].value == "v-s");  // the record read right after the call that ran
  // The single call that takes a shard's fence.
  redis.command({"SCRIPT", "FLUSH"});
  CHECK(store.take_shard(shard, 10) >= 1);
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
  redis.command({"SCRIPT", "FLUSH"});
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

// The leaves (prelude.lua) under every kind of write, in random order: many jobs of one
// millisecond (ties ordered by id across leaves), batches that fill and split leaves, cancels
// that empty them, moves, and deliveries from the front. After each round the entries are the
// model's and the leaves' invariants hold, checked the slow way.
TEST_CASE_METHOD(Fixture, "the pending set's leaves hold every entry in order, at most kPendingLeafMax each",
                 "[store][leaves]") {
  std::mt19937_64 rng(11);
  std::set<std::pair<std::int64_t, std::string>> model;  // (score, job-id): Redis's order
  std::map<std::string, std::int64_t> at;
  auto time = [&] { return 1000 + static_cast<std::int64_t>(rng() % 40); };
  int next = 0;
  std::size_t most = 0;
  for (int round = 0; round < 30; ++round) {
    std::vector<NewJob> jobs;
    const int n = static_cast<int>(rng() % 400) + 1;
    for (int i = 0; i < n; ++i) {
      const std::string id = "j" + std::to_string(rng() % 1000) + "-" + std::to_string(next++);
      jobs.push_back(job(id, time()));
      model.insert({jobs.back().deliver_at, id});
      at[id] = jobs.back().deliver_at;
    }
    store.accept(jobs, 0);
    std::vector<std::string> ids;
    for (const auto& [id, t] : at) ids.push_back(id);
    std::shuffle(ids.begin(), ids.end(), rng);
    for (std::size_t k = 0; k < std::min<std::size_t>(ids.size(), 60); ++k) {
      const std::string& id = ids[k];
      model.erase({at[id], id});
      if (k % 3 == 0) {
        REQUIRE(store.cancel(shard, id, 1).changed);
        at.erase(id);
      } else {
        at[id] = time();
        REQUIRE(store.reschedule_anywhere(shard, id, at[id], 1).changed);
        model.insert({at[id], id});
      }
    }
    // The earliest due are claimed and marked ready, as the fire path does.
    Ids due;
    for (auto it = model.begin(); it != model.end() && due.size() < 50; ++it) due.push_back(it->second);
    const auto claims = store.claim(shard, due, 2000);
    std::vector<JobStore::Delivered> done;
    for (const auto& c : claims) {
      REQUIRE(c.kind == Claim::Kind::deliver);
      done.push_back({c.job_id, c.deliver_at, c.attempt, c.business});
      model.erase({at[c.job_id], c.job_id});
      at.erase(c.job_id);
    }
    store.mark_ready(shard, std::span<const JobStore::Delivered>(done), 2000);
    std::vector<PendingEntry> want;
    for (const auto& [t, id] : model) want.push_back({id, t});
    CHECK(store.pending_between(shard, std::nullopt, INT64_MAX, 0) == want);
    CHECK(delayd::testing::pending_leaf_violations(redis, keys, shard) == Ids{});
    CHECK(store.stats().pending == static_cast<std::int64_t>(model.size()));
    most = std::max(most, model.size());
  }
  CHECK(most > 4 * delayd::storage::kPendingLeafMax);  // the rounds made many leaves
  CHECK(misplaced() == Ids{});
}

// An upgrade from 0.3, whose pending set was one sorted set and whose records were all keys: the
// loader's first read moves the set into leaves, a chunk per call, the delay records into the
// shard's hash, and gives records the time of their entry where they did not name it (nb:
// written by 0.3 only for a failed report's retry). Meanwhile every script finds entries still
// in the old set, and records still in keys.
TEST_CASE_METHOD(Fixture, "a 0.3 pending set is moved into leaves at the first load, whole, and its entries stay found",
                 "[store][leaves][upgrade]") {
  const std::string payload = delayd::storage::encode_payload({std::nullopt, "v", {}});
  auto old_job = [&](const std::string& id, const std::string& line, std::int64_t score) {
    redis.command({"SET", keys.job(shard, id), line + "\n" + payload});  // 0.3: every record a key
    redis.command({"ZADD", keys.pending_0_3(shard), std::to_string(score), id});
  };
  auto in_hash = [&](const std::string& id) {
    return redis.command({"HEXISTS", keys.delay_records(shard), id}).view().integer() == 1;
  };
  auto in_key = [&](const std::string& id) {
    return redis.command({"EXISTS", keys.job(shard, id)}).view().integer() == 1;
  };
  redis.command({"SADD", keys.shards(), shard});
  constexpr int kPlain = 4500;  // more than one chunk of pending.lua's move
  for (int i = 0; i < kPlain; ++i)
    old_job("p" + std::to_string(i), "delay " + std::to_string(100 + i % 700) + " 0 orders", 100 + i % 700);
  old_job("retry", "delay 100 1 orders last_error=down", 9000);  // a failed produce's retry, at 9000
  old_job("acked", "ready 100 1 orders ready_at=150", 7000);     // its ack deadline, 7000
  old_job("cancel-me", "delay 5000 0 orders", 5000);
  old_job("twice", "delay 300 0 orders", 300);
  // Before the move: a cancel finds the entry in the old set, and the record in its key; a
  // publish of a job whose record is still a key is not a new job; a look-up finds the record.
  CHECK(store.cancel(shard, "cancel-me", 1).changed);
  auto again = job("twice", 999);
  again.shard = shard;
  CHECK(store.accept(std::vector<NewJob>{again}, 0)[0].kind == AcceptKind::existed);
  CHECK(field("twice", "deliver_at") == "300");
  CHECK(store.shards_holding("p1", "") == std::vector<std::string>{shard});
  CHECK(store.locate(Ids{"p1"})[0]->business == "orders");
  const auto loaded = store.pending_between(shard, std::nullopt, INT64_MAX, 0);
  CHECK(loaded.size() == kPlain + 3);
  CHECK(redis.command({"EXISTS", keys.pending_0_3(shard)}).view().integer() == 0);
  // Every delay record is now in the hash, and its key gone; the others stay keys.
  int moved = 0;
  for (int i = 0; i < kPlain; ++i) moved += in_hash("p" + std::to_string(i)) && !in_key("p" + std::to_string(i));
  CHECK(moved == kPlain);
  CHECK((in_hash("retry") && !in_key("retry") && in_hash("twice")));
  CHECK((in_key("acked") && !in_hash("acked") && in_key("cancel-me") && !in_hash("cancel-me")));
  CHECK(std::is_sorted(loaded.begin(), loaded.end(),
                       [](const PendingEntry& x, const PendingEntry& y) { return x.deliver_at < y.deliver_at; }));
  CHECK(delayd::testing::pending_score_of(redis, keys, shard, "retry") == 9000);
  CHECK(delayd::testing::pending_score_of(redis, keys, shard, "acked") == 7000);
  CHECK(field("retry", "not_before") == "9000");  // the records now say where their entries are
  CHECK(field("acked", "ack_deadline") == "7000");
  CHECK(misplaced() == Ids{});
  CHECK(delayd::testing::pending_leaf_violations(redis, keys, shard) == Ids{});
  CHECK(store.stats().pending == kPlain + 3);
  // And the jobs go on: the retry is claimed at its time, the silent one is delivered again
  // (its record back in the hash, delay), and a plain one with its payload.
  CHECK(store.claim(shard, Ids{"retry"}, 8000)[0].kind == Claim::Kind::early);
  CHECK(store.claim(shard, Ids{"retry"}, 9000)[0].kind == Claim::Kind::deliver);
  const auto acked = store.claim(shard, Ids{"acked"}, 7000);
  CHECK(acked[0].kind == Claim::Kind::deliver);
  CHECK(acked[0].value == "v");
  CHECK((in_hash("acked") && !in_key("acked")));
  const auto plain = store.claim(shard, Ids{"p1"}, 7000);
  CHECK(plain[0].kind == Claim::Kind::deliver);
  CHECK(plain[0].value == "v");
}

// A 0.3 delay record the first load did not meet (no entry in the old set: lost, or put back by
// hand) is moved into the hash by the claim that delivers it, so the claim's read finds it.
TEST_CASE_METHOD(Fixture, "a claim moves a delay record it finds in a key into the shard's hash", "[store][upgrade]") {
  store.accept(std::vector<NewJob>{job("new", 10)}, 0);
  const std::string payload = delayd::storage::encode_payload({std::nullopt, "old-v", {}});
  redis.command({"SET", keys.job(shard, "old"), "delay 10 0 orders\n" + payload});
  delayd::testing::put_pending_entry(redis, keys, shard, "old", 10);
  const auto c = store.claim(shard, Ids{"old", "new"}, 10);
  REQUIRE(c.size() == 2);
  CHECK(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].value == "old-v");
  CHECK(c[1].kind == Claim::Kind::deliver);
  CHECK(redis.command({"EXISTS", keys.job(shard, "old")}).view().integer() == 0);
  store.mark_ready(shard, Ids{"old", "new"}, 11);
  CHECK(record("old") == "ready 10 1 orders ready_at=11\n");
  CHECK(redis.command({"HLEN", keys.delay_records(shard)}).view().integer() == 0);
}

// Where a record is (key_schema.hpp): a field of the shard's hash while the job is delay, a key of
// its own otherwise, never both; each transition moves it.
TEST_CASE_METHOD(Fixture, "a job's record is in the shard's hash while delay and a key of its own otherwise",
                 "[store]") {
  auto place = [&](const std::string& id) {
    const bool h = redis.command({"HEXISTS", keys.delay_records(shard), id}).view().integer() == 1;
    const bool k = redis.command({"EXISTS", keys.job(shard, id)}).view().integer() == 1;
    return std::string(h ? "hash" : "") + (k ? "key" : "");
  };
  store.accept(std::vector<NewJob>{job("a", 10), job("b", 10), job("c", 10)}, 0);
  CHECK(place("a") == "hash");
  CHECK(store.cancel(shard, "c", 1).changed);
  CHECK(place("c") == "key");
  CHECK(ttl("c") > 0);  // a settled record expires
  store.claim(shard, Ids{"a", "b"}, 10);
  CHECK(place("a") == "hash");
  store.mark_ready(shard, Ids{"a"}, 11);  // the fast way
  CHECK(place("a") == "key");
  CHECK(ttl("a") > 0);
  store.release(shard, "b", "broker down", 100, {}, 12);  // back to waiting for a retry: still delay
  CHECK(place("b") == "hash");
  CHECK(store.claim(shard, Ids{"b"}, 100)[0].kind == Claim::Kind::deliver);
  CHECK(store.mark_failed(shard, "b", "gave up", 101).changed);
  CHECK(place("b") == "key");
  CHECK(field("b", "state") == "failed");
  CHECK(misplaced() == Ids{});
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

TEST_CASE_METHOD(Fixture, "due_counts counts pending jobs per window, the first one with what is overdue", "[store]") {
  store.accept(std::vector<NewJob>{job("o", 5), job("a", 100), job("b", 150), job("c", 200), job("d", 900)}, 0);
  store.cancel(shard, "b", 1);  // no longer pending
  const std::vector<std::int64_t> bounds{100, 200, 500};
  CHECK(store.due_counts(bounds) == std::vector<std::int64_t>{2, 1, 0});  // "d" lies beyond the last window
}

// Past 1 000 leaves before a bound (64 000 jobs), pending.lua counts further leaves at the
// shard's average leaf size instead of reading each (the console's timeline must not block
// Redis): an estimate, off by less than one leaf when the leaves are full, as jobs arriving
// in time order leave them.
TEST_CASE_METHOD(Fixture, "due_counts past a thousand leaves is estimated within one leaf", "[store][leaves]") {
  constexpr int kEntries = 70'000;  // at 1..kEntries ms; entries only, no records: counts read no record
  redis.command({"SADD", keys.shards(), shard});
  delayd::testing::checked(redis.command(delayd::testing::prelude_eval(
      keys, shard,
      "local args = {} for i = 1, tonumber(ARGV[5]) do args[2 * i - 1] = i; args[2 * i] = 'e' .. i end "
      "entries_put(args) flush() return 1",
      {std::to_string(kEntries)})));
  const std::vector<std::int64_t> bounds{1'000, 60'000, 66'000, INT64_MAX};
  const auto got = store.due_counts(bounds);
  REQUIRE(got.size() == 4);
  CHECK(got[0] == 1'000);   // 15 leaves before it: read one by one, exact
  CHECK(got[1] == 59'000);  // 937 leaves before it: exact too
  CHECK(std::abs(got[2] - 6'000) < static_cast<std::int64_t>(delayd::storage::kPendingLeafMax));  // 1 031: estimated
  CHECK(got[0] + got[1] + got[2] + got[3] == kEntries);  // the last window takes the rest of the count
  CHECK(store.stats().pending == kEntries);
}

// ---- the job lifecycle (docs/consuming.md, "Job lifecycle"): reports, redelivery, reschedule, repeats ----

namespace {

using Mode = JobStore::Mode;

struct Lifecycle : Fixture {
  // Accepts, claims at `at` and marks ready at `at` in the given mode; returns mark_ready's answer.
  Transition deliver(const std::string& id, std::int64_t at, Mode mode, std::int64_t ack_ms = 0) {
    store.accept(std::vector<NewJob>{job(id, at)}, 0);
    return deliver_again(id, at, mode, ack_ms);
  }
  Transition deliver_again(const std::string& id, std::int64_t now, Mode mode, std::int64_t ack_ms = 0) {
    auto c = store.claim(shard, Ids{id}, now);
    REQUIRE(c[0].kind == Claim::Kind::deliver);
    const JobStore::Delivered d{id, c[0].deliver_at, c[0].attempt, "orders", mode, std::chrono::milliseconds(ack_ms)};
    return store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), now)[0];
  }
  ReportOutcome report(const std::string& id, ReportStatus status, std::int64_t now, std::int64_t retry_at = 0,
                       int max_attempts = 3, std::int64_t ack_ms = 0, int about = 0) {
    Report r{id, status, "boom", retry_at, max_attempts, std::chrono::milliseconds(ack_ms), about};
    const auto where = store.locate(Ids{id});
    const std::vector<std::string> shards{where[0] ? where[0]->shard : std::string()};
    return store.report(std::span<const Report>(&r, 1), shards, now)[0];
  }
  std::optional<std::int64_t> score(const std::string& id) {
    return delayd::testing::pending_score_of(redis, keys, shard, id);
  }
};

}  // namespace

TEST_CASE_METHOD(Lifecycle, "a kept job goes ready, running, finished, and each report is idempotent",
                 "[store][lifecycle]") {
  const auto t = deliver("a", 10, Mode::keep);
  CHECK(t.state == JobState::ready);
  CHECK(has_payload("a"));  // kept for a redelivery
  CHECK_FALSE(score("a"));  // no ack timeout: nothing waits
  CHECK(report("a", ReportStatus::running, 20).state == JobState::running);
  CHECK(field("a", "running_at") == "20");
  CHECK(report("a", ReportStatus::finished, 30).state == JobState::finished);
  CHECK(field("a", "finished_at") == "30");
  CHECK_FALSE(has_payload("a"));
  CHECK(ttl("a") > 0);
  // Late and duplicate reports change nothing.
  CHECK(report("a", ReportStatus::running, 40).verdict == ReportOutcome::Verdict::ignored);
  CHECK(report("a", ReportStatus::finished, 40).verdict == ReportOutcome::Verdict::ignored);
  CHECK(field("a", "state") == "finished");
  CHECK(field("a", "history") == "10 delivered 1 \n20 running 1 \n30 finished 1 ");
}

TEST_CASE_METHOD(Lifecycle, "reports that do not fit are ignored, unknown ids are unknown", "[store][lifecycle]") {
  store.accept(std::vector<NewJob>{job("d", 100)}, 0);
  CHECK(report("d", ReportStatus::finished, 5).verdict == ReportOutcome::Verdict::ignored);
  CHECK(field("d", "state") == "delay");
  CHECK(report("nobody", ReportStatus::running, 5).verdict == ReportOutcome::Verdict::unknown);
  CHECK_FALSE(store.locate(Ids{"nobody"})[0]);
}

TEST_CASE_METHOD(Lifecycle, "a failed report goes round again at the retry time, then dead on the last attempt",
                 "[store][lifecycle]") {
  deliver("f", 10, Mode::keep);
  const auto o = report("f", ReportStatus::failed, 20, 500, 2);
  CHECK(o.verdict == ReportOutcome::Verdict::applied);
  CHECK(o.state == JobState::delay);
  CHECK_FALSE(o.dead);
  CHECK(o.due_at == 500);
  CHECK(score("f") == 500);
  CHECK(field("f", "not_before") == "500");
  CHECK(field("f", "last_error") == "boom");
  CHECK(misplaced() == Ids{});
  // A replay of its ingest record re-adds a lost entry where the record says: at the retry
  // time, not at its long-passed deliver_at.
  REQUIRE(delayd::testing::drop_pending_entry(redis, keys, shard, "f", 500));
  store.accept(std::vector<NewJob>{job("f", 10)}, 0);
  CHECK(score("f") == 500);
  // The owner is told through the wake list.
  const auto woken = store.take_wakes(std::vector<std::string>{shard});
  REQUIRE(woken.size() == 1);
  CHECK(woken[0].second == std::vector<PendingEntry>{{"f", 500}});
  CHECK(store.take_wakes(std::vector<std::string>{shard}).empty());
  // Never before the retry time, although deliver_at has long passed.
  CHECK(store.claim(shard, Ids{"f"}, 400)[0].kind == Claim::Kind::early);
  auto c = store.claim(shard, Ids{"f"}, 500);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].attempt == 2);
  CHECK(c[0].not_before == 500);
  CHECK_FALSE(c[0].plain);
  CHECK(c[0].dead_reason.empty());
  const JobStore::Delivered d{"f", c[0].deliver_at, 2, "orders", Mode::keep, {}};
  store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 510);
  // A report about delivery 1 (a replay, or a slow consumer) does not touch delivery 2.
  CHECK(report("f", ReportStatus::failed, 520, 5000, 2, 0, 1).verdict == ReportOutcome::Verdict::ignored);
  CHECK(field("f", "state") == "ready");
  // Attempt 2 of 2 fails: due at once, marked dead for the owner's claim to dead-letter.
  const auto last = report("f", ReportStatus::failed, 600, 5000, 2);
  CHECK(last.dead);
  CHECK(score("f") == 600);
  c = store.claim(shard, Ids{"f"}, 600);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].dead_reason == "reported failed after 2 attempts: boom");
  CHECK(misplaced() == Ids{});
  store.mark_failed(shard, "f", c[0].dead_reason, 610);
  CHECK(field("f", "state") == "failed");
  CHECK(misplaced() == Ids{});
  CHECK(field("f", "error") == "reported failed after 2 attempts: boom");
}

TEST_CASE_METHOD(Lifecycle, "a failed report for a business that keeps no payload fails the job at once",
                 "[store][lifecycle]") {
  deliver("n", 10, Mode::fast);
  const auto o = report("n", ReportStatus::failed, 20, 500, 5);
  CHECK(o.state == JobState::failed);
  CHECK(field("n", "state") == "failed");
  CHECK(field("n", "error").find("scheduler.keep_payload") != std::string::npos);
  CHECK_FALSE(score("n"));
}

TEST_CASE_METHOD(Lifecycle, "an ack timeout redelivers a silent job and running reports push the deadline",
                 "[store][lifecycle]") {
  const auto t = deliver("s", 10, Mode::keep, 1000);
  CHECK(t.at == 1010);
  CHECK(score("s") == 1010);
  CHECK(field("s", "ack_deadline") == "1010");  // the record says where its entry waits
  CHECK(misplaced() == Ids{});
  CHECK(store.claim(shard, Ids{"s"}, 900)[0].kind == Claim::Kind::early);
  report("s", ReportStatus::running, 900, 0, 3, 1000);
  CHECK(score("s") == 1900);  // a heartbeat
  CHECK(field("s", "ack_deadline") == "1900");
  CHECK(misplaced() == Ids{});
  CHECK(store.claim(shard, Ids{"s"}, 1500)[0].kind == Claim::Kind::early);
  auto c = store.claim(shard, Ids{"s"}, 1900);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].redelivery);
  CHECK(c[0].attempt == 2);
  CHECK(c[0].value == std::optional<std::string>("v-s"));
  CHECK(field("s", "redelivered") == "1");
  CHECK(field("s", "history").find("redelivered 1 no report within the ack timeout") != std::string::npos);
  CHECK(field("s", "not_before") == "1900");  // delay again, its entry still at the deadline that passed
  CHECK(misplaced() == Ids{});
  // Reported finished: nothing waits any more.
  const JobStore::Delivered d{"s", c[0].deliver_at, 2, "orders", Mode::keep, std::chrono::milliseconds(1000)};
  store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 1950);
  CHECK(score("s") == 2950);
  CHECK(misplaced() == Ids{});
  report("s", ReportStatus::finished, 2000);
  CHECK_FALSE(score("s"));
  CHECK(field("s", "state") == "finished");
  CHECK(field("s", "ack_deadline") == "<nil>");
  CHECK(misplaced() == Ids{});
}

TEST_CASE_METHOD(Lifecycle, "a failure that finds the job delivered already leaves its ack deadline in place",
                 "[store][lifecycle]") {
  // A dead-letter verdict can come back after the job was marked ready (a late report of an
  // earlier produce): the job stays ready, and its consumer's silence must still redeliver it.
  const auto t = deliver("late", 10, Mode::keep, 1000);
  REQUIRE(score("late") == t.at);
  const auto f = store.mark_failed(shard, "late", "gave up", 500);
  CHECK_FALSE(f.changed);
  CHECK(f.state == JobState::ready);
  CHECK(score("late") == t.at);
  CHECK(misplaced() == Ids{});
  const auto c = store.claim(shard, Ids{"late"}, t.at);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].redelivery);
}

TEST_CASE_METHOD(Lifecycle, "an operator's retry of a failed job waits at its not-before time, now",
                 "[store][lifecycle]") {
  deliver("o", 10, Mode::keep);
  report("o", ReportStatus::failed, 20, 30, 1);  // out of attempts: due at once, marked dead
  auto c = store.claim(shard, Ids{"o"}, 30);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  store.mark_failed(shard, "o", c[0].dead_reason, 40, std::nullopt, true);
  REQUIRE(field("o", "state") == "failed");
  CHECK(store.retry_anywhere("o", 5000).changed);
  CHECK(field("o", "state") == "delay");
  CHECK(field("o", "not_before") == "5000");
  CHECK(score("o") == 5000);  // where the console lists it, not at its deliver_at of long ago
  CHECK(misplaced() == Ids{});
  c = store.claim(shard, Ids{"o"}, 5000);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].not_before == 5000);
}

TEST_CASE_METHOD(Lifecycle, "silence after the last attempt dead-letters the job instead of delivering it again",
                 "[store][lifecycle]") {
  store.accept(std::vector<NewJob>{job("z", 10)}, 0);
  auto c = store.claim(shard, Ids{"z"}, 10);
  JobStore::Delivered d{"z", 10, 1, "orders", Mode::keep, std::chrono::milliseconds(100), 2};
  store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 10);
  c = store.claim(shard, Ids{"z"}, 110);  // silence: delivery 2 of 2
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].attempt == 2);
  CHECK(c[0].dead_reason.empty());
  d.attempt = 2;
  store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 120);
  c = store.claim(shard, Ids{"z"}, 220);  // silence again: out of attempts
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].redelivery);
  CHECK(c[0].attempt == 2);  // no delivery is added for the dead letter
  CHECK(c[0].dead_reason == "no report within the ack timeout after 2 deliveries");
  CHECK(field("z", "redelivered") == "1");
  CHECK(misplaced() == Ids{});
  store.mark_failed(shard, "z", c[0].dead_reason, 230);
  CHECK(field("z", "state") == "failed");
  CHECK(field("z", "attempt") == "2");
  CHECK(misplaced() == Ids{});
}

TEST_CASE_METHOD(Lifecycle, "a job's history keeps its last hundred lines", "[store][lifecycle]") {
  store.accept(std::vector<NewJob>{job("h", 5000)}, 0);
  for (int i = 1; i <= 103; ++i) REQUIRE(store.reschedule_anywhere(shard, "h", 5000 + i, i).changed);
  const auto history = redis.command({"LRANGE", keys.history(shard, "h"), "0", "-1"});
  REQUIRE(history.view().size() == 100);
  CHECK(std::string(history.view()[0].str()) == "4 rescheduled 0 from%205003%20to%205004");  // the first three left
  CHECK(std::string(history.view()[99].str()) == "103 rescheduled 0 from%205102%20to%205103");
}

TEST_CASE_METHOD(Lifecycle, "reschedule moves a waiting job, not one in flight", "[store][lifecycle]") {
  store.accept(std::vector<NewJob>{job("r", 5000), job("q", 100)}, 0);
  auto t = store.reschedule_anywhere(shard, "r", 200, 10);
  CHECK(t.changed);
  CHECK(score("r") == 200);
  CHECK(field("r", "deliver_at") == "200");
  CHECK(store.claim(shard, Ids{"r"}, 150)[0].kind == Claim::Kind::early);
  store.claim(shard, Ids{"q"}, 100);
  t = store.reschedule_anywhere(shard, "q", 9000, 110);
  CHECK_FALSE(t.changed);
  CHECK(t.state == JobState::in_flight);
  CHECK(store.reschedule_anywhere(shard, "none", 9000, 110).state == JobState::missing);
  CHECK(misplaced() == Ids{});
  const auto woken = store.take_wakes(std::vector<std::string>{shard});
  REQUIRE(woken.size() == 1);
  CHECK(woken[0].second == std::vector<PendingEntry>{{"r", 200}});
}

TEST_CASE_METHOD(Lifecycle, "a repeating job comes back on its grid, skips what passed, and stops at its count",
                 "[store][lifecycle]") {
  NewJob j = job("p", 1000);
  j.repeat.every = std::chrono::milliseconds(500);
  j.repeat.count = 4;
  store.accept(std::vector<NewJob>{j}, 0);
  auto c = store.claim(shard, Ids{"p"}, 1000);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].repeat == 1);
  CHECK_FALSE(c[0].plain);
  JobStore::Delivered d{"p", 1000, c[0].attempt, "orders", Mode::drop, {}};
  auto t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 1003)[0];
  CHECK(t.state == JobState::delay);
  CHECK(t.at == 1500);  // deliver_at + 500, not the delivery time + 500
  CHECK(has_payload("p"));
  CHECK(misplaced() == Ids{});
  c = store.claim(shard, Ids{"p"}, 1500);
  CHECK(c[0].repeat == 2);
  CHECK(c[0].deliver_at == 1500);
  CHECK(c[0].attempt == 1);
  // Acknowledged 1.1 s late: occurrences 3 (2000) and 4 (2500) have passed; the latest, 4, is
  // due at once and 3 is skipped.
  d = {"p", 1500, 1, "orders", Mode::drop, {}};
  t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 2600)[0];
  CHECK(t.at == 2500);
  CHECK(field("p", "repeat") == "4");
  c = store.claim(shard, Ids{"p"}, 2600);
  CHECK(c[0].repeat == 4);
  d = {"p", 2500, 1, "orders", Mode::drop, {}};
  t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 2601)[0];
  CHECK(t.state == JobState::ready);  // the last of 4
  CHECK_FALSE(score("p"));
  CHECK(misplaced() == Ids{});
  // Reports are not tracked for repeating jobs, the last occurrence included.
  CHECK(report("p", ReportStatus::finished, 2600).verdict == ReportOutcome::Verdict::ignored);
}

TEST_CASE_METHOD(Lifecycle, "a calendar repeat keeps its rule in the record and goes on where the broker says",
                 "[store][lifecycle][cron]") {
  NewJob j = job("k", 10'000);
  j.repeat.cron = "*/10 * * * * *";
  j.repeat.tz = "Europe/Berlin";
  j.repeat.until = 60'000;
  j.repeat.count = 9;
  j.repeat.catchup = Catchup::all;
  store.accept(std::vector<NewJob>{j}, 0);
  CHECK(field("k", "repeat_cron") == "*/10 * * * * *");  // stored percent-encoded, shown as written
  CHECK(field("k", "repeat_tz") == "Europe/Berlin");
  CHECK(field("k", "repeat_catchup") == "all");
  auto c = store.claim(shard, Ids{"k"}, 10'000);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK_FALSE(c[0].plain);
  CHECK(c[0].repeat == 1);
  CHECK(c[0].rule.cron == j.repeat.cron);
  CHECK(c[0].rule.tz == "Europe/Berlin");
  CHECK(c[0].rule.until == std::optional<std::int64_t>(60'000));
  CHECK(c[0].rule.count == 9);
  CHECK(c[0].rule.catchup == Catchup::all);
  CHECK(c[0].rule.caught_up == 0);
  // The broker chose the next occurrence (20 000, number 2), already due: a missed one caught up.
  JobStore::Delivered d{"k", 10'000, c[0].attempt, "orders", Mode::drop, {}};
  d.next_known = true;
  d.next = Occurrence{20'000, 2};
  auto t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 25'000)[0];
  CHECK(t.state == JobState::delay);
  CHECK(t.at == 20'000);
  CHECK(field("k", "repeat") == "2");
  c = store.claim(shard, Ids{"k"}, 25'000);
  CHECK(c[0].rule.caught_up == 1);
  // Without a choice (a caller that knows only the id), a calendar series cannot go on in Lua: it
  // ends with this delivery, truthfully ready.
  d = {"k", 20'000, c[0].attempt, "orders", Mode::drop, {}};
  t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 25'001)[0];
  CHECK(t.state == JobState::ready);
}

TEST_CASE_METHOD(Lifecycle, "a missed occurrence is skipped without counting an attempt, or ends the series failed",
                 "[store][lifecycle][cron]") {
  NewJob j = job("s", 1000);
  j.repeat.every = std::chrono::milliseconds(1000);
  j.repeat.catchup = Catchup::none;
  store.accept(std::vector<NewJob>{j}, 0);
  auto c = store.claim(shard, Ids{"s"}, 5500);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].attempt == 1);
  JobStore::Delivered d{"s", 1000, c[0].attempt, "orders", Mode::drop, {}};
  d.next_known = true;
  d.next = Occurrence{6000, 6};
  d.skip = true;
  auto t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 5500)[0];
  CHECK(t.changed);
  CHECK(t.state == JobState::delay);
  CHECK(t.at == 6000);
  CHECK(field("s", "repeat") == "6");
  CHECK(field("s", "attempt") == "0");
  CHECK(field("s", "ready_at") == "<nil>");  // never delivered
  CHECK_THAT(field("s", "history"), Catch::Contains("skipped 0 occurrence 1 due at 1000 missed"));
  CHECK(store.claim(shard, Ids{"s"}, 6000)[0].attempt == 1);  // the in-flight entry went with the skip
  // Nothing left after a missed one: failed, with the reason.
  d = {"s", 6000, 1, "orders", Mode::drop, {}};
  d.next_known = true;
  d.skip = true;
  t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 9000)[0];
  CHECK(t.state == JobState::failed);
  CHECK_THAT(field("s", "error"), Catch::StartsWith("expired: occurrence 6 due at 6000 was missed"));
  CHECK_FALSE(score("s"));
}

TEST_CASE_METHOD(Lifecycle, "a cancel while an occurrence is in flight ends the series after it",
                 "[store][lifecycle]") {
  NewJob j = job("e", 1000);
  j.repeat.every = std::chrono::milliseconds(100);
  store.accept(std::vector<NewJob>{j}, 0);
  auto c = store.claim(shard, Ids{"e"}, 1000);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  const auto t = store.cancel(shard, "e", 1001);
  CHECK(t.changed);
  CHECK(t.state == JobState::in_flight);  // the occurrence under way cannot be recalled
  const JobStore::Delivered d{"e", 1000, 1, "orders", Mode::drop, {}};
  const auto marked = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 1005)[0];
  CHECK(marked.state == JobState::cancelled);
  CHECK(field("e", "state") == "cancelled");
  CHECK_FALSE(score("e"));
}

TEST_CASE_METHOD(Lifecycle, "a report for a job whose delivery is not settled yet waits", "[store][lifecycle]") {
  store.accept(std::vector<NewJob>{job("w", 10)}, 0);
  store.claim(shard, Ids{"w"}, 10);  // produced, say, and read by a fast consumer
  CHECK(report("w", ReportStatus::finished, 12).verdict == ReportOutcome::Verdict::wait);
  CHECK(field("w", "state") == "delay");
  const JobStore::Delivered d{"w", 10, 1, "orders", Mode::keep, {}};
  store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 15);
  CHECK(report("w", ReportStatus::finished, 16).state == JobState::finished);
}

// A mark whose answer was lost (Redis closed the connection after running it, as a restart
// does) is sent again, and by then the job may have moved on. It settles only the claim of its
// attempt still in flight: the job the consumer reported failed keeps its retry (the soak lost
// retries this way), a repeat keeps its next occurrence, a later claim is left to its own mark.
TEST_CASE_METHOD(Lifecycle, "a mark sent again after its answer was lost leaves a job that moved on as it is",
                 "[store][lifecycle][crash]") {
  SECTION("reported failed: its retry still comes") {
    store.accept(std::vector<NewJob>{job("f", 10)}, 0);
    auto c = store.claim(shard, Ids{"f"}, 10);
    const JobStore::Delivered d{"f", c[0].deliver_at, c[0].attempt, "orders", Mode::keep, {}};
    REQUIRE(store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 11)[0].changed);
    REQUIRE(report("f", ReportStatus::failed, 20, 500).state == JobState::delay);
    const auto t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 21)[0];
    CHECK_FALSE(t.changed);
    CHECK(t.state == JobState::delay);
    CHECK(t.at == 500);  // where it waits: the broker holds it there
    CHECK(field("f", "state") == "delay");
    CHECK(score("f") == 500);
    c = store.claim(shard, Ids{"f"}, 500);
    REQUIRE(c[0].kind == Claim::Kind::deliver);
    CHECK(c[0].attempt == 2);
    // The stale mark of attempt 1 again, with attempt 2 in flight: attempt 2 stays in flight.
    CHECK_FALSE(store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 501)[0].changed);
    CHECK(field("f", "state") == "delay");
    const JobStore::Delivered d2{"f", c[0].deliver_at, 2, "orders", Mode::keep, {}};
    CHECK(store.mark_ready(shard, std::span<const JobStore::Delivered>(&d2, 1), 502)[0].state == JobState::ready);
    CHECK(misplaced() == Ids{});
  }
  SECTION("a plain job marked the fast way, then upserted: the new job is not marked by the old ack") {
    store.accept(std::vector<NewJob>{job("p", 10)}, 0);
    auto c = store.claim(shard, Ids{"p"}, 10);
    const JobStore::Delivered d{"p", c[0].deliver_at, c[0].attempt, "orders"};
    REQUIRE(store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 11)[0].changed);
    NewJob again = job("p", 900);
    again.version = 7;
    store.accept(std::vector<NewJob>{again}, 12);
    REQUIRE(field("p", "state") == "delay");
    const auto t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 13)[0];
    CHECK_FALSE(t.changed);
    CHECK(t.at == 900);
    CHECK(field("p", "state") == "delay");
    CHECK(pending() == std::vector<PendingEntry>{{"p", 900}});
  }
  SECTION("a repeat: its next occurrence is not skipped") {
    NewJob j = job("r", 1000);
    j.repeat.every = std::chrono::milliseconds(1000);
    store.accept(std::vector<NewJob>{j}, 0);
    auto c = store.claim(shard, Ids{"r"}, 1000);
    REQUIRE(c[0].repeat == 1);
    const JobStore::Delivered d{"r", 1000, c[0].attempt, "orders", Mode::drop, {}};
    REQUIRE(store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 1001)[0].at == 2000);
    const auto t = store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 1002)[0];
    CHECK_FALSE(t.changed);
    CHECK(t.at == 2000);  // the next occurrence, which the lost answer would have told
    CHECK(field("r", "repeat") == "2");
    CHECK(score("r") == 2000);
    CHECK(store.claim(shard, Ids{"r"}, 2000)[0].repeat == 2);
  }
}

TEST_CASE_METHOD(Lifecycle, "a cancel between two occurrences stops the series", "[store][lifecycle]") {
  NewJob j = job("c", 1000);
  j.repeat.every = std::chrono::milliseconds(100);
  store.accept(std::vector<NewJob>{j}, 0);
  deliver_again("c", 1000, Mode::drop);
  CHECK(field("c", "state") == "delay");
  CHECK(store.cancel(shard, "c", 1050).changed);
  CHECK_FALSE(score("c"));
  CHECK(report("c", ReportStatus::running, 1060).verdict == ReportOutcome::Verdict::ignored);
}

TEST_CASE_METHOD(Lifecycle, "locate reads a business name of the contract's full length whole", "[store][lifecycle]") {
  // At the grammar's limits (a 15-digit deliver_at, a 9-digit attempt, a 100-character business,
  // the contract's longest) the header's first four words take 132 bytes: more than locate()'s
  // first read, and the business must not come back cut short.
  const std::string business(100, 'b');
  store.accept(std::vector<NewJob>{job("short", 100)}, 0);  // the shard is known
  const std::string line = "100000000000000 123456789 " + business + "\npayload";
  redis.command({"SET", keys.job(shard, "long"), "delay " + line});              // as 0.3 kept it: a key
  delayd::testing::put_record(redis, keys, shard, "long-now", "delay " + line);  // as it is kept now
  delayd::testing::put_record(redis, keys, shard, "long-ready", "ready " + line);
  const auto where = store.locate(Ids{"long", "short", "long-now", "long-ready"});
  for (const size_t i : {0, 2, 3}) {
    REQUIRE(where[i]);
    CHECK(where[i]->shard == shard);
    CHECK(where[i]->business == business);
    CHECK(where[i]->attempt == 123456789);
  }
  REQUIRE(where[1]);
  CHECK(where[1]->business == "orders");
}

// Upserts (accept.lua, "latest wins"): the version is the record's ingest offset in the shard.
TEST_CASE_METHOD(Fixture, "an upsert replaces a waiting job, waits for one in flight, and reuses a delivered id",
                 "[store][upsert]") {
  auto upsert = [&](std::int64_t version, std::int64_t at, std::string business = "orders") {
    NewJob j = job("u", at, std::move(business));
    j.value = "v" + std::to_string(version);
    j.version = version;
    return store.accept(std::vector<NewJob>{j}, 100)[0];
  };
  CHECK(upsert(5, 1000).kind == AcceptKind::created);
  CHECK(record("u").rfind("delay 1000 0 orders vo=5\n", 0) == 0);
  // Read again after a crash (the same offset), or an older version: nothing changes.
  CHECK(upsert(5, 2000).kind == AcceptKind::existed);
  CHECK(upsert(3, 3000).kind == AcceptKind::existed);
  CHECK(field("u", "deliver_at") == "1000");
  CHECK(field("u", "value") == "v5");

  // A newer version replaces time, payload and business, earlier or later.
  const AcceptOutcome later = upsert(8, 500, "mail");
  CHECK(later.kind == AcceptKind::updated);
  CHECK(later.deliver_at == 500);
  CHECK(field("u", "deliver_at") == "500");
  CHECK(field("u", "value") == "v8");
  CHECK(field("u", "business") == "mail");
  CHECK(pending() == std::vector<PendingEntry>{{"u", 500}});
  auto s = store.stats();
  CHECK(s.by_business_state["orders"]["delay"] == 0);
  CHECK(s.by_business_state["mail"]["delay"] == 1);
  CHECK(redis.command({"LRANGE", keys.wake(shard), "0", "-1"}).view().size() == 1);  // the owner moves its timer

  // In flight: nothing yet, the caller asks again once the delivery settles.
  auto c = store.claim(shard, Ids{"u"}, 500);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK_FALSE(c[0].plain);  // an upserted job settles the slow way, which keeps its version
  CHECK(upsert(9, 900).kind == AcceptKind::in_flight);
  CHECK(field("u", "value") == "v8");
  const std::vector<JobStore::Delivered> done{
      {"u", c[0].deliver_at, c[0].attempt, c[0].business, JobStore::Mode::drop}};  // as FirePath settles it
  store.mark_ready(shard, std::span<const JobStore::Delivered>(done), 510);
  CHECK(field("u", "state") == "ready");
  CHECK(record("u").find(" vo=8") != std::string::npos);
  CHECK(upsert(8, 500, "mail").kind == AcceptKind::existed);  // the delivered version, read again: no twin

  // After delivery, the waiting upsert applies as a new job of the id.
  const AcceptOutcome again = upsert(9, 900);
  CHECK(again.kind == AcceptKind::again);
  CHECK(again.created());
  CHECK(field("u", "state") == "delay");
  CHECK(field("u", "attempt") == "0");
  CHECK(field("u", "value") == "v9");
  CHECK(pending() == std::vector<PendingEntry>{{"u", 900}});
  CHECK(ttl("u") == -1);  // waiting again: no retention
  CHECK(misplaced() == Ids{});
  s = store.stats();
  CHECK(s.by_business_state["mail"]["ready"] == 0);
  CHECK(s.by_business_state["orders"]["delay"] == 1);
  const auto history = redis.command({"LRANGE", keys.history(shard, "u"), "0", "-1"});
  std::string events;
  for (std::size_t i = 0; i < history.view().size(); ++i) events += std::string(history.view()[i].str()) + "\n";
  CHECK_THAT(events, Catch::Contains(" updated 0 from%201000%20to%20500"));
  CHECK_THAT(events, Catch::Contains(" scheduled-again 0 its%20earlier%20job%20was%20ready%20after%201%20attempts"));

  // A cancel read before any version of an id wins over an upsert, as over a schedule.
  store.cancel(shard, "gone", 100, 300);
  NewJob late = job("gone", 700);
  late.version = 12;
  CHECK(store.accept(std::vector<NewJob>{late}, 200)[0].kind == AcceptKind::cancelled_early);
}

TEST_CASE_METHOD(Fixture, "a cancel read again after a newer upsert leaves it alone, and an upsert after a cancel wins",
                 "[store][upsert]") {
  auto upsert = [&](const std::string& id, std::int64_t version, std::int64_t at) {
    NewJob j = job(id, at);
    j.version = version;
    return store.accept(std::vector<NewJob>{j}, 100)[0];
  };
  // Offsets 10 (schedule), 11 (its delete), 12 (created again) of one partition.
  CHECK(upsert("x", 10, 1000).kind == AcceptKind::created);
  CHECK(store.cancel_anywhere(shard, "x", 100, 300, 11).changed);
  CHECK(upsert("x", 12, 2000).kind == AcceptKind::again);
  // Read again after a crash: 10 and 11 change nothing, the job created again waits.
  CHECK(upsert("x", 10, 1000).kind == AcceptKind::existed);
  CHECK_FALSE(store.cancel_anywhere(shard, "x", 100, 300, 11).changed);
  CHECK(field("x", "state") == "delay");
  CHECK(field("x", "deliver_at") == "2000");
  // Deleted before it was ever created (offset 20), then created (21): the creation wins in
  // this partition; a remembered cancel from another partition (no order) still holds.
  CHECK(store.cancel_anywhere(shard, "y", 100, 300, 20).state == JobState::missing);
  CHECK(upsert("y", 21, 3000).kind == AcceptKind::again);
  CHECK(field("y", "state") == "delay");
  const std::string other = shard_id("delay-ingest", 1);
  CHECK(store.cancel(other, "z", 100, 300).state == JobState::missing);
  NewJob z = job("z", 3000);
  z.shard = other;
  z.version = 5;
  CHECK(store.accept(std::vector<NewJob>{z}, 100)[0].kind == AcceptKind::cancelled_early);
}

// ---- compressed payloads (payload_compression.hpp) ----

namespace {

// A JSON document like the ones jobs carry: field names repeat, about 1 KiB.
std::string order_json(int n) {
  std::string s = "{\"order_id\":\"ord-" + std::to_string(n) + "\",\"customer\":{\"id\":\"c-" + std::to_string(n * 7) +
                  "\",\"email\":\"customer" + std::to_string(n) + "@example.com\"},\"items\":[";
  for (int i = 0; i < 12; ++i) {
    if (i > 0) s += ',';
    s += "{\"sku\":\"SKU-" + std::to_string(1000 + i * 13 + n) + "\",\"quantity\":" + std::to_string(i + 1) +
         ",\"unit_price\":{\"amount\":" + std::to_string(199 + i * 100) + ",\"currency\":\"EUR\"}}";
  }
  return s + "],\"remind_at\":\"2026-12-02T10:00:00Z\",\"channel\":\"email\"}";
}

}  // namespace

TEST_CASE_METHOD(Lifecycle, "a payload above the threshold is stored compressed and every reader gets it back",
                 "[store][compress]") {
  store.compress_payloads_above(256);
  NewJob big = job("big", 10);
  big.value = order_json(1);
  REQUIRE(big.value->size() > 900);
  NewJob small = job("small", 10);  // below the threshold: stored as it is
  store.accept(std::vector<NewJob>{big, small}, 0);

  const std::string stored = record("big");
  CHECK(stored.rfind("delay 10 0 orders z=1\n", 0) == 0);
  CHECK(stored.size() < big.value->size() / 2);  // the record, header line and all
  CHECK(record("small").rfind("delay 10 0 orders\n", 0) == 0);
  // get() (delayctl get, the console) shows the value, and not how it is kept.
  CHECK(field("big", "value") == *big.value);
  CHECK(field("big", "z") == "<nil>");
  CHECK(field("big", "headers") == field("small", "headers"));

  // The claim hands the value out as it came in.
  auto c = store.claim(shard, Ids{"big"}, 10);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].value == big.value);
  CHECK(c[0].key == big.key);
  CHECK(c[0].headers == StoredHeaders{{"trace", "abc"}, {"nullh", std::nullopt}});
}

TEST_CASE_METHOD(Lifecycle, "a kept compressed payload survives a redelivery, and its mark goes with the payload",
                 "[store][compress]") {
  store.compress_payloads_above(256);
  NewJob big = job("k", 10);
  big.value = order_json(2);
  store.accept(std::vector<NewJob>{big}, 0);
  REQUIRE(deliver_again("k", 10, Mode::keep).state == JobState::ready);
  CHECK(record("k").find(" z=1\n") != std::string::npos);  // ready, payload kept for a redelivery
  CHECK(field("k", "value") == *big.value);
  // A failed report sends it round again with its payload; the next claim reads it.
  CHECK(report("k", ReportStatus::failed, 20, 30).state == JobState::delay);
  auto c = store.claim(shard, Ids{"k"}, 30);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].value == big.value);
  CHECK(c[0].attempt == 2);
  // Delivered without keeping it: the payload goes, and z with it.
  const JobStore::Delivered d{"k", c[0].deliver_at, c[0].attempt, "orders", Mode::drop, {}};
  store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 30);
  CHECK(report("k", ReportStatus::finished, 40).state == JobState::finished);
  CHECK(record("k").find("z=1") == std::string::npos);
  CHECK_FALSE(has_payload("k"));
}

TEST_CASE_METHOD(Fixture, "a record marked compressed whose payload does not decompress is set aside, not delivered",
                 "[store][compress]") {
  store.accept(std::vector<NewJob>{job("bad", 5)}, 0);
  set_record("bad", "delay 5 0 orders z=1\nnot a zstd frame");
  CHECK(field("bad", "payload_error").find("compressed payload unreadable") != std::string::npos);
  auto c = store.claim(shard, Ids{"bad"}, 5);
  CHECK(c[0].kind == Claim::Kind::corrupt);
  CHECK(c[0].reason.rfind("corrupt job record: payload unreadable: compressed payload unreadable", 0) == 0);
}

TEST_CASE_METHOD(Fixture, "a store that does not compress reads the records of one that does", "[store][compress]") {
  JobStore writer{redis, keys, 3600};
  writer.compress_payloads_above(100);
  NewJob big = job("w", 5);
  big.value = order_json(3);
  writer.accept(std::vector<NewJob>{big}, 0);
  CHECK(record("w").find(" z=1\n") != std::string::npos);
  CHECK(field("w", "value") == *big.value);  // `store` compresses nothing itself
  auto c = store.claim(shard, Ids{"w"}, 5);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].value == big.value);
}

// kDictionarySamples + 1 jobs of one shard, "<prefix>0" on, whose values are JSON documents: the
// last one is the first a dictionary can compress.
struct Documents : Fixture {
  std::vector<NewJob> documents(const std::string& prefix) {
    std::vector<NewJob> jobs;
    for (std::size_t i = 0; i <= kDictionarySamples; ++i) {
      jobs.push_back(job(prefix + std::to_string(i), 5));
      jobs.back().value = order_json(static_cast<int>(i));
    }
    return jobs;
  }
};

TEST_CASE_METHOD(Documents, "payloads after the first thousand use a dictionary that another process reads from Redis",
                 "[store][compress]") {
  JobStore writer{redis, keys, 3600};
  writer.compress_payloads_above(256);
  const std::vector<NewJob> jobs = documents("d");
  writer.accept(jobs, 0);  // the 1 000th payload trains it; the last is compressed with it
  const auto dictionary = PayloadDictionaries::of(keys.prefix())->current();
  REQUIRE(dictionary);
  const std::string last = "d" + std::to_string(kDictionarySamples);
  const auto payload_of = [&](const std::string& id) { return record(id).substr(record(id).find('\n') + 1); };
  CHECK(dictionary_of(payload_of(last)) == dictionary->id());
  CHECK(dictionary_of(payload_of("d0")) == 0);  // compressed before there was one
  CHECK(payload_of(last).size() < payload_of("d0").size());
  // Counted for /metrics: each payload written compressed, its bytes before and as stored.
  const CompressionTotals totals = writer.compression();
  CHECK(totals.payloads == jobs.size());
  CHECK(totals.dictionary == dictionary->id());
  std::uint64_t stored = 0;
  for (const NewJob& j : jobs) stored += payload_of(j.job_id).size();
  CHECK(totals.stored_bytes == stored);
  CHECK(totals.encoded_bytes > totals.stored_bytes);
  // Kept in the shard of the records that need it, and as the prefix's, before those records.
  CHECK(redis.command({"GET", keys.dictionary(shard, dictionary->id())}).view().str() == dictionary->bytes());
  CHECK(redis.command({"GET", keys.dictionary()}).view().str() == dictionary->bytes());

  // Another process (its own dictionaries: none loaded) reads the records of both kinds.
  PayloadDictionaries::forget(keys.prefix());
  JobStore reader{redis, keys, 3600};
  CHECK(field(last, "value") == *jobs.back().value);  // `store` was made before the forget: it has it
  auto got = reader.get(last);
  REQUIRE(got);
  CHECK(got->at("value") == *jobs.back().value);
  PayloadDictionaries::forget(keys.prefix());
  JobStore claimer{redis, keys, 3600};
  auto c = claimer.claim(shard, Ids{"d0", last}, 5);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  REQUIRE(c[1].kind == Claim::Kind::deliver);
  CHECK(c[0].value == jobs[0].value);
  CHECK(c[1].value == jobs.back().value);

  // A process that starts compressing takes the prefix's dictionary, and writes it into a shard
  // it has not written before, by the post path as well.
  PayloadDictionaries::forget(keys.prefix());
  JobStore next{redis, keys, 3600};
  next.compress_payloads_above(256);
  REQUIRE(PayloadDictionaries::of(keys.prefix())->current());
  CHECK(PayloadDictionaries::of(keys.prefix())->current()->id() == dictionary->id());
  NewJob elsewhere = job("e", 5);
  elsewhere.shard = shard_id("delay-ingest", 1);
  elsewhere.value = order_json(7);
  auto posted = next.accept_post(std::vector<NewJob>{elsewhere}, 0);
  CHECK(next.accept_collect(posted)[0].created());
  CHECK(redis.command({"GET", keys.dictionary(elsewhere.shard, dictionary->id())}).view().str() == dictionary->bytes());
  CHECK(field("e", "value") == *elsewhere.value);
}

TEST_CASE_METHOD(Documents, "redis.compression_dictionary = false compresses each payload alone", "[store][compress]") {
  JobStore writer{redis, keys, 3600};
  writer.compress_payloads_above(256, false);
  const std::vector<NewJob> jobs = documents("a");
  writer.accept(jobs, 0);
  CHECK_FALSE(PayloadDictionaries::of(keys.prefix())->current());
  const std::string r = record("a" + std::to_string(kDictionarySamples));
  CHECK(r.find(" z=1\n") != std::string::npos);
  CHECK(dictionary_of(r.substr(r.find('\n') + 1)) == 0);
  CHECK(redis.command({"EXISTS", keys.dictionary()}).view().integer() == 0);
}

TEST_CASE_METHOD(Documents, "a payload whose dictionary is not in Redis is set aside with that reason",
                 "[store][compress]") {
  JobStore writer{redis, keys, 3600};
  writer.compress_payloads_above(256);
  const std::vector<NewJob> jobs = documents("m");
  writer.accept(jobs, 0);
  const auto dictionary = PayloadDictionaries::of(keys.prefix())->current();
  REQUIRE(dictionary);
  redis.command({"DEL", keys.dictionary(shard, dictionary->id())});
  PayloadDictionaries::forget(keys.prefix());
  JobStore reader{redis, keys, 3600};
  const std::string last = "m" + std::to_string(kDictionarySamples);
  auto got = reader.get(last);
  REQUIRE(got);
  CHECK(got->at("payload_error").find("dictionary " + std::to_string(dictionary->id())) != std::string::npos);
  auto c = reader.claim(shard, Ids{last}, 5);
  CHECK(c[0].kind == Claim::Kind::corrupt);
  CHECK(c[0].reason.find("is not in Redis") != std::string::npos);
}

TEST_CASE_METHOD(Lifecycle, "a takeover's logged delivery keeps the attempt only for the occurrence in flight",
                 "[store][lifecycle][takeover]") {
  NewJob j = job("t", 1000);
  j.repeat.every = std::chrono::milliseconds(1000);
  j.repeat.count = 3;
  store.accept(std::vector<NewJob>{j}, 0);
  // Occurrence 1 claimed, delivered and marked: occurrence 2 is next, at 2 000.
  auto c = store.claim(shard, Ids{"t"}, 1000);
  REQUIRE(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].repeat == 1);
  CHECK(c[0].attempt == 1);
  JobStore::Delivered d{"t", 1000, c[0].attempt, "orders", Mode::drop, {}};
  d.next_known = true;
  d.next = Occurrence{2000, 2};
  store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), 1000);
  // Occurrence 2 claimed by an owner that dies before its transaction commits: in flight, and
  // attempt 1 again, as every occurrence is.
  c = store.claim(shard, Ids{"t"}, 2000);
  CHECK(c[0].repeat == 2);
  CHECK(c[0].attempt == 1);
  // The new owner's delivery log holds occurrence 1's record: not the one in flight, so a new
  // attempt is counted and the occurrence goes out (before, the attempt alone matched, and the
  // occurrence was settled unsent).
  const std::vector<KnownDelivery> earlier{{1, 1}};
  c = store.claim(shard, Ids{"t"}, 2100, 0, {}, earlier);
  CHECK(c[0].repeat == 2);
  CHECK(c[0].attempt == 2);
  // A log holding the occurrence in flight, with its attempt: kept, for the caller to settle.
  const std::vector<KnownDelivery> this_one{{2, 2}};
  c = store.claim(shard, Ids{"t"}, 2200, 0, {}, this_one);
  CHECK(c[0].repeat == 2);
  CHECK(c[0].attempt == 2);
  // And a job that does not repeat names no occurrence: its attempt alone decides.
  store.accept(std::vector<NewJob>{job("p", 3000)}, 0);
  CHECK(store.claim(shard, Ids{"p"}, 3000)[0].attempt == 1);
  const std::vector<KnownDelivery> plain{{1, 0}};
  CHECK(store.claim(shard, Ids{"p"}, 3100, 0, {}, plain)[0].attempt == 1);
}
