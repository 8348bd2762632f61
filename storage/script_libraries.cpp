#include "storage/script_libraries.hpp"

#include <algorithm>

#include "storage/lua_scripts.hpp"

namespace delayd::storage {

bool is_delayd_library(std::string_view name) {
  constexpr std::string_view kPrefix = "delayd_";
  if (name.size() != kPrefix.size() + 16 || !name.starts_with(kPrefix)) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(kPrefix.size()), name.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::vector<ScriptLibrary> script_libraries(redis::RedisClient& redis) {
  // RESP2: an array of libraries, each a flat array of field names and values
  // (library_name, engine, functions).
  const redis::RedisReply r = redis.command({"FUNCTION", "LIST", "LIBRARYNAME", "delayd_*"});
  const redis::ReplyView all = r.view();
  std::vector<ScriptLibrary> out;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const redis::ReplyView lib = all[i];
    for (std::size_t f = 0; f + 1 < lib.size(); f += 2) {
      if (!lib[f].is_string() || lib[f].str() != "library_name") continue;
      const std::string name(lib[f + 1].str());
      if (is_delayd_library(name)) out.push_back({name, name == lua::library_name()});
    }
  }
  std::sort(out.begin(), out.end(), [](const ScriptLibrary& a, const ScriptLibrary& b) { return a.name < b.name; });
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
