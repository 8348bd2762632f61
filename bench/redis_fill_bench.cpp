// What Redis alone does along a fill, the machine's limit for the fill phase of run-scale.sh
// (docs/performance/scale.md, "Ten million waiting"): is the fall of the accept rate along ten million
// delayd's, or Redis's own on this machine?
//
// Up to four fills of N jobs each, one after the other on the same Redis, each from an empty
// prefix (the one before unlinked and freed first):
//   hash     the floor: a job's record written with one HSET into its shard's hash, pipelined, a
//            batch at a time (any store that finds a job by its id writes at least this)
//   plain    the same plus one ZADD of its due time into its shard's sorted set
//   buckets  the same, the due time into a sorted set of the shard's second it falls in (its key
//            named by arithmetic: no lookup finds it), plus that second's ZADD NX into the
//            shard's directory of seconds (a member already there costs a hash lookup, not a
//            walk): an index found by arithmetic, as the pending set's windows find their leaves
//   accept   the same jobs through JobStore::accept, delayd's accept script, as ingest calls it
//            (four shards, one call per shard and batch)
// Each job is due 10 s (e2e_load fill's lead) plus a scattered delay under --span-ms after the
// start, as e2e_load's fill gives them. No Kafka, no delayd, no client other than this one. For
// every --step jobs one JSON line, redis_fill_step_<fill>: Redis's main thread's CPU a job in that
// step (INFO cpu: the commands, Lua, replies and the AOF's writes) and the wall rate; then one a
// fill, redis_fill_<fill>: the first step's CPU a job over the last's, which is the last step's
// rate over the first's where Redis is the bound (as in the fill phase). Redis runs flat out only
// when its client keeps it busy, so the CPU a job, not this client's rate, is the figure.
//
//   redis_fill_bench --redis-url redis://127.0.0.1:16379 --n 10000000 [--step 1000000]
//                    [--value-bytes 200] [--batch 500] [--span-ms 86400000] [--fills hash,plain,buckets,accept]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_support.hpp"
#include "bench/redis_info.hpp"
#include "redis/url.hpp"
#include "storage/job_store.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using delayd::bench::redis_main_cpu_usec;
using delayd::bench::unlink_matching;
using delayd::redis::Command;
using delayd::redis::RedisConnection;

struct Step {
  long jobs = 0;
  double cpu_us_per_job = 0;
  double jobs_per_s = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const auto o = delayd::bench::parse_options(
      argc, argv, {"--redis-url", "--n", "--step", "--value-bytes", "--batch", "--span-ms", "--fills"});
  if (!o) return 2;
  using delayd::bench::option;
  const std::string url = option(*o, "--redis-url", "redis://127.0.0.1:16379");
  const std::string fills = option(*o, "--fills", "hash,plain,buckets,accept");
  const long n = std::stol(option(*o, "--n", "10000000")), step = std::stol(option(*o, "--step", "1000000"));
  const std::size_t value_bytes = std::stoul(option(*o, "--value-bytes", "200"));
  const std::size_t batch = std::stoul(option(*o, "--batch", "500"));
  const std::int64_t span_ms = std::stoll(option(*o, "--span-ms", "86400000"));
  if (n <= 0 || step <= 0 || batch == 0 || span_ms <= 0) {
    std::cerr << "redis_fill_bench: --n, --step, --batch and --span-ms must be positive\n";
    return 2;
  }

  using namespace delayd::storage;
  RedisConnection redis(delayd::redis::parse_redis_url(url));
  const std::string prefix = delayd::bench::run_prefix(redis, "fillbench-");
  const auto now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  constexpr std::int64_t kLeadMs = 10'000;  // e2e_load fill's FILL_LEAD_MS
  const std::string value(value_bytes, 'v');

