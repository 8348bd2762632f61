// Broker-side figures the wheel benchmark cannot give: what a job costs in Redis (throughput of
// the job store's batched scripts, bytes per pending and per finished job) and what a held job
// costs in delayd's memory (the held-jobs table plus its wheel timer). Needs a Redis; run by
// bench/run-broker.sh, which starts the local stack. One JSON object per line.
//
//   broker_bench --redis-url redis://127.0.0.1:16379 --n 200000 [--value-bytes 100] [--batch 500]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "bench/bench_support.hpp"
#include "bench/redis_info.hpp"
#include "broker/held_jobs.hpp"
#include "broker/scheduler.hpp"
#include "redis/url.hpp"
#include "storage/job_store.hpp"
#include "wheel/timing_wheel.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Microseconds Redis spent running the job store's commands so far (INFO commandstats: the
// scripts (FCALL, or EVALSHA), with the commands they call, and the record reads), whoever
// waited for them.
double redis_store_usec(delayd::redis::RedisConnection& redis) {
  auto r = redis.command({"INFO", "commandstats"});
  const std::string text(r.view().str());
  double usec = 0;
  for (const char* cmd : {"cmdstat_fcall:", "cmdstat_evalsha:", "cmdstat_mget:"}) {
    const auto at = text.find(cmd);
    if (at == std::string::npos) continue;
    const auto u = text.find("usec=", at);
    usec += std::stod(text.substr(u + 5));
  }
  return usec;
}

