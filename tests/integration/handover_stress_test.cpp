// The handover between the ingest thread and the wheel's owner (broker/handover.hpp), raced for
// real: an ingest thread accepts jobs and cancels some over its own Redis connection and hands
// each over, while the owner thread refills over its own, fires through the claim and mark
// stages (broker/fire_stages.hpp: two more threads and connections, results applied by the
// owner, as FirePath does) and checks the horizon invariant across threads at random moments:
//     every pending job of an owned shard due by the horizon is held, or its offer is queued.
// A rebalance is relayed mid-run and must be served before relay() returns. Built also with
// ThreadSanitizer in CI (scripts/test.sh, build-tsan/), where a missing lock is a failure.
// A second case checks which listener each kind of relayed rebalance runs.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <thread>

#include "broker/fire_stages.hpp"
#include "broker/handover.hpp"
#include "broker/scheduler.hpp"
#include "broker/wall_clock.hpp"
#include "redis/url.hpp"
#include "storage/job_store.hpp"
#include "support/redis_cleanup.hpp"
#include "support/redis_connect.hpp"
#include "support/test_env.hpp"

using namespace delayd;
using broker::Handover;
using broker::Scheduler;

namespace {

std::int64_t now_ms() { return broker::system_now_ms(); }

redis::RedisConnection connect() {
  return redis::RedisConnection(testing::redis_options(testing::require_env("REDIS_URL")));
}

struct Sizes {
  int batches = 120;  // ingest batches
  int per_batch = 100;
  std::int64_t spread_ms = 1500;  // deliver_at in [now - 50, now + spread_ms)
};

}  // namespace

