// The Redis connection settings of a loaded Config, in the form storage takes them.
// Threading: pure function.
#pragma once

#include "broker/config.hpp"
#include "storage/redis_connection.hpp"

namespace delayd::broker {

storage::RedisOptions redis_options(const Config& config);

}  // namespace delayd::broker
