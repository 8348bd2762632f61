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

}  // namespace

std::string encode_headers(const StoredHeaders& headers) {
  std::string out;
  for (const auto& [name, value] : headers) {
    put_u32(out, static_cast<std::uint32_t>(name.size()));
    out += name;
    if (value) {
      put_u32(out, static_cast<std::uint32_t>(value->size()));
      out += *value;
    } else {
      put_u32(out, kNull);
    }
  }
  return out;
}

StoredHeaders decode_headers(std::string_view blob) {
  StoredHeaders out;
  while (!blob.empty()) {
    std::string name(get_bytes(blob, get_u32(blob)));
    const std::uint32_t len = get_u32(blob);
    if (len == kNull) {
      out.emplace_back(std::move(name), std::nullopt);
    } else {
      out.emplace_back(std::move(name), std::string(get_bytes(blob, len)));
    }
  }
  return out;
}

}  // namespace delayd::storage