// One figure; redis_usec (when given): Redis's own time for the n jobs (redis_store_usec());
// main_usec (when given): its main thread's CPU for them (redis_main_cpu_usec()).
void line(const std::string& what, long n, double seconds, double bytes_per_job, double redis_usec = -1,
          double main_usec = -1) {
  std::printf("{\"bench\":\"%s\",\"n\":%ld,\"seconds\":%.3f,\"jobs_per_s\":%.0f,\"bytes_per_job\":%.1f", what.c_str(),
              n, seconds, seconds > 0 ? static_cast<double>(n) / seconds : 0.0, bytes_per_job);
  if (redis_usec >= 0) std::printf(",\"redis_us_per_job\":%.2f", redis_usec / static_cast<double>(n));
  if (main_usec >= 0) std::printf(",\"redis_main_us_per_job\":%.2f", main_usec / static_cast<double>(n));
  std::printf("}\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const auto o = delayd::bench::parse_options(argc, argv, {"--redis-url", "--n", "--value-bytes", "--batch"});
  if (!o) return 2;
  using delayd::bench::option;
  const std::string url = option(*o, "--redis-url", "redis://127.0.0.1:16379");
  const long n = std::stol(option(*o, "--n", "200000"));
  const std::size_t value_bytes = std::stoul(option(*o, "--value-bytes", "100"));
  const std::size_t batch = std::stoul(option(*o, "--batch", "500"));

  using namespace delayd::storage;
  using namespace delayd::redis;
  RedisConnection redis(parse_redis_url(url));
  const std::string prefix = delayd::bench::run_prefix(redis, "bench-");
  JobStore store(redis, KeySchema(prefix), 3600);
  const std::int64_t base = 1'900'000'000'000;  // far in the future: nothing here is ever due

  std::vector<std::string> ids;
  ids.reserve(static_cast<size_t>(n));
  for (long i = 0; i < n; ++i) ids.push_back("bench-job-" + std::to_string(i));

  auto shard_of = [](long k) { return shard_id("delay-ingest", static_cast<std::int32_t>(k % 4)); };
  // accept: what ingest does per batch (one script call per shard and 500 jobs).
  const long long mem0 = static_cast<long long>(delayd::bench::info_number(redis, "memory", "used_memory"));
  const double accept_us0 = redis_store_usec(redis);
  auto t0 = Clock::now();
  std::vector<NewJob> jobs;
  for (long i = 0; i < n; i += static_cast<long>(batch)) {
    jobs.clear();
    for (long k = i; k < std::min(n, i + static_cast<long>(batch)); ++k) {
      NewJob j;
      j.job_id = ids[static_cast<size_t>(k)];
      j.deliver_at = base + k;
      j.business = "orders";
      j.shard = shard_of(k);
      j.key = "order-" + std::to_string(k);
      j.value = std::string(value_bytes, 'v');
      j.headers = {{"trace-id", "abcdef0123456789"}};  // ingest keeps deliver-at and business apart
      jobs.push_back(std::move(j));
    }
    store.accept(jobs, base);
  }
  const double accept_s = seconds_since(t0);
  const long long mem1 = static_cast<long long>(delayd::bench::info_number(redis, "memory", "used_memory"));
  line("redis_accept", n, accept_s, static_cast<double>(mem1 - mem0) / static_cast<double>(n),
       redis_store_usec(redis) - accept_us0);
  {
    // Where a pending job's bytes go (MEMORY USAGE, shard 0): its record (a field of the shard's
    // hash of delay records: key_schema.hpp) and the pending set's entry; the rest of the delta
    // above is Redis's own (the main dictionary's buckets, the waiting index while it was kept,
    // script and client buffers).
    const std::string shard = shard_of(0);
    auto usage = [&](const std::string& key) {
      auto r = redis.command({"MEMORY", "USAGE", key, "SAMPLES", "0"});
      return r.view().is_integer() ? static_cast<double>(r.view().integer()) : 0.0;
    };
    const std::string records = store.keys().delay_records(shard);
    const double in_hash = static_cast<double>(redis.command({"HLEN", records}).view().integer());
    const double record = usage(records) / std::max(in_hash, 1.0);  // per job: the hash's bytes over its fields
    double record_len = 0;
    const long sampled = std::min<long>(n / 4, 1000);
    for (long k = 0; k < sampled; ++k) {
      auto r = redis.command({"HSTRLEN", records, ids[static_cast<size_t>(k * 4)]});
      record_len += static_cast<double>(r.view().integer());
    }
    // The pending set: its directory of windows, each window's directory and every leaf (key_schema.hpp).
    double entries = 0, set_bytes = usage(store.keys().pending(shard));
    std::size_t leaves = 0;
    auto windows = redis.command({"ZRANGE", store.keys().pending(shard), "0", "-1"});
    for (std::size_t k = 0; k < windows.view().size(); ++k) {
      const std::string window = store.keys().pending_window(shard, windows.view()[k].str());
      set_bytes += usage(window);
      auto separators = redis.command({"ZRANGE", window, "0", "-1"});
      for (std::size_t i = 0; i < separators.view().size(); ++i, ++leaves) {
        const std::string leaf = store.keys().pending_leaf(shard, separators.view()[i].str());
        set_bytes += usage(leaf);
        entries += static_cast<double>(redis.command({"ZCARD", leaf}).view().integer());
      }
    }
    std::printf(
        "{\"bench\":\"redis_pending_job_parts\",\"record_bytes\":%.1f,\"record_length\":%.1f,"
        "\"pending_entry_bytes\":%.1f,\"windows\":%zu,\"leaves\":%zu}\n",
        record, record_len / static_cast<double>(sampled), set_bytes / entries, windows.view().size(), leaves);
  }

  // claim, then mark_ready: what the fire path does per batch, around the Kafka round trip.
  auto by_shard = [&](long i) {
    std::map<std::string, std::vector<std::string>> out;
    for (long k = i; k < std::min(n, i + static_cast<long>(batch)); ++k)
      out[shard_of(k)].push_back(ids[static_cast<size_t>(k)]);
    return out;
  };
  double claim_s = 0, mark_s = 0, claim_us = 0, mark_us = 0;
  const double main0 = delayd::bench::redis_main_cpu_usec(redis);
  for (long i = 0; i < n; i += static_cast<long>(batch)) {
    const auto groups = by_shard(i);
    const double us0 = redis_store_usec(redis);
    t0 = Clock::now();
    std::map<std::string, std::vector<JobStore::Delivered>> delivered;
    for (const auto& [shard, part] : groups) {
      for (const Claim& c : store.claim(shard, part, base + n)) {
        // As the fire path marks a plain job after Kafka acknowledged it (the fast way).
        delivered[shard].push_back({.job_id = c.job_id,
                                    .deliver_at = c.deliver_at,
                                    .attempt = c.attempt,
                                    .business = c.business,
                                    .mode = c.plain ? JobStore::Mode::fast : JobStore::Mode::drop});
      }
    }
    claim_s += seconds_since(t0);
    const double us1 = redis_store_usec(redis);
    t0 = Clock::now();
    for (const auto& [shard, jobs] : delivered)
      store.mark_ready(shard, std::span<const JobStore::Delivered>(jobs), base + n);
    mark_s += seconds_since(t0);
    claim_us += us1 - us0;
    mark_us += redis_store_usec(redis) - us1;
  }
  const long long mem2 = static_cast<long long>(delayd::bench::info_number(redis, "memory", "used_memory"));
  line("redis_claim", n, claim_s, 0, claim_us);
  line("redis_mark_ready", n, mark_s, 0, mark_us);
  line("redis_claim_and_mark_ready", n, claim_s + mark_s, static_cast<double>(mem2 - mem0) / static_cast<double>(n),
       claim_us + mark_us, delayd::bench::redis_main_cpu_usec(redis) - main0);

  // delayd's memory per held job: the table entry (id, slot, index node) plus the wheel timer.
  {
    delayd::broker::HeldJobs held;
    delayd::wheel::TimingWheel wheel({}, static_cast<std::uint64_t>(base));
    const auto rss0 = static_cast<long>(delayd::bench::resident_bytes());
    t0 = Clock::now();
    for (long i = 0; i < n; ++i) {
      const auto slot =
          held.insert({.job_id = ids[static_cast<size_t>(i)], .due_at = base + 1 + (i % 60000), .timer = {}});
      held.at(slot).timer = wheel.schedule(static_cast<std::uint64_t>(base + 1 + (i % 60000)), slot).handle;
    }
    const double hold_s = seconds_since(t0);
    const auto rss1 = static_cast<long>(delayd::bench::resident_bytes());
    line("delayd_held_job", n, hold_s, static_cast<double>(rss1 - rss0) / static_cast<double>(n));
  }

  // The loader: jobs pending in Redis, all due within the load window, read into the wheel by
  // refill() as the loop calls it (two pages per shard per call), as after a restart.
  {
    std::vector<NewJob> load;
    for (long k = 0; k < n; ++k) {
      NewJob j;
      j.job_id = "load-" + std::to_string(k);
      // Within the first 7/8 of the window: the loader stops there until time moves on.
      j.deliver_at = base + 1 + (k % 50000);
      j.business = "orders";
      j.shard = shard_of(k);
      j.value = std::string(value_bytes, 'v');
      load.push_back(std::move(j));
      if (load.size() == batch || k + 1 == n) {
        store.accept(load, base);
        load.clear();
      }
    }
    delayd::broker::SchedulerOptions so;
    so.load_window_ms = 60000;
    so.load_batch = 1000;
    so.max_held = static_cast<std::size_t>(n) + 1;
    delayd::broker::Scheduler scheduler(so, base, store);
    for (int p = 0; p < 4; ++p) scheduler.assign(shard_of(p));
    t0 = Clock::now();
    for (int i = 0; i < 100000 && scheduler.held() < static_cast<std::size_t>(n); ++i) scheduler.refill(base, 2);
    if (scheduler.held() < static_cast<std::size_t>(n))
      std::fprintf(stderr, "loader: held %zu of %ld\n", scheduler.held(), n);
    line("delayd_load_into_wheel", n, seconds_since(t0), 0);
  }

  // Clean up: every key under the bench's prefix.
  delayd::bench::unlink_matching(redis, prefix + ":*");

  return 0;
}
