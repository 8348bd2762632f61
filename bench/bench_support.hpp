// Small helpers shared by the benchmarks: a fast deterministic PRNG, a monotonic stopwatch, the
// process's resident memory, the one-line JSON result format of the timer benchmarks, and a
// command line of "--name value" pairs.
#pragma once

#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace delayd::bench {

// splitmix64: cheap enough that generating a delay does not blur what is being measured, and the
// same sequence for every implementation.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); the modulo bias is below 2^-40 for the n used here.
  std::uint64_t below(std::uint64_t n) { return next() % n; }

 private:
  std::uint64_t state_;
};

// Measures both the CPU time of the calling thread and the wall time. The machine this runs on
// is shared, and wall time counts the moments another process had the core; CPU time counts what
// the code under test cost (page faults included, since the kernel bills them to the thread).
class Stopwatch {
 public:
  Stopwatch() : wall_start_(std::chrono::steady_clock::now()), cpu_start_(thread_cpu_seconds()) {}
  [[nodiscard]] double cpu_seconds() const { return thread_cpu_seconds() - cpu_start_; }
  [[nodiscard]] double wall_seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  }

 private:
  static double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }

  std::chrono::steady_clock::time_point wall_start_;
  double cpu_start_;
};

// Resident set size of this process, from /proc/self/statm (second field, in pages).
inline std::uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size_pages = 0;
  std::uint64_t resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return resident_pages * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

struct Result {
  std::string impl;
  std::string workload;
  std::uint64_t n = 0;
  std::string dist;
  double ops = 0;           // operations counted by the workload's definition
  double cpu_seconds = 0;   // thread CPU time spent on them: ns_per_op and ops_per_s
  double wall_seconds = 0;  // wall time, reported alongside
  double bytes_per_timer = 0;
};

// One JSON object per line. ns_per_op and ops_per_s come from CPU time; wall_ns_per_op is the
// same run by the wall clock. All three are null for the memory-only record.
inline void print_json(const Result& r, bool timed = true) {
  if (timed) {
    std::printf(
        "{\"impl\":\"%s\",\"workload\":\"%s\",\"n\":%llu,\"dist\":\"%s\",\"ns_per_op\":%.2f,\"ops_per_s\":%.0f,"
        "\"bytes_per_timer\":%.2f,\"wall_ns_per_op\":%.2f}\n",
        r.impl.c_str(), r.workload.c_str(), static_cast<unsigned long long>(r.n), r.dist.c_str(),
        r.cpu_seconds * 1e9 / r.ops, r.ops / r.cpu_seconds, r.bytes_per_timer, r.wall_seconds * 1e9 / r.ops);
  } else {
    std::printf(
        "{\"impl\":\"%s\",\"workload\":\"%s\",\"n\":%llu,\"dist\":\"%s\",\"ns_per_op\":null,\"ops_per_s\":null,"
        "\"bytes_per_timer\":%.2f,\"wall_ns_per_op\":null}\n",
        r.impl.c_str(), r.workload.c_str(), static_cast<unsigned long long>(r.n), r.dist.c_str(), r.bytes_per_timer);
  }
  std::fflush(stdout);
}

// The "--name value" pairs of argv, each name one of `known`. nullopt, after a line on stderr
// naming it, for an unknown name or a name without its value.
inline std::optional<std::map<std::string, std::string>> parse_options(int argc, char** argv,
                                                                       std::initializer_list<std::string_view> known) {
  std::map<std::string, std::string> out;
  for (int i = 1; i < argc; i += 2) {
    const std::string name = argv[i];
    bool ok = false;
    for (auto k : known) ok = ok || name == k;
    if (!ok || i + 1 == argc) {
      std::cerr << argv[0] << ": " << (ok ? "no value for " : "unknown option ") << name << "\n";
      return std::nullopt;
    }
    out[name] = argv[i + 1];
  }
  return out;
}

// options[name] if given, else `fallback`.
inline std::string option(const std::map<std::string, std::string>& options, const std::string& name,
                          std::string fallback) {
  auto it = options.find(name);
  return it == options.end() ? fallback : it->second;
}

}  // namespace delayd::bench
