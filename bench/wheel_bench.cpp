// wheel_bench: one (implementation, workload, n, distribution) per run, one JSON line out.
//
//   wheel_bench --impl wheel|heap|heap4 --workload schedule|cancel|expire|steady
//               --n N [--dist uniform|clustered] [--batch B] [--seed S]
//
// A fresh process per measurement keeps the resident-memory figure honest: nothing freed by an
// earlier run sits in the allocator to absorb the next one's growth. The schedule run also prints
// the bytes_per_timer record. bench/run-wheel.sh drives the whole matrix.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/bench_support.hpp"
#include "bench/binary_heap_timers.hpp"
#include "bench/quad_heap_timers.hpp"
#include "bench/timer_workloads.hpp"
#include "wheel/timing_wheel.hpp"

namespace {

using delayd::bench::Result;
using delayd::bench::WorkloadSpec;

constexpr std::uint64_t epoch_ms = 1'800'000'000'000;

// The wheel behind the common benchmark API: schedule() returns just the handle.
class WheelTimers {
 public:
  explicit WheelTimers(std::uint64_t start) : wheel_(delayd::wheel::WheelConfig{}, start) {}
  delayd::wheel::TimerHandle schedule(std::uint64_t deadline, std::uint64_t payload) {
    const auto r = wheel_.schedule(deadline, payload);
    if (r.status != delayd::wheel::ScheduleStatus::scheduled) delayd::bench::fail("wheel refused a deadline");
    return r.handle;
  }
  bool cancel(delayd::wheel::TimerHandle h) { return wheel_.cancel(h); }
  std::size_t advance(std::uint64_t now, std::size_t limit, std::vector<delayd::wheel::Expired>& out) {
    return wheel_.advance(now, limit, out);
  }
  std::optional<std::uint64_t> next_expiry() const { return wheel_.next_expiry(); }
  std::size_t size() const { return wheel_.size(); }
  std::uint64_t range() const { return wheel_.range(); }

 private:
  delayd::wheel::TimingWheel wheel_;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: wheel_bench --impl wheel|heap|heap4 --workload schedule|cancel|expire|steady --n N\n"
               "                   [--dist uniform|clustered] [--batch B] [--seed S]\n");
  std::exit(64);
}

}  // namespace

int main(int argc, char** argv) {
  std::string impl;
  WorkloadSpec spec;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage();
    const std::string value = argv[++i];
    if (arg == "--impl") {
      impl = value;
    } else if (arg == "--workload") {
      spec.workload = value;
    } else if (arg == "--n") {
      spec.n = std::strtoull(value.c_str(), nullptr, 10);
    } else if (arg == "--dist") {
      if (value != "uniform" && value != "clustered") usage();
      spec.clustered = value == "clustered";
    } else if (arg == "--batch") {
      spec.batch = std::strtoull(value.c_str(), nullptr, 10);
    } else if (arg == "--seed") {
      spec.seed = std::strtoull(value.c_str(), nullptr, 10);
    } else {
      usage();
    }
  }
  if (impl.empty() || spec.workload.empty() || spec.n < 10 || spec.batch == 0) usage();

  // A fixed mmap threshold: large buffers (a heap's vector as it doubles) go back to the system
  // when freed instead of lingering in the allocator's arena and inflating the next measurement.
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);

  spec.start = epoch_ms;
  spec.range = WheelTimers(epoch_ms).range();  // the same window for every implementation

  Result r;
  if (impl == "wheel") {
    WheelTimers q(spec.start);
    r = delayd::bench::run_workload(q, spec);
  } else if (impl == "heap") {
    delayd::bench::BinaryHeapTimers q(spec.start);
    r = delayd::bench::run_workload(q, spec);
  } else if (impl == "heap4") {
    delayd::bench::QuadHeapTimers q(spec.start);
    r = delayd::bench::run_workload(q, spec);
  } else {
    usage();
  }
  r.impl = impl;
  delayd::bench::print_json(r);
  if (spec.workload == "schedule") {
    r.workload = "bytes_per_timer";
    delayd::bench::print_json(r, false);
  }
  return 0;
}
