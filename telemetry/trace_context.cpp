#include "telemetry/trace_context.hpp"

#include <algorithm>
#include <random>

namespace delayd::telemetry {
namespace {

// Lowercase hex only: the recommendation forbids uppercase in traceparent.
int lower_hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

template <std::size_t N>
bool read_hex(std::string_view text, std::array<std::uint8_t, N>& out) {
  if (text.size() != 2 * N) return false;
  for (std::size_t i = 0; i < N; ++i) {
    const int hi = lower_hex(text[2 * i]);
    const int lo = lower_hex(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return true;
}

template <std::size_t N>
std::string hex(const std::array<std::uint8_t, N>& id) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * N, '0');
  for (std::size_t i = 0; i < N; ++i) {
    out[2 * i] = kDigits[id[i] >> 4];
    out[2 * i + 1] = kDigits[id[i] & 15];
  }
  return out;
}

template <std::size_t N>
bool all_zero(const std::array<std::uint8_t, N>& id) {
  return std::all_of(id.begin(), id.end(), [](std::uint8_t b) { return b == 0; });
}

std::mt19937_64& generator() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return gen;
}

template <std::size_t N>
std::array<std::uint8_t, N> random_id() {
  std::array<std::uint8_t, N> id{};
  do {
    for (std::size_t i = 0; i < N; i += 8) {
      const std::uint64_t v = generator()();
      for (std::size_t k = 0; k < 8 && i + k < N; ++k) id[i + k] = static_cast<std::uint8_t>(v >> (8 * k));
    }
  } while (all_zero(id));
  return id;
}

}  // namespace

std::optional<SpanContext> parse_traceparent(std::string_view text) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55 characters.
  constexpr std::size_t kLength = 55;
  if (text.size() < kLength) return std::nullopt;
  std::array<std::uint8_t, 1> version{};
  std::array<std::uint8_t, 1> flags{};
  SpanContext c;
  if (!read_hex(text.substr(0, 2), version) || version[0] == 0xff || text[2] != '-' ||
      !read_hex(text.substr(3, 32), c.trace_id) || text[35] != '-' || !read_hex(text.substr(36, 16), c.span_id) ||
      text[52] != '-' || !read_hex(text.substr(53, 2), flags)) {
    return std::nullopt;
  }
  // Version 00 is exactly 55 characters; a later version may add fields after a '-'.
  if (text.size() > kLength && (version[0] == 0 || text[kLength] != '-')) return std::nullopt;
  if (all_zero(c.trace_id) || all_zero(c.span_id)) return std::nullopt;
  c.sampled = (flags[0] & 1) != 0;
  return c;
}

std::string format_traceparent(const SpanContext& context) {
  return "00-" + hex(context.trace_id) + "-" + hex(context.span_id) + (context.sampled ? "-01" : "-00");
}

TraceId new_trace_id() { return random_id<16>(); }
SpanId new_span_id() { return random_id<8>(); }
std::string to_hex(const TraceId& id) { return hex(id); }
std::string to_hex(const SpanId& id) { return hex(id); }

}  // namespace delayd::telemetry
