#include "storage/header_codec.hpp"

#include <cstdint>
#include <stdexcept>

namespace delayd::storage {

namespace {

constexpr std::uint32_t kNull = 0xFFFFFFFFu;

void put_u32(std::string& out, std::uint32_t v) {
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

std::uint32_t get_u32(std::string_view& in) {
  if (in.size() < 4) throw std::invalid_argument("header blob truncated in a length");
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(in[static_cast<size_t>(i)]);
  in.remove_prefix(4);
  return v;
}

std::string_view get_bytes(std::string_view& in, std::uint32_t n) {
  if (in.size() < n) throw std::invalid_argument("header blob truncated in a name or value");
  std::string_view s = in.substr(0, n);
  in.remove_prefix(n);
  return s;
}

void put_optional(std::string& out, const std::optional<std::string>& s) {
  if (s) {
    put_u32(out, static_cast<std::uint32_t>(s->size()));
    out += *s;
  } else {
    put_u32(out, kNull);
  }
}

std::optional<std::string> get_optional(std::string_view& in) {
  const std::uint32_t len = get_u32(in);
  if (len == kNull) return std::nullopt;
  return std::string(get_bytes(in, len));
}

void put_headers(std::string& out, const StoredHeaders& headers) {
  for (const auto& [name, value] : headers) {
    put_u32(out, static_cast<std::uint32_t>(name.size()));
    out += name;
    put_optional(out, value);
  }
}

StoredHeaders get_headers(std::string_view in) {
  StoredHeaders out;
  while (!in.empty()) {
    std::string name(get_bytes(in, get_u32(in)));
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
