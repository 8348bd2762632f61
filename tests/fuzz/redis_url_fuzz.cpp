// The Redis url parser (redis/url.hpp, the only one: the configuration uses it too) on
// the fuzzer's bytes. A bad url must be refused with std::invalid_argument only; a good one
// gives a usable endpoint, the same through parse_redis_url and parse_redis_target; and the
// masked url of a good one still parses to the same place (TLS or not), with "***" for the password.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "redis/url.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view url = delayd::fuzz::bytes(data, size);

  // Masking works on any text, parseable or not.
  const std::string masked = delayd::redis::mask_redis_url(url);

  delayd::redis::RedisOptions o;
  try {
    o = delayd::redis::parse_redis_url(url);
  } catch (const std::invalid_argument&) {
    bool refused = false;
    try {
      (void)delayd::redis::parse_redis_target(url);
    } catch (const std::invalid_argument&) {
      refused = true;
    }
    FUZZ_CHECK(refused);
    return 0;
  }
  FUZZ_CHECK(!o.host.empty());
  FUZZ_CHECK(o.port >= 1 && o.port <= 65535);
  FUZZ_CHECK(o.db >= 0);

  FUZZ_CHECK(delayd::redis::parse_redis_target(url).options == o);

  const delayd::redis::RedisOptions m = delayd::redis::parse_redis_url(masked);
  FUZZ_CHECK(m.host == o.host && m.port == o.port && m.db == o.db && m.user == o.user && m.tls == o.tls);
  FUZZ_CHECK(o.password.empty() ? (m.password.empty() || m.password == "***") : m.password == "***");
  return 0;
}
