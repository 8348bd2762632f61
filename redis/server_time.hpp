// Redis's clock: the TIME command read into epoch microseconds.
// Threading: blocks on the client it is given, as every call of that client does.
#pragma once

#include <cstdint>
#include <optional>

#include "redis/client.hpp"

namespace delayd::redis {

// Redis's clock (TIME), in epoch microseconds; nullopt when Redis refuses TIME (an ACL, a proxy
// without it) or answers something else. One round trip; throws RedisIoError as every call does.
std::optional<std::int64_t> server_time_us(RedisClient& redis);

}  // namespace delayd::redis