  // One fill: write(first, count) writes jobs [first, first + count); a line a step, then the
  // fill's line. The same seed for both fills: the same due times.
  auto run = [&](const std::string& name, auto&& write) {
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<std::int64_t> delay(0, span_ms - 1);
    std::vector<std::int64_t> due;
    std::vector<Step> steps;
    long done = 0;
    while (done < n) {
      const long until = std::min(n, done + step);
      const double cpu0 = redis_main_cpu_usec(redis);
      const auto t0 = Clock::now();
      for (long i = done; i < until; i += static_cast<long>(batch)) {
        const long count = std::min(until - i, static_cast<long>(batch));
        due.resize(static_cast<size_t>(count));
        for (auto& d : due) d = now + kLeadMs + delay(rng);
        write(i, due);
      }
      const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
      const double cpu = redis_main_cpu_usec(redis) - cpu0;
      const long jobs = until - done;
      steps.push_back({until, cpu / static_cast<double>(jobs), static_cast<double>(jobs) / wall});
      std::printf(
          "{\"figure\":\"redis_fill_step_%s\",\"value\":%.2f,\"unit\":\"us of Redis's main thread a job\","
          "\"jobs\":%ld,\"jobs_per_s\":%.0f,\"used_memory\":%.0f}\n",
          name.c_str(), steps.back().cpu_us_per_job, until, steps.back().jobs_per_s,
          delayd::bench::info_number(redis, "memory", "used_memory"));
      std::fflush(stdout);
      done = until;
    }
    std::printf(
        "{\"figure\":\"redis_fill_%s\",\"value\":%.3f,\"unit\":\"the first step's CPU a job over the last's\","
        "\"n\":%ld,\"step\":%ld,\"first_us_per_job\":%.2f,\"last_us_per_job\":%.2f}\n",
        name.c_str(), steps.front().cpu_us_per_job / steps.back().cpu_us_per_job, n, step, steps.front().cpu_us_per_job,
        steps.back().cpu_us_per_job);
    std::fflush(stdout);
  };

  auto shard_of = [](long k) { return static_cast<int>(k % 4); };
  auto wanted = [&](const std::string& fill) {
    return ("," + fills + ",").find("," + fill + ",") != std::string::npos;
  };
  for (const std::string fill : {"hash", "plain", "buckets"}) {
    if (!wanted(fill)) continue;
    const std::string base = prefix + "-" + fill + ":";
    std::vector<Command> commands;
    run(fill, [&](long first, const std::vector<std::int64_t>& due) {
      commands.clear();
      for (size_t k = 0; k < due.size(); ++k) {
        const long i = first + static_cast<long>(k);
        const std::string shard = "{" + std::to_string(shard_of(i)) + "}";
        const std::string id = "fill-job-" + std::to_string(i);
        commands.push_back({"HSET", base + shard + ":jobs", id, value});
        if (fill == "plain") commands.push_back({"ZADD", base + shard + ":due", std::to_string(due[k]), id});
        if (fill == "buckets") {
          const std::string second = std::to_string(due[k] / 1000);
          commands.push_back({"ZADD", base + shard + ":s:" + second, std::to_string(due[k]), id});
          commands.push_back({"ZADD", base + shard + ":seconds", "NX", second, second});
        }
      }
      redis.pipeline(commands);
    });
    unlink_matching(redis, base + "*");
  }
  if (wanted("accept")) {
    JobStore store(redis, KeySchema(prefix), 3600);
    std::vector<NewJob> jobs;
    run("accept", [&](long first, const std::vector<std::int64_t>& due) {
      jobs.clear();
      for (size_t k = 0; k < due.size(); ++k) {
        const long i = first + static_cast<long>(k);
        NewJob j;
        j.job_id = "fill-job-" + std::to_string(i);
        j.deliver_at = due[k];
        j.business = "orders";
        j.shard = shard_id("fill-ingest", shard_of(i));
        j.value = value;
        jobs.push_back(std::move(j));
      }
      store.accept(jobs, now);
    });
    unlink_matching(redis, prefix + ":*");
  }
  return 0;
}
