// OccupancyBitmap: one bit per slot of a wheel level, set while the slot holds entries.
//
// The wheel never walks empty slots. To find the next slot that holds anything it asks this
// bitmap, which answers with two count-trailing-zeros: one over a summary word (bit w set while
// word w is non-zero) and one over the word it names. So the cost of finding the next expiry
// does not depend on how far away it is, which is what lets advance() jump an hour as cheaply
// as a millisecond.
//
// Invariant: summary bit w is set iff words_[w] != 0.
// Capacity: up to 64 words of 64 bits, i.e. 4096 slots per level.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace delayd::wheel {

class OccupancyBitmap {
 public:
  static constexpr std::size_t max_slots = 64 * 64;
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  // Pre: 1 <= slots <= max_slots and slots is a power of two.
  explicit OccupancyBitmap(std::size_t slots = 64) noexcept : slots_(slots) {}

  [[nodiscard]] std::size_t slots() const noexcept { return slots_; }
  [[nodiscard]] bool any() const noexcept { return summary_ != 0; }

  [[nodiscard]] bool test(std::size_t slot) const noexcept { return (words_[slot >> 6] >> (slot & 63)) & 1U; }

  void set(std::size_t slot) noexcept {
    words_[slot >> 6] |= bit(slot & 63);
    summary_ |= bit(slot >> 6);
  }

  void clear(std::size_t slot) noexcept {
    std::uint64_t& word = words_[slot >> 6];
    word &= ~bit(slot & 63);
    if (word == 0) summary_ &= ~bit(slot >> 6);
  }

  // The first set slot at or after `from`, wrapping around past the last slot; npos if none.
  // Pre: from < slots().
  [[nodiscard]] std::size_t find_from(std::size_t from) const noexcept {
    const std::size_t w = from >> 6;
    const std::uint64_t here = words_[w] & (~std::uint64_t{0} << (from & 63));
    if (here != 0) return (w << 6) + static_cast<std::size_t>(std::countr_zero(here));
    const std::uint64_t later = w == 63 ? 0 : summary_ & (~std::uint64_t{0} << (w + 1));
    if (later != 0) return first_in_word(static_cast<std::size_t>(std::countr_zero(later)));
    if (summary_ == 0) return npos;
    // Wrapped: the earliest set word overall. If that is word w itself, its set bits all lie
    // below `from`, since the bits at and above it were zero.
    return first_in_word(static_cast<std::size_t>(std::countr_zero(summary_)));
  }

  // Number of set slots (introspection only, not on a hot path).
  [[nodiscard]] std::size_t count() const noexcept {
    std::size_t n = 0;
    for (std::uint64_t word : words_) n += static_cast<std::size_t>(std::popcount(word));
    return n;
  }

  // Whether the summary agrees with the words (used by the wheel's invariant checker).
  [[nodiscard]] bool consistent() const noexcept {
    for (std::size_t w = 0; w < words_.size(); ++w) {
      const bool nonzero = words_[w] != 0;
      const bool marked = ((summary_ >> w) & 1U) != 0;
      if (nonzero != marked) return false;
      if (nonzero && (w << 6) >= slots_) return false;
    }
    return slots_ >= 64 || (words_[0] >> slots_) == 0;
  }

 private:
  static constexpr std::uint64_t bit(std::size_t i) noexcept { return std::uint64_t{1} << i; }

  [[nodiscard]] std::size_t first_in_word(std::size_t w) const noexcept {
    return (w << 6) + static_cast<std::size_t>(std::countr_zero(words_[w]));
  }

  std::size_t slots_;
  std::uint64_t summary_ = 0;
  std::array<std::uint64_t, 64> words_{};
};

}  // namespace delayd::wheel