TEST_CASE(
    "ingest on a thread of its own races refills and fires: the invariant holds at every check, each job fires once "
    "and never early",
    "[handover][stress]") {
  const Sizes sizes;
  const storage::KeySchema keys{testing::unique_name("hs")};
  redis::RedisConnection loop_redis = connect();
  redis::RedisConnection ingest_redis = connect();
  redis::RedisConnection check_redis = connect();
  redis::RedisConnection claim_redis = connect();
  redis::RedisConnection mark_redis = connect();
  storage::JobStore loop_store(loop_redis, keys, 60);
  storage::JobStore claim_store(claim_redis, keys, 60);
  storage::JobStore mark_store(mark_redis, keys, 60);
  storage::JobStore ingest_store(ingest_redis, keys, 60);
  storage::JobStore check_store(check_redis, keys, 60);
  const std::vector<std::string> shards = {storage::shard_id("hs", 0), storage::shard_id("hs", 1)};
  const std::string late_shard = storage::shard_id("hs", 2);  // assigned by a relayed rebalance

  broker::SchedulerOptions options;
  options.load_window_ms = 300;  // short: most jobs arrive beyond the horizon and come by refill
  options.load_batch = 200;
  options.fire_batch = 500;
  Scheduler scheduler(options, now_ms(), loop_store);
  for (const auto& s : shards) scheduler.assign(s);

  Handover handover;
  const broker::DurationHistogram no_latency;  // the stages' clients are not timed here
  broker::ClaimWorker claimer(
      "claim", claim_store, no_latency, broker::claim_work(), [&] { handover.notify(); }, 1);
  broker::MarkWorker marker("mark", mark_store, no_latency, broker::mark_work(), [&] { handover.notify(); });
  bool late_assigned = false;  // written by the owner in the listener, read by ingest after relay()
  broker::Handover::Listener listener;
  listener.group.assigned = [&](const std::vector<connectors::TopicPartition>& tps) {
    for (const auto& tp : tps) scheduler.assign(storage::shard_id(tp.topic, tp.partition));
    late_assigned = true;
  };

  // The ingest thread's progress, for the cross-thread check: a batch is `started` before its
  // accept is posted, and batches before `pushed` have their offers queued. As IngestPath does
  // (send-ahead), each batch is posted and collected when the next one is posted, or before a
  // cancel: so a batch's jobs are in Redis, and not yet offered, while the next one is read.
  std::atomic<int> started{0}, pushed{0};
  std::atomic<bool> ingest_done{false};
  std::set<std::string> cancelled;  // ingest's; read by the owner only after join()
  bool relay_saw_assignment = false;
  std::thread ingest([&] {
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<std::int64_t> due(-50, sizes.spread_ms - 1);
    std::vector<std::pair<std::string, std::string>> written;  // (shard, id)
    struct Posted {
      int batch = 0;
      std::vector<storage::NewJob> jobs;
      storage::JobStore::PostedAccept call;
    };
    std::optional<Posted> posted;
    auto collect = [&] {
      if (!posted) return;
      const auto outcomes = ingest_store.accept_collect(posted->call);
      for (std::size_t i = 0; i < posted->jobs.size(); ++i) {
        if (outcomes[i].state == storage::JobState::delay) {
          handover.offer(posted->jobs[i].shard, posted->jobs[i].job_id, outcomes[i].deliver_at);
          written.emplace_back(posted->jobs[i].shard, posted->jobs[i].job_id);
        }
      }
      handover.flush();
      pushed.store(posted->batch + 1);
      posted.reset();
    };
    for (int b = 0; b < sizes.batches; ++b) {
      if (b == sizes.batches / 2) {
        collect();  // as IngestStage does before relaying (and the check below waits for it)
        handover.relay(Handover::Rebalance::assigned, {{"hs", 2}});
        relay_saw_assignment = late_assigned;  // a data race unless relay() waited for serve()
      }
      std::vector<storage::NewJob> jobs;
      const std::int64_t now = now_ms();
      for (int k = 0; k < sizes.per_batch; ++k) {
        storage::NewJob j;
        j.job_id = "j" + std::to_string(b) + "-" + std::to_string(k);
        j.deliver_at = now + due(rng);
        j.business = "b";
        j.shard = b >= sizes.batches / 2 && k % 3 == 0 ? late_shard : shards[static_cast<std::size_t>(k) % 2];
        jobs.push_back(std::move(j));
      }
      started.fetch_add(1);
      auto call = ingest_store.accept_post(jobs, now);
      collect();  // the batch before, while Redis runs this one
      posted = Posted{b, std::move(jobs), std::move(call)};
      if (b % 7 == 3) {  // cancel a few jobs written so far, as a cancel record would
        collect();
        for (int c = 0; c < 5; ++c) {
          const auto& [shard, id] = written[static_cast<std::size_t>(rng() % written.size())];
          const storage::Transition t = ingest_store.cancel(shard, id, now_ms());
          if (t.changed && t.state == storage::JobState::cancelled) {
            handover.cancel(shard, id);
            cancelled.insert(id);
          }
        }
        handover.flush();
      }
      if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 3));
    }
    collect();
    ingest_done = true;
    handover.notify();
  });

  // The owner: serve, refill, fire; now and then check the invariant against Redis.
  std::map<std::string, int> fired;  // job-id -> times delivered
  int early = 0, checks = 0, violations = 0;
  std::string first_violation;
  std::mt19937_64 rng(7);
  // Claims in flight, by request id: the slots they claim (the owner's, like FirePath's).
  std::map<std::uint64_t, std::pair<std::string, std::vector<Scheduler::Slot>>> claiming;
  // Marks in flight, by request id: the slots of the jobs they mark.
  std::map<std::uint64_t, std::vector<Scheduler::Slot>> marking;
  std::uint64_t next_id = 0;
  int stage_errors = 0;
  auto fire = [&] {
    for (auto& r : claimer.take_done()) {
      auto [shard, group] = std::move(claiming.at(r.id));
      claiming.erase(r.id);
      if (r.error) {
        ++stage_errors;
        for (auto slot : group) scheduler.release(slot);
        continue;
      }
      broker::MarkRequest mark{++next_id, shard, {}, now_ms()};
      std::vector<Scheduler::Slot> delivered;
      for (std::size_t i = 0; i < r.claims.size(); ++i) {
        const storage::Claim& c = r.claims[i];
        // The wheel released the timer before Redis's deliver_at: the claim says early.
        if (c.kind == storage::Claim::Kind::early) ++early;
        if (c.kind == storage::Claim::Kind::deliver) {
          ++fired[c.job_id];
          mark.jobs.push_back({c.job_id, c.deliver_at, c.attempt, c.business, storage::JobStore::Mode::fast, {}, 0});
          delivered.push_back(group[i]);
        } else {
          scheduler.release(group[i]);
        }
      }
      // A delivered job stays held until its mark is written, as FirePath keeps it (follow_up()):
      // an offer that arrives meanwhile (its batch collected after a refill read the job) finds
      // it held, instead of holding it again and claiming it a second time while the mark is in
      // flight, which the claim would grant (an in-flight job is delivered again: a crash's
      // redelivery).
      if (!mark.jobs.empty()) {
        marking.emplace(mark.id, std::move(delivered));
        marker.submit(std::move(mark));
      }
    }
    for (auto& r : marker.take_done()) {
      stage_errors += r.error ? 1 : 0;
      for (auto slot : marking.at(r.id)) scheduler.release(slot);
      marking.erase(r.id);
    }
    const std::int64_t now = now_ms();
    std::map<std::string, std::vector<Scheduler::Slot>> by_shard;
    for (auto slot : scheduler.take_due(now)) by_shard[scheduler.shard_name(scheduler.job(slot).shard)].push_back(slot);
    for (auto& [shard, group] : by_shard) {
      broker::ClaimRequest r{++next_id, shard, {}, now, 0, std::nullopt, {}, {}};
      for (auto slot : group) {
        r.job_ids.push_back(scheduler.job(slot).job_id);
        r.due_at.push_back(scheduler.job(slot).due_at);
      }
      claiming.emplace(r.id, std::make_pair(shard, std::move(group)));
      claimer.submit(std::move(r));
    }
  };
  // Every job pending in Redis due by its shard's horizon is held once the offers of every batch
  // that may have written it are served.
  auto check = [&] {
    std::vector<std::pair<std::string, storage::PendingEntry>> seen;
    for (const auto& shard : scheduler.owned_shards()) {
      const auto h = scheduler.horizon(shard);
      if (!h) continue;
      for (auto& e : check_store.pending_between(shard, std::nullopt, *h, 0)) seen.emplace_back(shard, std::move(e));
    }
    const int may_have_written = started.load();
    while (pushed.load() < may_have_written) std::this_thread::yield();
    handover.serve(scheduler, listener);
    for (const auto& [shard, e] : seen) {
      if (scheduler.holds(shard, e.job_id)) continue;
      // Not held: fine only if it left the pending set meanwhile (a cancel) or fired.
      const auto still = check_store.pending_between(shard, e.deliver_at - 1, e.deliver_at, 0);
      const bool pending = std::any_of(still.begin(), still.end(), [&](const auto& p) { return p.job_id == e.job_id; });
      if (pending && fired.count(e.job_id) == 0) {
        if (violations++ == 0) first_violation = shard + "/" + e.job_id + " due " + std::to_string(e.deliver_at);
      }
    }
    ++checks;
  };

  auto pending_anywhere = [&] {
    std::size_t n = 0;
    for (const auto& shard : scheduler.owned_shards()) {
      n += check_store.pending_between(shard, std::nullopt, std::numeric_limits<std::int64_t>::max(), 1).size();
    }
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    handover.serve(scheduler, listener);
    scheduler.refill(now_ms(), 2);
    fire();
    if (rng() % 8 == 0) check();
    if (ingest_done && scheduler.held() == 0 && claiming.empty() && marker.outstanding() == 0 &&
        pending_anywhere() == 0) {
      break;
    }
    handover.wait(std::chrono::milliseconds(2));
  }
  ingest.join();

  const int written = sizes.batches * sizes.per_batch;
  const int expected = written - static_cast<int>(cancelled.size());
  int twice = 0;
  for (const auto& [id, n] : fired) twice += n > 1 ? 1 : 0;
  INFO("handover stress: " << fired.size() << " of " << expected << " jobs fired (" << cancelled.size()
                           << " cancelled), " << twice << " twice, " << early << " early; " << checks
                           << " invariant checks, " << violations << " violations" << (violations ? ", first " : "")
                           << first_violation);
  std::cout << "handover stress: " << fired.size() << " of " << expected << " jobs fired (" << cancelled.size()
            << " cancelled), " << twice << " twice, " << early << " early; " << checks << " invariant checks, "
            << violations << " violations" << std::endl;
  CHECK(relay_saw_assignment);
  CHECK(stage_errors == 0);
  CHECK(violations == 0);
  CHECK(early == 0);
  CHECK(twice == 0);
  CHECK(static_cast<int>(fired.size()) == expected);
  for (const auto& id : cancelled) CHECK(fired.count(id) == 0);
  CHECK(checks > 10);
  testing::delete_prefixed_keys(loop_redis, keys.prefix());
}

