// How JobStore lays jobs out in Redis (key_schema.hpp): the pending set's leaves, the upgrade
// from 0.3's one sorted set and keyed records, where a record lives in each state.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "job_store_fixture.hpp"
#include "storage/header_codec.hpp"

using namespace delayd::storage;
using namespace delayd::storage::test;
using namespace delayd::redis;

// The leaves in windows (prelude_pending.lua) under every kind of write, in random order: many
// jobs of one millisecond (ties ordered by id across leaves), windows of one entry and of hundreds,
// batches that fill and split leaves, cancels that empty them and their windows, moves, and
// deliveries from the front. After each round the entries are the model's and the layout's
// invariants hold, checked the slow way.
TEST_CASE_METHOD(Fixture,
                 "the pending set's leaves hold every entry in order, in its window, at most kPendingLeafMax each",
                 "[store][leaves]") {
  std::mt19937_64 rng(11);
  std::set<std::pair<std::int64_t, std::string>> model;  // (score, job-id): Redis's order
  std::map<std::string, std::int64_t> at;
  // Half within 40 ms of the window 0 (ties, a window of hundreds), half scattered over 35
  // windows, some at a window's first and last millisecond.
  constexpr std::int64_t w = delayd::storage::kPendingWindowMs;
  auto time = [&] {
    const auto r = static_cast<std::int64_t>(rng() % 90);
    if (r < 40) return 1000 + r;
    if (r < 60) return (r - 38) * w + (r % 2 == 0 ? 0 : w - 1);
    return (r - 55) * w + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(w));
  };
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
    const auto claims = store.claim(shard, due, 40 * w);
    std::vector<JobStore::Delivered> done;
    for (const auto& c : claims) {
      REQUIRE(c.kind == Claim::Kind::deliver);
      done.push_back({c.job_id, c.deliver_at, c.attempt, c.business});
      model.erase({at[c.job_id], c.job_id});
      at.erase(c.job_id);
    }
    store.mark_ready(shard, std::span<const JobStore::Delivered>(done), 40 * w);
    std::vector<PendingEntry> want;
    for (const auto& [t, id] : model) want.push_back({id, t});
    CHECK(store.pending_between(shard, std::nullopt, INT64_MAX, 0) == want);
    CHECK(delayd::testing::pending_leaf_violations(redis, keys, shard) == Ids{});
    CHECK(store.stats().pending == static_cast<std::int64_t>(model.size()));
    most = std::max(most, model.size());
  }
  CHECK(most > 1000);  // the window 0 alone held many leaves
  CHECK(misplaced() == Ids{});
  // The check sees a stray: a window's directory that the shard's does not list.
  redis.command({"ZADD", keys.pending_window(shard, "500"), "0", "000000000500123:stray"});
  CHECK(delayd::testing::pending_leaf_violations(redis, keys, shard) == Ids{"S1: window 500 is not listed"});
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

namespace {
// Puts the entries e1..e<count> at the scores `score` (a Lua expression of i) into the fixture's
// shard, 5 000 to a script: one script of tens of thousands of unordered entries holds Redis
// longer than a client's 2 s command timeout on a slow machine. The slow-way check reads every
// entry in one script: it has a connection of its own, with a longer timeout than the store's.
struct LeafFixture : Fixture {
  RedisConnection checker{[] {
    auto o = delayd::testing::redis_options(delayd::testing::require_env("REDIS_URL"));
    o.timeout_ms = 20'000;
    return o;
  }()};
  void put_entries(int count, const std::string& score) {
    const std::string body =
        "local args, k = {}, 0 for i = tonumber(ARGV[5]), tonumber(ARGV[6]) do k = k + 1; "
        "args[2 * k - 1] = " +
        score + "; args[2 * k] = 'e' .. i end entries_put(args) flush() return 1";
    for (int first = 1; first <= count; first += 5'000) {
      const int last = std::min(count, first + 4'999);
      delayd::testing::checked(redis.command(
          delayd::testing::prelude_eval(keys, shard, body, {std::to_string(first), std::to_string(last)})));
    }
  }
};
}  // namespace

// Past 1 000 leaves in the windows before a bound, pending.lua counts further windows at the
// shard's average window instead of reading each (the console's timeline must not block Redis):
// an estimate, off by less than one window's entries when the windows hold alike.
TEST_CASE_METHOD(LeafFixture, "due_counts past a thousand leaves is estimated within one window", "[store][leaves]") {
  static_assert(delayd::storage::kPendingWindowMs == 60'000 && delayd::storage::kPendingLeafMax == 64);
  constexpr int kEntries = 70'000;  // at 50, 100, ... ms: 1 200 a window in 19 leaves (1 199 in the window 0)
  redis.command({"SADD", keys.shards(), shard});
  put_entries(kEntries, "50 * i");
  const std::vector<std::int64_t> bounds{50'000, 1'000'000, 3'300'000, INT64_MAX};
  const auto got = store.due_counts(bounds);
  REQUIRE(got.size() == 4);
  CHECK(got[0] == 1'000);                    // in the window 0: its leaves before it, read one by one, exact
  CHECK(got[1] == 19'000);                   // 16 windows (304 leaves) before it: exact too
  CHECK(std::abs(got[2] - 46'000) < 1'200);  // 55 windows (1 045 leaves): the last 2 windows estimated
  CHECK(got[0] + got[1] + got[2] + got[3] == kEntries);  // the last window takes the rest of the count
  CHECK(store.stats().pending == kEntries);
}

// A window of a burst holds thousands of leaves: past 1 000 of them before a bound, pending.lua
// counts the rest of the window at the average of those it read.
TEST_CASE_METHOD(LeafFixture, "due_counts in a window of thousands of leaves is exact up to a thousand, then close",
                 "[store][leaves]") {
  constexpr int kEntries =
      80'000;  // 80 at each millisecond of 5 000-5 999 (the window 0), arriving in no order of time
  redis.command({"SADD", keys.shards(), shard});
  put_entries(kEntries, "5000 + (i * 7919) % 1000");
  REQUIRE(redis.command({"ZCARD", keys.pending_window(shard, "0")}).view().integer() > 1'100);  // the leaves
  const std::vector<std::int64_t> bounds{5'299, 5'899, INT64_MAX};
  const auto got = store.due_counts(bounds);
  REQUIRE(got.size() == 3);
  CHECK(got[0] == 24'000);                         // fewer than 1 000 leaves before it: exact
  CHECK(std::abs(got[1] - 48'000) < 48'000 / 20);  // more: within 5 %
  CHECK(got[0] + got[1] + got[2] == kEntries);
  CHECK(delayd::testing::pending_leaf_violations(checker, keys, shard) == Ids{});
}
