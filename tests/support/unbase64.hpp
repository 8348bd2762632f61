// RFC 4648 base64 back to bytes: the tests' own inverse of base/text_encoding.hpp's base64(), to
// show that a preview loses nothing. Stops at the first '='; a byte outside the alphabet fails
// the test.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

namespace delayd::testing {

inline std::string unbase64(const std::string& text) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const auto v = alphabet.find(c);
    REQUIRE(v != std::string::npos);
    acc = acc << 6 | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>(acc >> bits & 0xff));
    }
  }
  return out;
}

}  // namespace delayd::testing