TEST_CASE("a relayed rebalance runs the listener of its kind: a leave as left, else as lost, else as revoked",
          "[handover]") {
  const storage::KeySchema keys{testing::unique_name("hr")};
  redis::RedisConnection redis = connect();
  storage::JobStore store(redis, keys, 60);
  Scheduler scheduler(broker::SchedulerOptions{}, now_ms(), store);
  Handover handover;
  std::vector<std::string> heard;  // the owner's, read after each relay() returned
  auto hear = [&](const std::string& what) {
    return [&heard, what](const std::vector<connectors::TopicPartition>& tps) {
      heard.push_back(what + " " + tps.at(0).topic + "[" + std::to_string(tps.at(0).partition) + "]");
    };
  };
  // Relays on an ingest thread while this one serves, as IngestStage and the loop do.
  auto relay = [&](Handover::Rebalance what, const Handover::Listener& listener) {
    std::atomic<bool> done{false};
    std::thread ingest([&] {
      handover.relay(what, {{"t", 3}});
      done = true;
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done && std::chrono::steady_clock::now() < deadline) {
      handover.serve(scheduler, listener);
      handover.wait(std::chrono::milliseconds(5));
    }
    ingest.join();
    REQUIRE(done);
  };

  Handover::Listener all;
  all.group.assigned = hear("assigned");
  all.group.revoked = hear("revoked");
  all.group.lost = hear("lost");
  all.left = hear("left");
  relay(Handover::Rebalance::assigned, all);
  relay(Handover::Rebalance::revoked, all);
  relay(Handover::Rebalance::lost, all);
  relay(Handover::Rebalance::left, all);
  CHECK(heard == std::vector<std::string>{"assigned t[3]", "revoked t[3]", "lost t[3]", "left t[3]"});

  heard.clear();
  Handover::Listener no_left = all;
  no_left.left = nullptr;
  relay(Handover::Rebalance::left, no_left);
  Handover::Listener group_revoke_only;
  group_revoke_only.group.revoked = hear("revoked");
  relay(Handover::Rebalance::left, group_revoke_only);
  relay(Handover::Rebalance::lost, group_revoke_only);
  CHECK(heard == std::vector<std::string>{"lost t[3]", "revoked t[3]", "revoked t[3]"});
}
