// The timestamp parsers of contract/time_format.hpp on the fuzzer's bytes: every success is in
// [0, kMaxEpochMs], parse_timestamp_ms picks the parser its contract names, and what parses
// survives a round trip through the formatter. A canonical RFC 3339 input (three fraction
// digits, "Z", no leap second) must come back from format_rfc3339_ms character for character,
// which checks the calendar arithmetic against the input itself.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "contract/time_format.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {

using delayd::contract::format_rfc3339_ms;
using delayd::contract::kMaxEpochMs;
using delayd::contract::ParsedTime;
using delayd::contract::TimeError;

void check_range(const ParsedTime& t) {
  if (t) FUZZ_CHECK(t.epoch_ms >= 0 && t.epoch_ms <= kMaxEpochMs);
}

bool same(const ParsedTime& a, const ParsedTime& b) {
  return a.error == b.error && (a.error != TimeError::none || a.epoch_ms == b.epoch_ms);
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view s = delayd::fuzz::bytes(data, size);
  const ParsedTime epoch = delayd::contract::parse_epoch_ms(s);
  const ParsedTime rfc = delayd::contract::parse_rfc3339_ms(s);
  const ParsedTime any = delayd::contract::parse_timestamp_ms(s);
  check_range(epoch);
  check_range(rfc);
  check_range(any);
  FUZZ_CHECK(same(any, all_digits(s) ? epoch : rfc));
  FUZZ_CHECK(!(epoch && rfc));  // no text is both forms

  if (epoch) {
    const ParsedTime back = delayd::contract::parse_epoch_ms(std::to_string(epoch.epoch_ms));
    FUZZ_CHECK(back && back.epoch_ms == epoch.epoch_ms);
  }
  if (rfc) {
    const std::string text = format_rfc3339_ms(rfc.epoch_ms);
    const ParsedTime back = delayd::contract::parse_rfc3339_ms(text);
    FUZZ_CHECK(back && back.epoch_ms == rfc.epoch_ms);
    if (s.size() == 24 && s[19] == '.' && (s[23] == 'Z' || s[23] == 'z') && s.substr(17, 2) != "60") {
      std::string canonical(s);
      canonical[10] = 'T';
      canonical[23] = 'Z';
      FUZZ_CHECK(text == canonical);
    }
  }

  // The formatter takes any int64 (for display); the first 8 bytes make one.
  if (size >= sizeof(std::int64_t)) {
    std::int64_t v = 0;
    std::memcpy(&v, data, sizeof v);
    const std::string text = format_rfc3339_ms(v);
    FUZZ_CHECK(!text.empty() && text.back() == 'Z');
    if (v >= 0 && v <= kMaxEpochMs) {
      const ParsedTime back = delayd::contract::parse_rfc3339_ms(text);
      FUZZ_CHECK(back && back.epoch_ms == v);
    }
  }
  return 0;
}
