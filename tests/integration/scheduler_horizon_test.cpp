// The horizon invariant (broker/scheduler.hpp), tested where it can break: at the boundary,
// inside runs of equal deliver-at that straddle a page, across revoke/assign, and under a
// random interleaving of ingest, loading and firing, against the real Redis.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "broker/scheduler.hpp"
#include "redis/url.hpp"
#include "storage/job_store.hpp"
#include "support/redis_cleanup.hpp"
#include "support/redis_connect.hpp"
#include "support/test_env.hpp"

using namespace delayd;
using broker::Scheduler;
using broker::SchedulerOptions;

namespace {

constexpr std::int64_t T = 1'795'000'000'000;  // a fixed "now", epoch ms

struct Fixture {
  redis::RedisConnection redis{testing::redis_options(testing::require_env("REDIS_URL"))};
  storage::KeySchema keys{testing::unique_name("h")};
  storage::JobStore store{redis, keys, 60};
  const std::string shard = storage::shard_id("delay-ingest", 0);

  SchedulerOptions options(std::int64_t window, std::size_t load_batch = 1000) {
    SchedulerOptions o;
    o.load_window_ms = window;
    o.load_batch = load_batch;
    o.fire_batch = 100000;
    return o;
  }
  const std::string other_shard = storage::shard_id("delay-ingest", 1);

  // A job in Redis, as ingest writes it (in `shard` unless another is named).
  storage::AcceptOutcome put(const std::string& id, std::int64_t at, const std::string& in = {}) {
    storage::NewJob j;
    j.job_id = id;
    j.deliver_at = at;
    j.business = "b";
    j.shard = in.empty() ? shard : in;
    return store.accept(std::vector<storage::NewJob>{j}, T).front();
  }
  // What ingest does: accept in Redis, then offer to the scheduler.
  bool ingest(Scheduler& s, const std::string& id, std::int64_t at, const std::string& in = {}) {
    const auto out = put(id, at, in);
    return s.offer(in.empty() ? shard : in, id, out.deliver_at);
  }
  std::vector<storage::PendingEntry> pending_upto(std::int64_t upto) {
    return store.pending_between(shard, std::nullopt, upto, 1'000'000);
  }
  ~Fixture() { delayd::testing::delete_prefixed_keys(redis, keys.prefix()); }
};

}  // namespace

TEST_CASE_METHOD(Fixture,
                 "a job due exactly at the horizon is held at once but one a millisecond later waits for the loader",
                 "[horizon]") {
  Scheduler s(options(1000), T, store);
  s.assign(shard);
  CHECK_FALSE(s.horizon(shard).has_value());
  CHECK_FALSE(ingest(s, "before-first-load", T + 10));  // nothing loaded yet: the loader brings it
  s.refill(T);
  REQUIRE(s.horizon(shard) == T + 1000);
  CHECK(s.holds(shard, "before-first-load"));

  // Written after the loader's read, inside the window it loaded: ingest must hold it.
  CHECK(ingest(s, "inside", T + 500));
  CHECK(ingest(s, "at-horizon", T + 1000));
  CHECK_FALSE(ingest(s, "past-horizon", T + 1001));
  CHECK(s.holds(shard, "inside"));
  CHECK(s.holds(shard, "at-horizon"));
  CHECK_FALSE(s.holds(shard, "past-horizon"));

  s.refill(T + 200);  // the horizon moves to T + 1200 and reads (T + 1000, T + 1200]
  CHECK(s.horizon(shard) == T + 1200);
  CHECK(s.holds(shard, "past-horizon"));
  CHECK(s.held() == 4);  // nothing held twice
}

TEST_CASE_METHOD(Fixture, "a run of equal deliver-at longer than a page is loaded whole", "[horizon]") {
  for (int i = 0; i < 10; ++i) put("same-" + std::to_string(i), T + 300);
  for (int i = 0; i < 4; ++i) put("later-" + std::to_string(i), T + 400 + i);
  Scheduler s(options(1000, 3), T, store);
  s.assign(shard);
  s.refill(T, 100);
  CHECK(s.horizon(shard) == T + 1000);
  CHECK(s.held() == 14);
}

TEST_CASE_METHOD(Fixture, "a small page budget moves the horizon only as far as it has read", "[horizon]") {
  for (int i = 0; i < 10; ++i) put("j" + std::to_string(i), T + 10 * i);
  Scheduler s(options(1000, 3), T, store);
  s.assign(shard);
  s.refill(T, 1);  // one page of 3: j0, j1, j2 read; the horizon stops just below j2's time
  REQUIRE(s.horizon(shard).has_value());
  CHECK(*s.horizon(shard) == T + 19);
  for (const auto& e : pending_upto(*s.horizon(shard))) CHECK(s.holds(shard, e.job_id));
  CHECK_FALSE(ingest(s, "beyond", T + 25));  // not held: the horizon is below it, the loader will read it
  s.refill(T, 100);
  CHECK(s.horizon(shard) == T + 1000);
  CHECK(s.holds(shard, "beyond"));
  CHECK(s.held() == 11);
}

