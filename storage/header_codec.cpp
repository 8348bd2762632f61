#include "storage/header_codec.hpp"

#include <cstdint>
#include <stdexcept>

namespace delayd::storage {

namespace {

// A length is written as LEB128 of (length + 1), so that 0 can stand for null: one byte for
// anything under 127 bytes, two under 16 383. Five bytes at most; more is refused.
constexpr std::uint64_t kNull = 0;
constexpr std::uint64_t kMaxLength = 0xFFFFFFFEu;

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Precondition: none (any bytes). Postcondition: the value read, at most kMaxLength + 1.
std::uint64_t get_varint(std::string_view& in) {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    if (in.empty()) throw std::invalid_argument("header blob truncated in a length");
    const auto byte = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    v |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) {
      // One encoding per number: a last byte of 0 after others would be padding.
      if (byte == 0 && shift > 0) throw std::invalid_argument("header blob holds an overlong length");
      if (v > kMaxLength + 1) throw std::invalid_argument("header blob holds a length over 4 GiB");
      return v;
    }
  }
  throw std::invalid_argument("header blob holds a length of more than 5 bytes");
}

void put_length(std::string& out, std::size_t n) { put_varint(out, static_cast<std::uint64_t>(n) + 1); }

std::uint64_t get_length(std::string_view& in) {
  const std::uint64_t v = get_varint(in);
  if (v == kNull) throw std::invalid_argument("header blob holds null where a name must be");
  return v - 1;
}

std::string_view get_bytes(std::string_view& in, std::uint64_t n) {
  if (in.size() < n) throw std::invalid_argument("header blob truncated in a name or value");
  std::string_view s = in.substr(0, n);
  in.remove_prefix(n);
  return s;
}

void put_optional(std::string& out, const std::optional<std::string>& s) {
  if (s) {
    put_length(out, s->size());
    out += *s;
  } else {
    put_varint(out, kNull);
  }
}

std::optional<std::string> get_optional(std::string_view& in) {
  const std::uint64_t len = get_varint(in);
  if (len == kNull) return std::nullopt;
  return std::string(get_bytes(in, len - 1));
}

void put_headers(std::string& out, const StoredHeaders& headers) {
  for (const auto& [name, value] : headers) {
    put_length(out, name.size());
    out += name;
    put_optional(out, value);
  }
}

StoredHeaders get_headers(std::string_view in) {
  StoredHeaders out;
  while (!in.empty()) {
    std::string name(get_bytes(in, get_length(in)));
    out.emplace_back(std::move(name), get_optional(in));
  }
  return out;
}

}  // namespace

std::string encode_headers(const StoredHeaders& headers) {
  std::string out;
  put_headers(out, headers);
  return out;
}

StoredHeaders decode_headers(std::string_view blob) { return get_headers(blob); }

std::string encode_payload(const StoredPayload& payload) {
  std::string out;
  put_optional(out, payload.key);
  put_optional(out, payload.value);
  put_headers(out, payload.headers);
  return out;
}

StoredPayload decode_payload(std::string_view blob) {
  StoredPayload p;
  p.key = get_optional(blob);
  p.value = get_optional(blob);
  p.headers = get_headers(blob);
  return p;
}

}  // namespace delayd::storage
