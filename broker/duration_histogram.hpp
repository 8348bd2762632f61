// DurationHistogram: durations counted into the fixed buckets of delayd's Prometheus histograms
// (the loop's lateness and round trips, the shards' commits), as plain values that the loop's
// snapshot copies and the metrics add up.
// Threading: a value type; whoever observes into one guards it (or owns it alone).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace delayd::broker {

// Durations counted into fixed buckets, for a Prometheus histogram: counts[i] is the number of
// observations <= kBoundsSeconds[i] and > the bound before it (not cumulative); the last count
// is those above every bound. From 1 ms to 60 s.
struct DurationHistogram {
  static constexpr std::array<double, 15> kBoundsSeconds = {0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                            0.5,   1.0,   2.5,   5.0,  10.0,  30.0, 60.0};
  std::array<std::uint64_t, kBoundsSeconds.size() + 1> counts{};
  double sum_seconds = 0;
  std::uint64_t count = 0;

  // Precondition: seconds >= 0 (a negative duration is counted as 0).
  void observe(double seconds) {
    if (seconds < 0) seconds = 0;
    std::size_t i = 0;
    while (i < kBoundsSeconds.size() && seconds > kBoundsSeconds[i]) ++i;
    ++counts[i];
    sum_seconds += seconds;
    ++count;
  }
  // Adds another histogram's observations (one client's round trips to another's).
  void add(const DurationHistogram& other) {
    for (std::size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
    sum_seconds += other.sum_seconds;
    count += other.count;
  }
};

}  // namespace delayd::broker