TEST_CASE_METHOD(Fixture, "timers come out at their deliver-at, never before", "[horizon]") {
  Scheduler s(options(1000), T, store);
  s.assign(shard);
  s.refill(T);
  ingest(s, "a", T + 5);
  CHECK(s.take_due(T + 4).empty());
  CHECK(s.next_due() == T + 5);
  const auto due = s.take_due(T + 5);
  REQUIRE(due.size() == 1);
  CHECK(s.job(due[0]).job_id == "a");
}

TEST_CASE_METHOD(Fixture,
                 "one job-id in two shards is two jobs: both are held and fire, a cancel takes only its shard's",
                 "[horizon]") {
  Scheduler s(options(1000), T, store);
  s.assign(shard);
  s.assign(other_shard);
  s.refill(T);
  // Offered by ingest while the other shard's job of the same id waits in memory.
  REQUIRE(ingest(s, "same", T + 30));
  REQUIRE(ingest(s, "same", T + 40, other_shard));
  CHECK(s.held() == 2);
  CHECK(s.in_wheel() == 2);
  // Loaded by refill after a revoke: both come back, each under its shard.
  s.revoke(shard);
  s.revoke(other_shard);
  s.assign(shard);
  s.assign(other_shard);
  s.refill(T);
  CHECK(s.held() == 2);
  std::vector<std::string> fired;
  for (auto slot : s.take_due(T + 40)) fired.push_back(s.shard_name(s.job(slot).shard));
  std::sort(fired.begin(), fired.end());
  CHECK(fired == std::vector<std::string>{shard, other_shard});

  // A cancel keyed to one shard cancels that shard's job and leaves the other's timer alone.
  // (A second scheduler over the same Redis: it loads the two "same" jobs too.)
  Scheduler c(options(1000), T, store);
  c.assign(shard);
  c.assign(other_shard);
  c.refill(T);
  REQUIRE(ingest(c, "twin", T + 50));
  REQUIRE(ingest(c, "twin", T + 60, other_shard));
  CHECK(c.cancel(other_shard, "twin"));
  CHECK(c.holds(shard, "twin"));
  CHECK_FALSE(c.holds(other_shard, "twin"));
  CHECK_FALSE(c.cancel(other_shard, "twin"));               // already gone
  std::vector<std::pair<std::string, std::int64_t>> twins;  // (shard, due_at) of each "twin" fired
  for (auto slot : c.take_due(T + 60)) {
    if (c.job(slot).job_id == "twin") twins.emplace_back(c.shard_name(c.job(slot).shard), c.job(slot).due_at);
  }
  CHECK(twins == std::vector<std::pair<std::string, std::int64_t>>{{shard, T + 50}});
}

TEST_CASE_METHOD(Fixture, "revoke drops a shard's waiting jobs and a new assignment loads them again", "[horizon]") {
  Scheduler s(options(1000), T, store);
  s.assign(shard);
  s.refill(T);
  ingest(s, "x", T + 100);
  ingest(s, "y", T + 200);
  REQUIRE(s.held() == 2);
  s.revoke(shard);
  CHECK(s.held() == 0);
  CHECK(s.in_wheel() == 0);
  CHECK_FALSE(ingest(s, "z", T + 50));  // not ours: not held
  s.assign(shard);
  s.refill(T);
  CHECK(s.held() == 3);
}

TEST_CASE_METHOD(Fixture, "a reload keeps what is held, holds each job once, and finds one nobody held", "[horizon]") {
  Scheduler s(options(1000), T, store);
  s.assign(shard);
  s.assign(other_shard);
  s.refill(T);
  CHECK(ingest(s, "held", T + 100));
  CHECK(ingest(s, "elsewhere", T + 300, other_shard));
  put("stranded", T + 200);  // written below the horizon, its offer lost: nobody holds it
  s.refill(T + 10);
  REQUIRE_FALSE(s.holds(shard, "stranded"));
  const auto due = s.take_due(T + 100);  // "held" is in flight across the reload
  REQUIRE(due.size() == 1);

  s.reload();
  CHECK_FALSE(s.horizon(shard).has_value());
  CHECK_FALSE(s.horizon(other_shard).has_value());
  CHECK(s.held() == 2);  // nothing let go
  s.refill(T + 100);
  CHECK(s.horizon(shard) == T + 1100);
  CHECK(s.holds(shard, "stranded"));
  CHECK(s.held() == 3);  // "held" (in flight) and "elsewhere" not held twice
  std::multiset<std::string> fired;
  for (const auto slot : s.take_due(T + 1000)) fired.insert(s.job(slot).job_id);
  CHECK(fired == std::multiset<std::string>{"elsewhere", "stranded"});
}

