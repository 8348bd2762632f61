// Bytes shown as text: whether a byte string is printable UTF-8, and base64 (RFC 4648, with
// padding) for the ones that are not, so that a JSON view of a payload keeps every byte.
//
//   is_printable_utf8(b)  b is well-formed UTF-8 (shortest forms only, no surrogates, nothing
//                         above U+10FFFF) and holds no control character but tab, LF and CR
//                         (C0, DEL and C1 are controls);
//   utf8_prefix(b, n)     b cut to at most n bytes, backed off to the start of a multi-byte
//                         sequence the cut would split, so that a cut text stays text (b
//                         itself when it is not longer than n);
//   base64(b)             the standard alphabet with '=' padding; 4 * ceil(|b| / 3) characters;
//   hex_digit(c)          the value of one hexadecimal digit (either case), -1 for any other char;
//   percent_decode(s)     %XX escapes (RFC 3986) decoded; nullopt for a '%' not followed by two
//                         hex digits;
//   quote_for_message(v, n)  v in double quotes, with backslash escapes for quotes, backslashes
//                         and every byte outside printable ASCII (\xNN), cut after n input bytes
//                         with a trailing "...": always one line of printable ASCII, whatever
//                         bytes it is given, so a reason built with it is safe in a Kafka header
//                         and in a log line.
//
// Used by: the admin endpoint's and delayctl's job view (admin/job_json.cpp); the Redis url
// (redis/url.cpp) and the OTEL_* lists (config/otel_env.cpp) for percent_decode; the
// configuration's and the ingest contract's error messages for quote_for_message.
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace delayd::base {

inline bool is_printable_utf8(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) return false;
      ++i;
      continue;
    }
    // The sequence's length, and the range of its second byte (RFC 3629, section 4), which
    // rules out overlong forms, surrogates and code points above U+10FFFF.
    std::size_t len = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c == 0xe0) {
      len = 3;
      lo = 0xa0;
    } else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) {
      len = 3;
    } else if (c == 0xed) {
      len = 3;
      hi = 0x9f;
    } else if (c == 0xf0) {
      len = 4;
      lo = 0x90;
    } else if (c >= 0xf1 && c <= 0xf3) {
      len = 4;
    } else if (c == 0xf4) {
      len = 4;
      hi = 0x8f;
    } else {
      return false;  // a continuation byte without a lead, or a lead that is never legal
    }
    if (n - i < len || p[i + 1] < lo || p[i + 1] > hi) return false;
    for (std::size_t k = 2; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
    }
    if (c == 0xc2 && p[i + 1] <= 0x9f) return false;  // C1 controls, U+0080..U+009F
    i += len;
  }
  return true;
}

inline std::string_view utf8_prefix(std::string_view bytes, std::size_t max_bytes) {
  if (bytes.size() <= max_bytes) return bytes;
  std::size_t cut = max_bytes;
  // Back off over at most three continuation bytes to the start of the sequence they belong to.
  for (int k = 0; k < 3 && cut > 0 && (static_cast<unsigned char>(bytes[cut]) & 0xc0) == 0x80; ++k) --cut;
  return bytes.substr(0, (static_cast<unsigned char>(bytes[cut]) & 0xc0) == 0x80 ? max_bytes : cut);
}

inline std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  const auto at = [&](std::size_t k) { return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = at(i) << 16 | at(i + 1) << 8 | at(i + 2);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += kAlphabet[v >> 6 & 63];
    out += kAlphabet[v & 63];
  }
  if (const std::size_t rest = bytes.size() - i; rest > 0) {
    const std::uint32_t v = at(i) << 16 | (rest == 2 ? at(i + 1) << 8 : 0);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += rest == 2 ? kAlphabet[v >> 6 & 63] : '=';
    out += '=';
  }
  return out;
}

inline int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

inline std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    const int hi = i + 2 < s.size() ? hex_digit(s[i + 1]) : -1;
    const int lo = i + 2 < s.size() ? hex_digit(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

inline std::string quote_for_message(std::string_view value, std::size_t max_bytes = 80) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve((value.size() < max_bytes ? value.size() : max_bytes) + 8);
  out.push_back('"');
  std::size_t n = 0;
  for (char ch : value) {
    if (n++ == max_bytes) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c >= 0x20 && c <= 0x7e) {
      out.push_back(ch);
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace delayd::base
