// The benchmark workloads, written once for any timer queue with the wheel's shape of API:
//   Handle schedule(deadline, payload); bool cancel(Handle);
//   size_t advance(now, limit, vector<Expired>&); optional<u64> next_expiry(); size_t size().
//
// Every workload first inserts n timers (the same deadlines for every implementation) and
// measures the resident memory that insertion added; then it times its own phase:
//   schedule  the insertion itself                                   ops = n
//   cancel    cancel 90% of the timers, in random order              ops = cancels
//   expire    advance to each next expiry, take what fired, until empty   ops = fired
//   steady    advance to each next expiry and reschedule every fired timer at now + a random
//             delay, until 2n operations                            ops = fired + scheduled
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_support.hpp"
#include "wheel/timing_wheel.hpp"

namespace delayd::bench {

struct WorkloadSpec {
  std::string workload;
  std::uint64_t n = 0;
  bool clustered = false;
  std::uint64_t start = 0;   // "now" at the beginning, caller units (ms)
  std::uint64_t range = 0;   // deadlines fall in [start + 1, start + range - 1]
  std::size_t batch = 4096;  // advance() limit
  std::uint64_t seed = 42;
};

// 64 instants spread evenly over the range: the clustered distribution.
inline std::vector<std::uint64_t> cluster_offsets(std::uint64_t range) {
  std::vector<std::uint64_t> offsets;
  for (std::uint64_t k = 1; k <= 64; ++k) offsets.push_back(k * (range - 1) / 65 + 1);
  return offsets;
}

inline std::vector<std::uint64_t> make_deadlines(const WorkloadSpec& spec) {
  Rng rng(spec.seed);
  const auto offsets = cluster_offsets(spec.range);
  std::vector<std::uint64_t> deadlines(spec.n);
  for (auto& d : deadlines) {
    d = spec.start + (spec.clustered ? offsets[rng.below(64)] : 1 + rng.below(spec.range - 1));
  }
  return deadlines;
}

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "benchmark self-check failed: %s\n", what.c_str());
  std::exit(2);
}

template <typename Queue>
Result run_workload(Queue& queue, const WorkloadSpec& spec) {
  using Handle = decltype(queue.schedule(0, 0));
  const std::vector<std::uint64_t> deadlines = make_deadlines(spec);
  std::vector<Handle> handles(spec.n);  // allocated and touched before the baseline
  std::vector<wheel::Expired> out;
  out.reserve(spec.batch);

  Result r;
  r.workload = spec.workload;
  r.n = spec.n;
  r.dist = spec.clustered ? "clustered" : "uniform";

  const std::uint64_t rss_before = resident_bytes();
  Stopwatch insert;
  for (std::uint64_t i = 0; i < spec.n; ++i) handles[i] = queue.schedule(deadlines[i], i);
  const double insert_cpu = insert.cpu_seconds();
  const double insert_wall = insert.wall_seconds();
  r.bytes_per_timer = static_cast<double>(resident_bytes() - rss_before) / static_cast<double>(spec.n);
  if (queue.size() != spec.n) fail("insert: size mismatch");

  if (spec.workload == "schedule") {
    r.ops = static_cast<double>(spec.n);
    r.cpu_seconds = insert_cpu;
    r.wall_seconds = insert_wall;
    return r;
  }

  if (spec.workload == "cancel") {
    Rng rng(spec.seed + 1);
    for (std::uint64_t i = spec.n - 1; i > 0; --i) std::swap(handles[i], handles[rng.below(i + 1)]);
    const std::uint64_t cancels = spec.n / 10 * 9;
    std::uint64_t cancelled = 0;
    Stopwatch sw;
    for (std::uint64_t i = 0; i < cancels; ++i) cancelled += queue.cancel(handles[i]) ? 1 : 0;
    r.cpu_seconds = sw.cpu_seconds();
    r.wall_seconds = sw.wall_seconds();
    if (cancelled != cancels || queue.size() != spec.n - cancels) fail("cancel: count mismatch");
    r.ops = static_cast<double>(cancels);
    return r;
  }

  if (spec.workload == "expire") {
    std::uint64_t fired = 0;
    std::uint64_t last_deadline = 0;
    Stopwatch sw;
    while (const auto next = queue.next_expiry()) {
      out.clear();
      queue.advance(*next, spec.batch, out);
      fired += out.size();
      for (const auto& e : out) {
        if (e.deadline > *next || e.deadline < last_deadline) fail("expire: early or out of order");
        last_deadline = e.deadline;
      }
    }
    r.cpu_seconds = sw.cpu_seconds();
    r.wall_seconds = sw.wall_seconds();
    if (fired != spec.n) fail("expire: fired count mismatch");
    r.ops = static_cast<double>(fired);
    return r;
  }

  if (spec.workload == "steady") {
    Rng rng(spec.seed + 2);
    const auto offsets = cluster_offsets(spec.range);
    const std::uint64_t target = 2 * spec.n;
    std::uint64_t ops = 0;
    Stopwatch sw;
    while (ops < target) {
      const auto next = queue.next_expiry();
      if (!next) fail("steady: queue ran dry");
      out.clear();
      queue.advance(*next, spec.batch, out);
      for (const auto& e : out) {
        const std::uint64_t delay = spec.clustered ? offsets[rng.below(64)] : 1 + rng.below(spec.range - 1);
        queue.schedule(*next + delay, e.payload);
      }
      ops += 2 * out.size();
    }
    r.cpu_seconds = sw.cpu_seconds();
    r.wall_seconds = sw.wall_seconds();
    if (queue.size() != spec.n) fail("steady: size drifted");
    r.ops = static_cast<double>(ops);
    return r;
  }

  fail("unknown workload " + spec.workload);
}

}  // namespace delayd::bench