TEST_CASE_METHOD(Fixture, "the invariant holds under random ingest, loading and firing", "[horizon][random]") {
  std::mt19937_64 rng(GENERATE(1u, 2u, 3u));
  Scheduler s(options(500, 7), T, store);
  s.assign(shard);
  std::int64_t now = T;
  std::set<std::string> fired;
  std::uniform_int_distribution<int> op(0, 9);
  std::uniform_int_distribution<std::int64_t> ahead(-50, 1500);
  for (int step = 0; step < 600; ++step) {
    const int o = op(rng);
    if (o < 6) {
      ingest(s, "r" + std::to_string(step), now + ahead(rng));
    } else if (o < 8) {
      s.refill(now, 1 + static_cast<std::size_t>(step % 3));
    } else {
      now += 37;
      for (auto slot : s.take_due(now)) {
        CHECK(s.job(slot).due_at <= now);
        fired.insert(s.job(slot).job_id);
        // As the fire path does: claimed, then marked (a mark settles only a claim in flight).
        const std::vector<std::string> one{s.job(slot).job_id};
        store.claim(shard, one, now);
        store.mark_ready(shard, one, now);
        s.release(slot);
      }
    }
    // The invariant itself: every pending job due by the horizon is held.
    if (auto h = s.horizon(shard)) {
      for (const auto& e : pending_upto(*h)) {
        INFO("step " << step << ": " << e.job_id << " due " << e.deliver_at - T << " horizon " << *h - T);
        REQUIRE(s.holds(shard, e.job_id));
      }
    }
  }
  CHECK(fired.size() > 100);
}

TEST_CASE_METHOD(Fixture, "a job put back beyond the horizon stays held, an orphan is let go", "[horizon]") {
  Scheduler s(options(100), T, store);
  s.assign(shard);
  s.refill(T);
  REQUIRE(s.horizon(shard) == T + 100);
  ingest(s, "again", T + 10);
  ingest(s, "orphaned", T + 10);
  auto due = s.take_due(T + 10);
  REQUIRE(due.size() == 2);
  const auto again = s.job(due[0]).job_id == "again" ? due[0] : due[1];
  const auto orphaned = again == due[0] ? due[1] : due[0];

  // Its pending entry may still lie below the horizon (an outage kept it from being re-scored):
  // letting it go would strand it, since the loader has already passed it.
  CHECK(s.retry_at(again, T + 5000));
  CHECK(s.holds(shard, "again"));
  CHECK(s.next_due() == T + 5000);

  s.revoke(shard);  // "orphaned" is in flight: it stays until its outcome is known
  CHECK(s.holds(shard, "orphaned"));
  CHECK_FALSE(s.retry_at(orphaned, T + 20));
  CHECK_FALSE(s.holds(shard, "orphaned"));
}

TEST_CASE_METHOD(Fixture, "an id accepted again while its earlier job is in flight is held once that one is released",
                 "[horizon]") {
  // The race: a delivery is acknowledged and marked ready, its consumer publishes a new job
  // under the same id, ingest accepts it (AcceptKind::again) and moves it before the loop has
  // released the earlier job's slot. Released, the slot must not take the new job with it.
  Scheduler s(options(100), T, store);
  s.assign(shard);
  s.refill(T);
  ingest(s, "reused", T + 10);
  const auto due = s.take_due(T + 10);
  REQUIRE(due.size() == 1);
  CHECK(s.move(shard, "reused", T + 60));  // in flight: kept for when it settles
  CHECK(s.next_due() == std::nullopt);
  s.release(due[0]);  // the earlier job is done
  CHECK(s.holds(shard, "reused"));
  CHECK(s.next_due() == T + 60);
  CHECK(s.take_due(T + 59).empty());
  const auto again = s.take_due(T + 60);
  REQUIRE(again.size() == 1);
  CHECK(s.job(again[0]).job_id == "reused");

  // Moved while in flight and then retried: the earlier of the two times, once.
  CHECK(s.move(shard, "reused", T + 90));
  CHECK(s.retry_at(again[0], T + 95));
  CHECK(s.next_due() == T + 90);
  s.release(again[0]);  // waiting: cancelled and forgotten, nothing kept
  CHECK_FALSE(s.holds(shard, "reused"));
  CHECK(s.next_due() == std::nullopt);

  // Without a move, a release forgets the job, as before.
  ingest(s, "once", T + 70);
  const auto once = s.take_due(T + 70);
  REQUIRE(once.size() == 1);
  s.release(once[0]);
  CHECK_FALSE(s.holds(shard, "once"));
}
