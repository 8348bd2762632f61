// Makes Redis forget delayd's scripts and its function library, as a restart without persistence
// does: what JobStore's "loaded again" paths (NOSCRIPT, "Function not found") are tested with.
#pragma once

#include "redis/client.hpp"
#include "storage/lua_scripts.hpp"

namespace delayd::testing {

// SCRIPT FLUSH and FUNCTION DELETE of this build's library, on every primary of a cluster. Other
// libraries (another build's, a user's) stay; a library already gone is not an error.
inline void lose_scripts(redis::RedisClient& redis) {
  redis.command({"SCRIPT", "FLUSH"});
  redis.command({"FUNCTION", "DELETE", storage::lua::library_name()});
}

}  // namespace delayd::testing
