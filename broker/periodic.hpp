// Periodic duties of the scheduling loop: one "every N" helper, the loop's duties with their
// periods, and the longest-turn window.
//
// The loop never sleeps for a duty: each turn asks every duty whether it is due (Every::due())
// and does it then. A duty late by a long turn runs once when asked, and its next run is one
// period after that (missed periods are not made up, so a stalled loop does not burst).
// Invariants: Every::due() says true at most once per period, and never before the first due
// time (now, or one period after construction); WindowMax::value() covers the last 10 to 20 s.
// Threading: one owner thread (the scheduling loop); no locks, no I/O.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace delayd::broker {

// "Every N ms": tells its owner when a periodic duty is due.
class Every {
 public:
  using Clock = std::chrono::steady_clock;
  enum class First {
    now,           // the first due() is true
    after_period,  // the first due() is true one period after construction
  };

  // A duty due every `period`, first as `first` says.
  explicit Every(Clock::duration period, First first = First::now)
      : period_(period), next_(first == First::now ? Clock::time_point{} : Clock::now() + period) {}

  // Whether the duty is due at `now`; when it is, the next one is due one period from `now`.
  bool due(Clock::time_point now = Clock::now()) {
    if (now < next_) return false;
    next_ = now + period_;
    return true;
  }

 private:
  Clock::duration period_;
  Clock::time_point next_;
};

// The loop's periodic duties and how often each runs (the one place their periods are set).
namespace duty {
using namespace std::chrono_literals;
// Reading the owned shards' wake lists: a job another member moved waits at most this long.
inline constexpr auto kWakeLists = 20ms;
// Reading the consumer's lag per partition (no I/O: librdkafka's cache), with a snapshot.
inline constexpr auto kLagReading = 1s;
// Committing the ingest offsets that became committable (one async commit for all of them): each
// commit wakes librdkafka's main thread and costs Kafka a request, so not one per batch (at
// 80 000 jobs/s that was 180 a second). A crash replays at most this much more (idempotent).
// Not 20 ms as before 0.4: librdkafka 2.0 takes a commit that meets a group's new generation
// (ILLEGAL_GENERATION, one sent just before a rebalance completed) for the loss of the whole
// assignment (librdkafka issue 4059, fixed in 2.10), and each commit is a chance to meet one; a
// second apart, a rebalance meets one rarely. (An idle stage commits at once: IngestStage.)
inline constexpr auto kIngestCommit = 1s;
// No commit this long after a rebalance of the stage's own group: cooperative-sticky's second
// round follows the first within about a heartbeat, and a commit between them meets the new
// generation (kIngestCommit says what that costs).
inline constexpr auto kCommitQuietAfterRebalance = 3s;
// Publishing a LoopSnapshot to the admin endpoint.
inline constexpr auto kSnapshot = 200ms;
// The progress line in the log (held, accepted, delivered, ...); first one period after start.
inline constexpr auto kProgressLog = 10s;
// The window of the longest turn (WindowMax): the gauge covers one to two of these.
inline constexpr auto kTurnWindow = 10s;
// Comparing this host's clock with Redis's (ClockSkew, clock_skew.hpp): one TIME round trip, on the
// server watch's thread (server_watch.hpp), not the loop's.
inline constexpr auto kClockCheck = 60s;
}  // namespace duty

// The largest value noted over the current window and the one before it: a gauge over the last
// one to two windows (the loop's longest turn, duty::kTurnWindow).
class WindowMax {
 public:
  using Clock = std::chrono::steady_clock;

  // A window of `window`, the first one starting now.
  explicit WindowMax(Clock::duration window) : next_window_(window, Every::First::after_period) {}

  // Notes `value`, first starting a new window if the current one is over.
  void note(std::int64_t value) {
    if (next_window_.due()) {
      last_max_ = max_;
      max_ = 0;
    }
    max_ = std::max(max_, value);
  }
  // The largest value of the current and the previous window (0 before any).
  std::int64_t value() const { return std::max(max_, last_max_); }

 private:
  Every next_window_;
  std::int64_t max_ = 0;
  std::int64_t last_max_ = 0;
};

}  // namespace delayd::broker
