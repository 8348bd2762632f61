// Redis addresses as people write them: redis://[[user]:password@]host[:port][/db].
// user and password are percent-decoded (a password with '@' or ':' is written %40 / %3A); an
// IPv6 host is written in brackets. "redis://secret@host" is refused as ambiguous.
// Errors are std::invalid_argument with a short reason that never contains the password.
// Threading: pure functions.
#pragma once

#include "storage/redis_connection.hpp"

#include <string>
#include <string_view>

namespace delayd::storage {

// The connection settings named by the url; timeout_ms keeps its default.
RedisOptions parse_redis_url(std::string_view url);
// The url with its password, if any, replaced by "***"; for logs. Works on any text.
std::string mask_redis_url(std::string_view url);

}  // namespace delayd::storage
