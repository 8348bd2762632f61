// What the console's job listing costs on a big store (docs/operating/admin.md, "Finding jobs"): 1 000 000 pending
// jobs of ten businesses (and one rare one), 1 000 000 delivered ones of which 1 % failed, over
// four shards; then pages of 50 walked as GET /jobs walks them (storage/job_browse.hpp), first
// pages and deep ones, timed per page. Also the Redis bytes the state indexes take per job.
// Needs a Redis; run by bench/run-console.sh. One JSON object per line.
//
//   console_bench --redis-url redis://127.0.0.1:16379 [--pending 1000000] [--finished 1000000]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "bench/bench_support.hpp"
#include "bench/redis_info.hpp"
#include "redis/url.hpp"
#include "storage/job_browse.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace delayd::storage;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const auto o = delayd::bench::parse_options(argc, argv, {"--redis-url", "--pending", "--finished"});
  if (!o) return 2;
  using delayd::bench::option;
  const std::string url = option(*o, "--redis-url", "redis://127.0.0.1:16379");
  const long pending = std::stol(option(*o, "--pending", "1000000"));
  const long finished = std::stol(option(*o, "--finished", "1000000"));
  delayd::redis::RedisConnection redis(delayd::redis::parse_redis_url(url));
  const std::string prefix = delayd::bench::run_prefix(redis, "console-bench-");
  JobStore store(redis, KeySchema(prefix), 7 * 86400);
  constexpr int kShards = 4;
  constexpr std::size_t kBatch = 500;
  const auto shard_of = [](long k) { return shard_id("delay-ingest", static_cast<std::int32_t>(k % kShards)); };
  const std::int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  // Pending: due over the next 24 h; business b0..b9, and "rare" for one job in 1 000.
  auto t0 = Clock::now();
  std::vector<NewJob> jobs;
  const auto flush = [&] {
    store.accept(jobs, now);
    jobs.clear();
  };
  for (long k = 0; k < pending; ++k) {
    NewJob j;
    j.job_id = "p-" + std::to_string(k);
    j.deliver_at = now + 3'600'000 + (k * 86'400'000 / std::max(1L, pending));
    j.business = k % 1000 == 999 ? "rare" : "b" + std::to_string(k % 10);
    j.shard = shard_of(k);
    j.value = std::string(200, 'v');
    jobs.push_back(std::move(j));
    if (jobs.size() == kBatch) flush();
  }
  if (!jobs.empty()) flush();
  const double fill_s = ms_since(t0) / 1000;
  // The waiting index of the rare business (the others have more than kWaitingIndexMax jobs in
  // each shard, so their shards keep none): its bytes per job it lists.
  long long waiting_bytes = 0, waiting_jobs = 0;
  for (int s = 0; s < kShards; ++s) {
    const std::string shard = shard_id("delay-ingest", s);
    auto r = redis.command({"MEMORY", "USAGE", store.keys().waiting(shard, "rare"), "SAMPLES", "0"});
    if (r.view().is_integer()) waiting_bytes += r.view().integer();
    waiting_jobs += redis.command({"ZCARD", store.keys().waiting(shard, "rare")}).view().integer();
  }
  std::printf(
      "{\"bench\":\"fill_pending\",\"n\":%ld,\"seconds\":%.1f,\"jobs_per_s\":%.0f,\"waiting_index_jobs\":%lld,"
      "\"waiting_index_bytes_per_job\":%.1f}\n",
      pending, fill_s, static_cast<double>(pending) / fill_s, waiting_jobs,
      waiting_jobs ? static_cast<double>(waiting_bytes) / static_cast<double>(waiting_jobs) : 0.0);
  // Delivered: accepted due now, claimed and marked ready; one in 100 failed instead.
  t0 = Clock::now();
  const long long mem0 = static_cast<long long>(delayd::bench::info_number(redis, "memory", "used_memory"));
  long failed = 0;
  for (long k = 0; k < finished; k += static_cast<long>(kBatch)) {
    std::map<std::string, std::vector<std::string>> by_shard;
    for (long i = k; i < std::min(finished, k + static_cast<long>(kBatch)); ++i) {
      NewJob j;
      j.job_id = "d-" + std::to_string(i);
      j.deliver_at = now - 1000;
      j.business = "b" + std::to_string(i % 10);
      j.shard = shard_of(i);
      j.value = std::string(200, 'v');
      by_shard[j.shard].push_back(j.job_id);
      jobs.push_back(std::move(j));
    }
    flush();
    for (auto& [shard, ids] : by_shard) {
      store.claim(shard, ids, now);
      std::vector<std::string> ready;
      for (const std::string& id : ids) {
        if (std::stol(id.substr(2)) % 100 == 42) {
          store.mark_failed(shard, id, "reported failed: upstream timeout after 30 s", now, DeadLetterAt{0, 1});
          ++failed;
        } else {
          ready.push_back(id);
        }
      }
      store.mark_ready(shard, ready, now);
    }
  }
  const long long mem1 = static_cast<long long>(delayd::bench::info_number(redis, "memory", "used_memory"));
  long long index_bytes = 0;
  for (int s = 0; s < kShards; ++s) {
    for (const char* st : {"ready", "failed"}) {
      auto r =
          redis.command({"MEMORY", "USAGE", store.keys().state_index(shard_id("delay-ingest", s), st), "SAMPLES", "0"});
      if (r.view().is_integer()) index_bytes += r.view().integer();
    }
  }
  std::printf(
      "{\"bench\":\"fill_finished\",\"n\":%ld,\"failed\":%ld,\"seconds\":%.1f,\"bytes_per_finished_job\":%.1f,"
      "\"index_bytes_per_finished_job\":%.1f}\n",
      finished, failed, ms_since(t0) / 1000, static_cast<double>(mem1 - mem0) / static_cast<double>(finished),
      static_cast<double>(index_bytes) / static_cast<double>(finished));
  std::fflush(stdout);

  // Pages of 50: the first page 100 times (each a new walk), then a walk of up to 200 pages.
  const auto measure = [&](const std::string& name, JobFilter f) {
    std::vector<double> first, deep;
    std::size_t jobs_seen = 0, partial = 0, examined = 0;
    for (int i = 0; i < 100; ++i) {
      const auto t = Clock::now();
      const WalkPage p = walk_jobs(store, f, WalkCursor{now, 0, {}, {}}, 50, now);
      first.push_back(ms_since(t));
      examined += p.examined;
    }
    WalkCursor c{now, 0, {}, {}};
    for (int i = 0; i < 200; ++i) {
      const auto t = Clock::now();
      const WalkPage p = walk_jobs(store, f, c, 50, now);
      deep.push_back(ms_since(t));
      jobs_seen += p.jobs.size();
      partial += p.partial ? 1 : 0;
      if (!p.next) break;
      c = *p.next;
    }
    std::printf(
        "{\"bench\":\"page\",\"filter\":\"%s\",\"first_p50_ms\":%.2f,\"first_p99_ms\":%.2f,\"first_examined\":%zu,"
        "\"walk_pages\":%zu,\"walk_jobs\":%zu,\"walk_partial_pages\":%zu,\"walk_p50_ms\":%.2f,\"walk_p99_ms\":%.2f}\n",
        name.c_str(), pct(first, 0.5), pct(first, 0.99), examined / 100, deep.size(), jobs_seen, partial,
        pct(deep, 0.5), pct(deep, 0.99));
    std::fflush(stdout);
  };
  JobFilter waiting;
  waiting.states = {JobState::delay};
  measure("delay", waiting);
  JobFilter business = waiting;
  business.business = "b3";
  measure("delay business=b3 (10 %)", business);
  JobFilter rare = waiting;
  rare.business = "rare";
  measure("delay business=rare (0.1 %)", rare);
  JobFilter failed_jobs;
  failed_jobs.states = {JobState::failed};
  measure("failed", failed_jobs);
  JobFilter failed_text = failed_jobs;
  failed_text.error_text = "TIMEOUT";
  measure("failed error=TIMEOUT", failed_text);
  JobFilter ready_business;
  ready_business.states = {JobState::ready};
  ready_business.business = "b7";
  measure("ready business=b7 (10 %)", ready_business);
  JobFilter by_prefix = waiting;
  by_prefix.id_prefix = "p-12345";
  measure("delay id_prefix=p-12345 (11 jobs)", by_prefix);

  // Leave nothing behind.
  std::vector<std::string> keys;
  for (int s = 0; s < kShards; ++s) {
    const std::string shard = shard_id("delay-ingest", s);
    const KeySchema& k = store.keys();
    for (const char* st : {"ready", "failed", "cancelled", "running", "finished"})
      keys.push_back(k.state_index(shard, st));
    keys.push_back(k.pending(shard));
    keys.push_back(k.stats(shard));
    keys.push_back(k.in_flight(shard));
  }
  for (const auto& key : keys) redis.command({"UNLINK", key});
  delayd::bench::unlink_matching(redis, prefix + ":*");
  return 0;
}
