#include "storage/script_libraries.hpp"

#include <algorithm>
#include <set>

#include "storage/lua_scripts.hpp"

namespace delayd::storage {

bool is_delayd_library(std::string_view name) {
  constexpr std::string_view kPrefix = "delayd_";
  if (name.size() != kPrefix.size() + 16 || !name.starts_with(kPrefix)) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(kPrefix.size()), name.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::vector<ScriptLibrary> script_libraries(redis::RedisClient& redis) {
  // Each server's answer (RESP2): an array of libraries, each a flat array of field names and
  // values (library_name, engine, functions). In a cluster each primary has its own libraries:
  // the list is their union.
  std::set<std::string> names;
  for (const redis::RedisReply& r : redis.command_on_every_server({"FUNCTION", "LIST", "LIBRARYNAME", "delayd_*"})) {
    const redis::ReplyView all = r.view();
    if (all.is_error()) throw redis::RedisCommandError("redis: FUNCTION LIST: " + all.error());
    for (std::size_t i = 0; i < all.size(); ++i) {
      const redis::ReplyView lib = all[i];
      for (std::size_t f = 0; f + 1 < lib.size(); f += 2) {
        if (lib[f].is_string() && lib[f].str() == "library_name" && is_delayd_library(lib[f + 1].str())) {
          names.emplace(lib[f + 1].str());
        }
      }
    }
  }
  std::vector<ScriptLibrary> out;
  for (const std::string& name : names) out.push_back({name, name == lua::library_name()});
  return out;
}

std::vector<std::string> prune_script_libraries(redis::RedisClient& redis) {
  std::vector<std::string> deleted;
  for (const ScriptLibrary& lib : script_libraries(redis)) {
    if (lib.this_build) continue;
    const redis::RedisReply r = redis.command({"FUNCTION", "DELETE", lib.name});
    const redis::ReplyView v = r.view();
    if (v.is_error() && v.error().find("Library not found") == std::string::npos) {
      throw redis::RedisCommandError("redis: FUNCTION DELETE " + lib.name + ": " + v.error());
    }
    deleted.push_back(lib.name);
  }
  return deleted;
}

}  // namespace delayd::storage
