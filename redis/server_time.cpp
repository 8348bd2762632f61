#include "redis/server_time.hpp"

#include <charconv>
#include <string_view>

namespace delayd::redis {

std::optional<std::int64_t> server_time_us(RedisClient& redis) {
  const auto r = redis.command({"TIME"});
  const auto v = r.view();
  if (!v.is_array() || v.size() != 2 || !v[0].is_string() || !v[1].is_string()) return std::nullopt;
  std::int64_t seconds = 0;
  std::int64_t micros = 0;
  const auto read = [](std::string_view text, std::int64_t& out) {
    const auto got = std::from_chars(text.data(), text.data() + text.size(), out);
    return got.ec == std::errc{} && got.ptr == text.data() + text.size();
  };
  if (!read(v[0].str(), seconds) || !read(v[1].str(), micros)) return std::nullopt;
  return seconds * 1'000'000 + micros;
}

}  // namespace delayd::redis
