// ReferenceWheel: the release rules of TimingWheel written the slow, obvious way.
//
// An ordered map keyed by (release tick, schedule sequence) stands in for the levels. It knows
// nothing of slots, bitmaps, chunks or cascades; it is the specification the differential test
// holds the wheel to, operation by operation:
//
//   tick(d)   = ceil(d / tick), now tick = floor(now / tick)
//   schedule  tick(d) <= cursor                   -> key (cursor, seq)   already due
//             tick(d) - cursor <  2^(3 * bits)    -> key (tick(d), seq)
//             d <= now                            -> key (cursor, seq)   passed, beyond window
//             otherwise                           -> refused (beyond_range)
//   advance   release keys <= now tick in key order, at most `limit`; then the cursor becomes
//             the now tick if fewer than `limit` came out, else the key of the last one out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace delayd::wheel::testing {

class ReferenceWheel {
 public:
  struct Released {
    std::uint64_t id;
    std::uint64_t deadline;
    std::uint64_t payload;
  };

  ReferenceWheel(std::uint64_t tick, unsigned slot_bits, std::uint64_t start)
      : tick_(tick), span_(std::uint64_t{1} << (3 * slot_bits)), now_(start), cursor_(start / tick) {}

  // The id of the new timer, or nullopt when the deadline is beyond the range.
  std::optional<std::uint64_t> schedule(std::uint64_t deadline, std::uint64_t payload) {
    const std::uint64_t t = tick_of(deadline);
    std::uint64_t key_tick = 0;
    if (t <= cursor_) {
      key_tick = cursor_;
    } else if (t - cursor_ < span_) {
      key_tick = t;
    } else if (deadline <= now_) {
      key_tick = cursor_;
    } else {
      return std::nullopt;
    }
    const std::uint64_t id = next_id_++;
    const Key key{key_tick, id};
    timers_.emplace(key, Timer{deadline, payload});
    keys_.emplace(id, key);
    return id;
  }

  bool cancel(std::uint64_t id) {
    const auto it = keys_.find(id);
    if (it == keys_.end()) return false;
    timers_.erase(it->second);
    keys_.erase(it);
    return true;
  }

  std::size_t advance(std::uint64_t now, std::size_t limit, std::vector<Released>& out) {
    if (now > now_) now_ = now;
    const std::uint64_t now_tick = now_ / tick_;
    std::size_t released = 0;
    std::uint64_t last_key_tick = cursor_;
    while (released < limit && !timers_.empty() && timers_.begin()->first.first <= now_tick) {
      const auto it = timers_.begin();
      out.push_back(Released{it->first.second, it->second.deadline, it->second.payload});
      last_key_tick = it->first.first;
      keys_.erase(it->first.second);
      timers_.erase(it);
      ++released;
    }
    cursor_ = released < limit ? now_tick : last_key_tick;
    return released;
  }

  // Exact: the earliest time at which advance() releases something.
  [[nodiscard]] std::optional<std::uint64_t> next_expiry() const {
    if (timers_.empty()) return std::nullopt;
    return to_caller(timers_.begin()->first.first);
  }

  [[nodiscard]] std::uint64_t range() const {
    constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
    const std::uint64_t last_tick = cursor_ > max - (span_ - 1) ? max : cursor_ + (span_ - 1);
    const std::uint64_t last = to_caller(last_tick);
    if (last < now_) return 0;
    return last - now_ == max ? max : last - now_ + 1;
  }

  [[nodiscard]] std::size_t size() const { return timers_.size(); }
  [[nodiscard]] std::uint64_t cursor() const { return cursor_; }
  [[nodiscard]] std::uint64_t now() const { return now_; }

 private:
  using Key = std::pair<std::uint64_t, std::uint64_t>;  // (release tick, schedule sequence)
  struct Timer {
    std::uint64_t deadline;
    std::uint64_t payload;
  };

  [[nodiscard]] std::uint64_t tick_of(std::uint64_t d) const { return d / tick_ + (d % tick_ != 0 ? 1 : 0); }
  [[nodiscard]] std::uint64_t to_caller(std::uint64_t t) const {
    constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
    return t > max / tick_ ? max : t * tick_;
  }

  std::uint64_t tick_;
  std::uint64_t span_;
  std::uint64_t now_;
  std::uint64_t cursor_;
  std::uint64_t next_id_ = 0;
  std::map<Key, Timer> timers_;
  std::unordered_map<std::uint64_t, Key> keys_;
};

}  // namespace delayd::wheel::testing
