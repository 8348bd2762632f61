// LingerKick: when the scheduling loop asks its producer to send at once the records that
// linger.ms would still hold back.
//
// Why. The producer waits linger.ms (5 ms by default, loop_settings.cpp) before it sends a
// batch that is not full, so that under load records leave in few, large requests: at 10 000
// jobs a second, about 40 % fewer TCP segments to Kafka than with linger.ms 1, and two shared
// cores 64-78 % busy instead of 82-93 % (docs/performance/history-2026-11-29.md, "Five milliseconds of linger, and
// a kick"). A lone record would wait the whole linger too, which a reader sees. So when the
// loop is about to sleep anyway, it kicks: KafkaProducer::flush() for at most kKickWait, during
// which librdkafka sends what it holds without waiting out the linger (a flush overrides it)
// and serves delivery reports as poll() does. A record still waiting for its topic's metadata
// (the first of a topic; over SASL_SSL that took longer than the kick) is not sent by it, and
// may wait the linger; so the fire path has the producer learn a topic when it holds a claimed
// record for it (KafkaProducer::prepare(), up to claim_ahead_ms before it is due). A job
// claimed when already due (accepted late, or after an outage) gets no such head start.
//
// Rule: due() when
//   (a) records were produced since the last kick (else there is nothing to send);
//   (b) the loop is about to sleep at least kMinSleep, twice kKickWait: nothing is due before
//       the kick is over (a due record is not held up by it), and the loop is idle, not between
//       two of the milliseconds a steady load fills (at 10 000 jobs a second it sleeps less than
//       that, and kicks there made jobs later: docs/performance/history-2026-11-29.md);
//   (c) the last kick is at least one linger ago (kicks add at most one request per linger to
//       those the linger sends by itself, so a steady load keeps the linger's batches).
// At light load, with records more than a linger apart, each leaves as soon as the loop is idle;
// after a burst, its last records leave when the loop has nothing more to do; under a steady
// load the linger batches.
//
// Threading: the loop's thread only. No I/O, no clock of its own (the caller passes now).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace delayd::broker {

class LingerKick {
 public:
  using Clock = std::chrono::steady_clock;
  // The longest a kick waits (the flush's timeout).
  static constexpr std::chrono::milliseconds kKickWait{1};
  // The shortest sleep of the loop that allows a kick.
  static constexpr std::chrono::milliseconds kMinSleep = 2 * kKickWait;

  // linger: the producer's effective linger.ms (producer_linger()). Zero: never due (the
  // producer holds nothing back).
  explicit LingerKick(std::chrono::microseconds linger) : linger_(linger) {}

  // Whether the loop should kick now, about to sleep for `sleep`; `produced` is the producer's
  // KafkaProducer::produced(). When true, the kick counts as done at `now`.
  bool due(Clock::time_point now, std::chrono::milliseconds sleep, std::uint64_t produced) {
    if (linger_ <= std::chrono::microseconds::zero() || produced == produced_at_kick_ || sleep < kMinSleep)
      return false;
    if (last_kick_ && now - *last_kick_ < linger_) return false;
    last_kick_ = now;
    produced_at_kick_ = produced;
    return true;
  }

 private:
  std::chrono::microseconds linger_;            // the producer's linger: the least time between two kicks
  std::optional<Clock::time_point> last_kick_;  // when the last kick was; none yet
  std::uint64_t produced_at_kick_ = 0;          // KafkaProducer::produced() at the last kick (records)
};

}  // namespace delayd::broker
