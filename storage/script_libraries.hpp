// delayd's function libraries in a Redis. Each build of delayd loads its scripts as one library
// named delayd_<16 hex digits>, the hash of its text (lua_scripts.hpp, library_name()), and no
// instance deletes another build's: during a rolling upgrade the instances of two builds share a
// Redis and each calls its own. So each upgrade leaves the previous build's library behind (about
// 90 kB). These list delayd's libraries and delete the ones of other builds (delayctl scripts).
// Deleting one that an instance still calls does no harm: Redis answers its next call "Function
// not found", and it loads its library again and sends the call once more (JobStore, as after a
// Redis that lost it).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "redis/client.hpp"

namespace delayd::storage {

struct ScriptLibrary {
  std::string name;         // delayd_<16 hex digits>
  bool this_build = false;  // the library this build loads (lua::library_name())
};

// Whether `name` is a name delayd gives its libraries: "delayd_" then 16 lowercase hex digits.
bool is_delayd_library(std::string_view name);

// delayd's libraries in Redis (FUNCTION LIST LIBRARYNAME delayd_*, a pattern; no other library is
// listed), sorted by name. In a cluster: those of every primary (each has its own), once each.
// Throws RedisCommandError where Redis has no functions (before 7) or the ACL denies FUNCTION LIST.
std::vector<ScriptLibrary> script_libraries(redis::RedisClient& redis);

// Deletes every library of script_libraries() but this build's (FUNCTION DELETE; in a cluster on
// every primary); returns the names deleted. One that is gone already (deleted meanwhile) counts
// as deleted.
std::vector<std::string> prune_script_libraries(redis::RedisClient& redis);

}  // namespace delayd::storage
