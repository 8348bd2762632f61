// The state indexes and the job walk (storage/job_browse.hpp) against the real Redis of the local
// stack, each test under its own key prefix.
#include "storage/job_browse.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "redis/url.hpp"
#include "support/redis_cleanup.hpp"
#include "support/redis_connect.hpp"
#include "support/test_env.hpp"

using namespace delayd::storage;
using namespace delayd::redis;

namespace {

using Ids = std::vector<std::string>;

struct Walk {
  RedisConnection redis{delayd::testing::redis_options(delayd::testing::require_env("REDIS_URL"))};
  KeySchema keys{delayd::testing::unique_name("w")};
  std::int64_t retention_s = 3600;
  JobStore store{redis, keys, retention_s};
  const std::vector<std::string> shards{shard_id("in", 0), shard_id("in", 1), shard_id("in", 2)};

  NewJob job(const std::string& id, std::int64_t at, const std::string& shard, std::string business = "orders") {
    NewJob j;
    j.job_id = id;
    j.deliver_at = at;
    j.business = std::move(business);
    j.shard = shard;
    j.value = "v-" + id;
    return j;
  }
  // The members of a sorted set with their scores.
  std::map<std::string, std::int64_t> members(const std::string& key) {
    auto r = redis.command({"ZRANGE", key, "0", "-1", "WITHSCORES"});
    std::map<std::string, std::int64_t> out;
    for (std::size_t i = 0; i + 1 < r.view().size(); i += 2) {
      out[std::string(r.view()[i].str())] = std::stoll(std::string(r.view()[i + 1].str()));
    }
    return out;
  }
  // A shard's state index; its waiting index of `business`; that index's mark ("" for none).
  std::map<std::string, std::int64_t> index(const std::string& shard, JobState st) {
    return members(keys.state_index(shard, to_string(st)));
  }
  std::map<std::string, std::int64_t> waiting(const std::string& shard, const std::string& business) {
    return members(keys.waiting(shard, business));
  }
  std::string mark(const std::string& shard, const std::string& business) {
    auto r = redis.command({"HGET", keys.waiting_marks(shard), business});
    return r.view().is_nil() ? "" : std::string(r.view().str());
  }
  // What the waiting index of `business` must hold: the shard's delay jobs of the business, at
  // their pending entries' scores (read from the records and the pending set, not the index).
  std::map<std::string, std::int64_t> truth(const std::string& shard, const std::string& business) {
    std::map<std::string, std::int64_t> out;
    for (const PendingEntry& e : store.pending_between(shard, std::nullopt, kMaxWalkScore, 100'000)) {
      const auto f = store.get(e.job_id);
      if (f && f->at("state") == "delay" && f->at("business") == business) out[e.job_id] = e.deliver_at;
    }
    return out;
  }
  // Claims and marks ready `id` of `shard` at `now`.
  void deliver(const std::string& shard, const std::string& id, std::int64_t now) {
    auto c = store.claim(shard, Ids{id}, now);
    REQUIRE(c[0].kind == Claim::Kind::deliver);
    const JobStore::Delivered d{id, c[0].deliver_at, c[0].attempt, c[0].business, JobStore::Mode::fast};
    store.mark_ready(shard, std::span<const JobStore::Delivered>(&d, 1), now);
  }
  // Every page of a walk, each of `limit`, in order; the ids, shard-qualified.
  std::vector<std::string> walk_all(const JobFilter& f, std::size_t limit, std::int64_t now,
                                    std::size_t* pages = nullptr) {
    std::vector<std::string> out;
    WalkCursor c{now, 0, {}, {}};
    for (std::size_t n = 1;; ++n) {
      const WalkPage p = walk_jobs(store, f, c, limit, now);
      REQUIRE(p.jobs.size() <= limit);
      for (const auto& j : p.jobs) out.push_back(j.shard + "/" + j.job_id);
      if (pages) *pages = n;
      if (!p.next) break;
      c = *p.next;
    }
    return out;
  }
  ~Walk() { delayd::testing::delete_prefixed_keys(redis, keys.prefix()); }
};

}  // namespace

TEST_CASE_METHOD(Walk, "each transition moves the job between the state indexes in the same call", "[store][walk]") {
  const std::string& s = shards[0];
  store.accept(std::vector<NewJob>{job("a", 10, s), job("b", 10, s), job("c", 10, s)}, 0);
  CHECK(index(s, JobState::ready).empty());  // waiting jobs are in the pending set only
  deliver(s, "a", 20);
  CHECK(index(s, JobState::ready) == std::map<std::string, std::int64_t>{{"a", 20}});
  store.cancel(s, "b", 30);
  CHECK(index(s, JobState::cancelled) == std::map<std::string, std::int64_t>{{"b", 30}});
  store.claim(s, Ids{"c"}, 40);
  store.mark_failed(s, "c", "no topic", 50, DeadLetterAt{2, 77});
  CHECK(index(s, JobState::failed) == std::map<std::string, std::int64_t>{{"c", 50}});
  CHECK(store.get("c")->at("dl") == "2:77");
  CHECK_FALSE(store.get("c")->count("value"));  // its business keeps no payload

  // The lifecycle: running, then finished, each leaving the index it was in.
  Report running{"a", ReportStatus::running, "", 0, 3, std::chrono::milliseconds(0), 0};
  store.report(std::span<const Report>(&running, 1), Ids{s}, 60);
  CHECK(index(s, JobState::ready).empty());
  CHECK(index(s, JobState::running) == std::map<std::string, std::int64_t>{{"a", 60}});
  Report finished{"a", ReportStatus::finished, "", 0, 3, std::chrono::milliseconds(0), 0};
  store.report(std::span<const Report>(&finished, 1), Ids{s}, 70);
  CHECK(index(s, JobState::running).empty());
  CHECK(index(s, JobState::finished) == std::map<std::string, std::int64_t>{{"a", 70}});
  // Each index expires a retention after its last entry.
  const auto ttl = redis.command({"TTL", keys.state_index(s, "finished")}).view().integer();
  CHECK(ttl > retention_s - 10);
  CHECK(ttl <= retention_s);
}

TEST_CASE_METHOD(Walk, "entries older than the retention are trimmed when the index is written", "[store][walk]") {
  JobStore short_lived{redis, keys, 1};  // a retention of 1 s: entries older than 1000 ms go
  const std::string& s = shards[0];
  short_lived.accept(std::vector<NewJob>{job("old", 10, s), job("new", 10, s)}, 0);
  short_lived.cancel(s, "old", 1000);
  short_lived.cancel(s, "new", 2500);
  CHECK(index(s, JobState::cancelled) == std::map<std::string, std::int64_t>{{"new", 2500}});
}

TEST_CASE_METHOD(Walk, "a failed job of a business that keeps payloads can be retried from Redis", "[store][walk]") {
  const std::string& s = shards[1];
  store.accept(std::vector<NewJob>{job("k", 10, s), job("gone", 10, s), job("w", 5000, s)}, 0);
  store.claim(s, Ids{"k", "gone"}, 20);
  store.mark_failed(s, "k", "boom", 30, DeadLetterAt{0, 5}, /*keep_payload=*/true);
  store.mark_failed(s, "gone", "boom", 30, DeadLetterAt{0, 6}, false);
  CHECK(store.get("k")->at("value") == "v-k");

  const Transition t = store.retry_anywhere("k", 40);
  CHECK(t.changed);
  CHECK(t.state == JobState::delay);
  const auto k = *store.get("k");
  CHECK(k.at("state") == "delay");
  CHECK(k.at("last_error") == "boom");
  CHECK_FALSE(k.count("error"));
  CHECK_FALSE(k.count("dl"));
  CHECK(index(s, JobState::failed) == std::map<std::string, std::int64_t>{{"gone", 30}});
  CHECK(store.pending_between(s, std::nullopt, 100, 10) == std::vector<PendingEntry>{{"k", 40}});
  const auto woken = store.take_wakes(std::vector<std::string>{s});
  REQUIRE(woken.size() == 1);
  CHECK(woken[0].second == std::vector<PendingEntry>{{"k", 40}});
  // Delivered again as the next attempt.
  const auto c = store.claim(s, Ids{"k"}, 50);
  CHECK(c[0].kind == Claim::Kind::deliver);
  CHECK(c[0].attempt == 2);

  // No payload: nothing changes; not failed: nothing changes.
  const Transition none = store.retry_anywhere("gone", 60);
  CHECK_FALSE(none.changed);
  CHECK(none.state == JobState::failed);
  CHECK(store.retry_anywhere("w", 60).state == JobState::delay);
  CHECK_FALSE(store.retry_anywhere("w", 60).changed);
  CHECK(store.retry_anywhere("nobody", 60).state == JobState::missing);
}

TEST_CASE_METHOD(Walk, "a walk lists waiting jobs of every shard by due time, page by page, each once",
                 "[store][walk]") {
  // 30 jobs over three shards, due at 100..129 (some at the same instant in two shards).
  std::vector<std::string> expected;
  for (int i = 0; i < 30; ++i) {
    const std::string& s = shards[static_cast<std::size_t>(i % 3)];
    const std::string id = "j" + std::to_string(i);
    store.accept(std::vector<NewJob>{job(id, 100 + i / 2, s, i % 2 ? "mail" : "orders")}, 0);
  }
  std::vector<std::pair<std::tuple<std::int64_t, std::string, std::string>, std::string>> order;
  for (int i = 0; i < 30; ++i) {
    const std::string& s = shards[static_cast<std::size_t>(i % 3)];
    const std::string id = "j" + std::to_string(i);
    order.push_back({{100 + i / 2, id, s}, s + "/" + id});
  }
  std::sort(order.begin(), order.end());
  for (const auto& [k, v] : order) expected.push_back(v);

  for (std::size_t limit : {1u, 4u, 7u, 50u}) {
    std::size_t pages = 0;
    JobFilter f;
    f.states = {JobState::delay};
    CHECK(walk_all(f, limit, 1000, &pages) == expected);
    CHECK(pages == (30 + limit - 1) / limit + (30 % limit == 0 ? 1 : 0));
  }

  JobFilter mail;
  mail.states = {JobState::delay};
  mail.business = "mail";
  const auto got = walk_all(mail, 4, 1000);
  CHECK(got.size() == 15);
  JobFilter prefix;
  prefix.states = {JobState::delay};
  prefix.id_prefix = "j1";  // j1, j10..j19
  CHECK(walk_all(prefix, 50, 1000).size() == 11);
  JobFilter due;
  due.states = {JobState::delay};
  due.due_from = 105;
  due.due_to = 106;
  CHECK(walk_all(due, 50, 1000).size() == 4);
}

TEST_CASE_METHOD(Walk, "a job moved or finished during a walk is never listed twice", "[store][walk]") {
  const std::string& s = shards[0];
  for (int i = 0; i < 10; ++i) store.accept(std::vector<NewJob>{job("m" + std::to_string(i), 100 + i, s)}, 0);
  JobFilter f;
  f.states = {JobState::delay};
  const WalkPage first = walk_jobs(store, f, WalkCursor{1000, 0, {}, {}}, 3, 1000);
  REQUIRE(first.jobs.size() == 3);
  CHECK(first.jobs[0].job_id == "m0");
  // m0 (listed) moves after the walk's end; m5 (not listed yet) moves before the cursor.
  CHECK(store.reschedule_anywhere(s, "m0", 500, 1001).changed);
  CHECK(store.reschedule_anywhere(s, "m5", 50, 1001).changed);
  std::vector<std::string> rest;
  WalkCursor c = *first.next;
  while (true) {
    const WalkPage p = walk_jobs(store, f, c, 3, 1002);
    for (const auto& j : p.jobs) rest.push_back(j.job_id);
    if (!p.next) break;
    c = *p.next;
  }
  CHECK(rest == std::vector<std::string>{"m3", "m4", "m6", "m7", "m8", "m9"});  // m0 not again, m5 missed

  // A state walk, newest first, leaves out what entered the state after the walk started.
  store.cancel(s, "m7", 900);
  store.cancel(s, "m8", 950);
  JobFilter cancelled;
  cancelled.states = {JobState::cancelled};
  const WalkPage one = walk_jobs(store, cancelled, WalkCursor{1000, 0, {}, {}}, 1, 1000);
  REQUIRE(one.jobs.size() == 1);
  CHECK(one.jobs[0].job_id == "m8");
  CHECK(one.jobs[0].score == 950);
  store.cancel(s, "m9", 1100);  // after the walk's start
  const WalkPage two = walk_jobs(store, cancelled, *one.next, 5, 1200);
  REQUIRE(two.jobs.size() == 1);
  CHECK(two.jobs[0].job_id == "m7");
  CHECK_FALSE(two.next);
}

TEST_CASE_METHOD(Walk, "a walk of several states goes through them in order, filtering by error text",
                 "[store][walk]") {
  const std::string& s = shards[2];
  store.accept(std::vector<NewJob>{job("a", 10, s), job("b", 10, s), job("c", 10, s), job("d", 5000, s)}, 0);
  store.claim(s, Ids{"a", "b"}, 20);
  store.mark_failed(s, "a", "Topic ready.x does not EXIST", 30);
  store.mark_failed(s, "b", "message too large", 31);
  store.cancel(s, "c", 32);
  JobFilter f;
  f.states = {JobState::failed, JobState::cancelled, JobState::delay};
  std::size_t pages = 0;
  CHECK(walk_all(f, 1, 100, &pages) == Ids{s + "/b", s + "/a", s + "/c", s + "/d"});
  JobFilter err;
  err.states = {JobState::failed};
  err.error_text = "does not exist";
  const WalkPage p = walk_jobs(store, err, WalkCursor{100, 0, {}, {}}, 10, 100);
  REQUIRE(p.jobs.size() == 1);
  CHECK(p.jobs[0].job_id == "a");
  CHECK(p.jobs[0].error == "Topic ready.x does not EXIST");
  CHECK(p.jobs[0].business == "orders");
  // Every state, none given.
  CHECK(walk_all(JobFilter{}, 2, 100).size() == 4);
}

TEST_CASE_METHOD(Walk, "a rare match returns short pages within the page budget and still finds every job",
                 "[store][walk]") {
  const std::string& s = shards[0];
  std::vector<NewJob> jobs;
  const int n = static_cast<int>(kPageBudget) + 5000;
  for (int i = 0; i < n; ++i)
    jobs.push_back(job("r" + std::to_string(i), 1000 + i, s, i % 10000 == 7 ? "rare" : "bulk"));
  store.accept(jobs, 0);
  // Jobs from a delayd before the waiting index: the shard keeps none for the business, so the
  // walk goes through the pending set.
  redis.command({"HSET", keys.waiting_marks(s), "rare", "off"});
  redis.command({"DEL", keys.waiting(s, "rare")});
  JobFilter f;
  f.states = {JobState::delay};
  f.business = "rare";
  const WalkPage first = walk_jobs(store, f, WalkCursor{1, 0, {}, {}}, 50, 1);
  CHECK(first.partial);
  CHECK(first.examined >= kPageBudget);
  CHECK(first.examined < kPageBudget + kCallBudget * shards.size());
  REQUIRE(first.next);
  std::set<std::string> found;
  for (const auto& j : first.jobs) found.insert(j.job_id);
  WalkCursor c = *first.next;
  while (true) {
    const WalkPage p = walk_jobs(store, f, c, 50, 1);
    for (const auto& j : p.jobs) found.insert(j.job_id);
    if (!p.next) break;
    c = *p.next;
  }
  std::set<std::string> expected;
  for (int i = 7; i < n; i += 10000) expected.insert("r" + std::to_string(i));
  CHECK(found == expected);
}

TEST_CASE_METHOD(Walk, "a walk through many jobs of one instant keeps Redis's byte order of ids across shards",
                 "[store][walk]") {
  // 150 jobs delivered at the same millisecond, ids in mixed case (byte order: 'B' < 'a'), over
  // three shards: the newest-first walk of the ready index orders them by id, descending.
  std::vector<std::string> expected;
  for (int i = 0; i < 150; ++i) {
    const std::string& s = shards[static_cast<std::size_t>(i % 3)];
    const std::string id = std::string(1, "aBcD"[i % 4]) + std::to_string(i * 7919 % 1000);
    store.accept(std::vector<NewJob>{job(id, 10, s)}, 0);
    deliver(s, id, 500);
    expected.push_back(s + "/" + id);
  }
  std::sort(expected.begin(), expected.end(), [](const std::string& a, const std::string& b) {
    const auto split = [](const std::string& x) {
      const auto slash = x.find('/');
      return std::pair{x.substr(slash + 1), x.substr(0, slash)};
    };
    return split(b) < split(a);  // (id, shard) descending: the newest-first order at one score
  });
  JobFilter ready;
  ready.states = {JobState::ready};
  for (std::size_t limit : {1u, 7u, 500u}) CHECK(walk_all(ready, limit, 1000) == expected);
}

TEST_CASE_METHOD(Walk, "a rare business is paged through its waiting index, looking at its own jobs only",
                 "[store][walk]") {
  // 12 000 waiting jobs over two shards, 30 of them of one business: a page of 20 of them looks
  // at those jobs only (not the 10 000 entries of the page budget) and comes in due order.
  std::vector<NewJob> jobs;
  Ids expected;
  for (int i = 0; i < 12'000; ++i) {
    const bool rare = i % 800 == 3 || i % 800 == 404;  // 15 in each shard
    const std::string id = "j" + std::to_string(i);
    jobs.push_back(job(id, 1000 + i, shards[static_cast<std::size_t>(i % 2)], rare ? "rare" : "bulk"));
    if (rare) expected.push_back(shards[static_cast<std::size_t>(i % 2)] + "/" + id);
  }
  store.accept(jobs, 0);
  CHECK(mark(shards[0], "rare") == "on");
  CHECK(waiting(shards[0], "rare").size() == 15);
  CHECK(mark(shards[0], "bulk") == "off");  // 6 000 in the shard: more than kWaitingIndexMax
  CHECK(redis.command({"EXISTS", keys.waiting(shards[0], "bulk")}).view().integer() == 0);
  JobFilter f;
  f.states = {JobState::delay};
  f.business = "rare";
  const WalkPage first = walk_jobs(store, f, WalkCursor{1, 0, {}, {}}, 20, 1);
  CHECK_FALSE(first.partial);
  CHECK(first.jobs.size() == 20);
  CHECK(first.examined <= 30);
  std::size_t pages = 0;
  CHECK(walk_all(f, 20, 1, &pages) == expected);
  CHECK(pages == 2);
  // A business no shard has held a job of: no walk of the pending sets either.
  f.business = "never";
  const WalkPage none = walk_jobs(store, f, WalkCursor{1, 0, {}, {}}, 20, 1);
  CHECK(none.jobs.empty());
  CHECK(none.examined == 0);
  CHECK_FALSE(none.next);
}

TEST_CASE_METHOD(Walk, "the waiting index follows every move of a business's waiting jobs, in the same calls",
                 "[store][walk]") {
  const std::string& s = shards[0];
  std::vector<NewJob> jobs;
  for (int i = 0; i < 12; ++i) jobs.push_back(job("m" + std::to_string(i), 1000 + i, s, i < 8 ? "a" : "b"));
  store.accept(jobs, 0);
  const auto agree = [&] {
    CHECK(waiting(s, "a") == truth(s, "a"));
    CHECK(waiting(s, "b") == truth(s, "b"));
  };
  agree();
  CHECK(waiting(s, "a").size() == 8);
  // Claimed and marked ready (the fast way and the slow way), cancelled, failed, rescheduled.
  deliver(s, "m0", 2000);
  store.claim(s, Ids{"m1"}, 2000);
  store.mark_ready(s, Ids{"m1"}, 2000);
  store.cancel(s, "m2", 2000);
  store.claim(s, Ids{"m3"}, 2000);
  store.mark_failed(s, "m3", "boom", 2000, DeadLetterAt{0, 1}, /*keep_payload=*/true);
  store.reschedule_anywhere(s, "m4", 50'000, 2000);
  agree();
  // Released to a retry time: the index moves with the pending entry.
  store.claim(s, Ids{"m5"}, 2000);
  store.release(s, "m5", "timeout", 9000, {}, 2000);
  agree();
  CHECK(waiting(s, "a").at("m5") == 9000);
  // Retried by an operator: back in.
  store.retry_anywhere("m3", 3000);
  agree();
  CHECK(waiting(s, "a").count("m3"));
  // An upsert that moves a job to another business moves its entry.
  NewJob moved = job("m6", 7000, s, "b");
  moved.version = 100;
  store.accept(std::vector<NewJob>{moved}, 3000);
  agree();
  CHECK(waiting(s, "b").at("m6") == 7000);
  CHECK_FALSE(waiting(s, "a").count("m6"));
  CHECK(mark(s, "a") == "on");
  CHECK(mark(s, "b") == "on");
}

TEST_CASE_METHOD(Walk, "a batch's waiting-index writes, made per business, end as if made one job at a time",
                 "[store][walk]") {
  // accept.lua and mark_ready.lua write the index entries of a batch's plain jobs in one command
  // per business; a job that takes another way in the same call sees them written first.
  const std::string& s = shards[0];
  std::vector<NewJob> jobs;
  for (int i = 0; i < 10; ++i) jobs.push_back(job("p" + std::to_string(i), 1000 + i, s, i % 2 == 0 ? "a" : "b"));
  NewJob moved = job("p4", 8000, s, "b");  // created above, then moved to "b" by an upsert of the same call
  moved.version = 100;
  jobs.push_back(moved);
  jobs.push_back(job("p10", 1010, s, "a"));  // a plain job after it
  store.accept(jobs, 0);
  CHECK(waiting(s, "a") == truth(s, "a"));
  CHECK(waiting(s, "b") == truth(s, "b"));
  CHECK(waiting(s, "b").at("p4") == 8000);
  CHECK_FALSE(waiting(s, "a").count("p4"));
  CHECK(waiting(s, "a").size() == 5);  // p0 p2 p6 p8 p10
  CHECK(waiting(s, "b").size() == 6);  // p1 p3 p4 p5 p7 p9

  // Marked ready the fast way in one call, one of them named twice (the second time it takes the
  // per-job way, after the removes noted before it are written).
  const Ids ids{"p0", "p1", "p2", "p3", "p5"};
  const auto claims = store.claim(s, ids, 2000);
  std::vector<JobStore::Delivered> done;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    REQUIRE(claims[k].kind == Claim::Kind::deliver);
    done.push_back({ids[k], claims[k].deliver_at, claims[k].attempt, claims[k].business, JobStore::Mode::fast});
  }
  done.insert(done.begin() + 2, done[1]);  // p1 again, before p2
  const auto marked = store.mark_ready(s, done, 2000);
  REQUIRE(marked.size() == done.size());
  CHECK(waiting(s, "a") == truth(s, "a"));
  CHECK(waiting(s, "b") == truth(s, "b"));
  CHECK(waiting(s, "a") == std::map<std::string, std::int64_t>{{"p10", 1010}, {"p6", 1006}, {"p8", 1008}});
  CHECK(waiting(s, "b") == std::map<std::string, std::int64_t>{{"p4", 8000}, {"p7", 1007}, {"p9", 1009}});
  CHECK(index(s, JobState::ready).size() == 5);
}

TEST_CASE_METHOD(Walk, "a waiting index is dropped past its bound and starts again once the business has none waiting",
                 "[store][walk]") {
  const std::string& s = shards[0];
  std::vector<NewJob> jobs;
  const auto n = static_cast<int>(kWaitingIndexMax);
  for (int i = 0; i < n; ++i) jobs.push_back(job("g" + std::to_string(i), 1000 + i, s, "grow"));
  store.accept(jobs, 0);
  CHECK(mark(s, "grow") == "on");
  CHECK(waiting(s, "grow").size() == kWaitingIndexMax);
  store.accept(std::vector<NewJob>{job("g-last", 900, s, "grow")}, 0);  // one more: over the bound
  CHECK(mark(s, "grow") == "off");
  CHECK(redis.command({"EXISTS", keys.waiting(s, "grow")}).view().integer() == 0);
  // The walk still finds the business's jobs, through the pending set.
  JobFilter f;
  f.states = {JobState::delay};
  f.business = "grow";
  CHECK(walk_jobs(store, f, WalkCursor{1, 0, {}, {}}, 5, 1).jobs.size() == 5);
  // All cancelled: none waiting, so the index starts again, and the next job is in it.
  store.cancel(s, "g-last", 2000);
  for (int i = 0; i < n; i += 500) {
    Ids batch;
    for (int k = i; k < std::min(n, i + 500); ++k) batch.push_back("g" + std::to_string(k));
    store.act(JobStore::Action::cancel, s, batch, 2000);
  }
  CHECK(mark(s, "grow") == "on");
  store.accept(std::vector<NewJob>{job("g-new", 5000, s, "grow")}, 3000);
  CHECK(waiting(s, "grow") == std::map<std::string, std::int64_t>{{"g-new", 5000}});
}

TEST_CASE_METHOD(Walk, "jobs waiting from before the index keep their business out of it until none waits",
                 "[store][walk]") {
  // A store written by a delayd without the index: no marks, no index.
  const std::string& s = shards[0];
  store.accept(std::vector<NewJob>{job("u1", 1000, s, "old"), job("u2", 2000, s, "old")}, 0);
  redis.command({"HDEL", keys.waiting_marks(s), "old"});
  redis.command({"DEL", keys.waiting(s, "old")});
  // The next job of the business finds jobs waiting that the index lacks: the index is not kept.
  store.accept(std::vector<NewJob>{job("u3", 3000, s, "old")}, 0);
  CHECK(mark(s, "old") == "off");
  CHECK(redis.command({"EXISTS", keys.waiting(s, "old")}).view().integer() == 0);
  JobFilter f;
  f.states = {JobState::delay};
  f.business = "old";
  std::size_t pages = 0;
  CHECK(walk_all(f, 10, 1, &pages) == std::vector<std::string>{s + "/u1", s + "/u2", s + "/u3"});
  // Once none of them waits, it starts.
  for (const char* id : {"u1", "u2", "u3"}) deliver(s, id, 4000);
  CHECK(mark(s, "old") == "on");
}
