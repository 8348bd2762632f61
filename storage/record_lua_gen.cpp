// Writes the Lua lines that give prelude.lua the record's facts from job_record.hpp: STATES,
// FIELDS, AT_DIGITS and ATT_DIGITS; and WAITING_MAX, LEAF_MAX, WINDOW_MS and the shard keys' names (KEY) from
// key_schema.hpp. Run by the build (storage/CMakeLists.txt), which puts its output in front of
// prelude.lua; so the Lua reading of a record can never know other states, names, limits or
// keys than the C++ one.
// Usage: record_lua_gen <output.lua>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>

#include "storage/job_record.hpp"
#include "storage/key_schema.hpp"

int main(int argc, char** argv) {
  using namespace delayd::storage;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output.lua>\n", argv[0]);
    return 2;
  }
  std::string lua =
      "-- Generated from storage/job_record.hpp and key_schema.hpp (storage/record_lua_gen.cpp): do not edit.\n";
  lua += "local STATES = {";
  for (JobState s : job_record::kStates) lua += std::string(to_string(s)) + " = true, ";
  lua.resize(lua.size() - 2);
  lua += "}\nlocal FIELDS = {";
  for (std::string_view name : job_record::kFields) lua += "'" + std::string(name) + "', ";
  lua.resize(lua.size() - 2);
  lua += "}\nlocal AT_DIGITS, ATT_DIGITS = " + std::to_string(job_record::kMaxDeliverAtDigits) + ", " +
         std::to_string(job_record::kMaxAttemptDigits) + "\n";
  lua += "local WAITING_MAX = " + std::to_string(kWaitingIndexMax) + "\n";
  lua +=
      "local LEAF_MAX, WINDOW_MS = " + std::to_string(kPendingLeafMax) + ", " + std::to_string(kPendingWindowMs) + "\n";
  // What follows "<prefix>:{<shard>}" in each key of a shard the scripts name themselves, from
  // KeySchema: a key ending in ':' takes its last part (a job-id, a state, ...) after it.
  const KeySchema keys("p");
  const auto after_tag = [](const std::string& key) { return key.substr(key.find('}') + 1); };
  const std::pair<const char*, std::string> kKeys[] = {
      {"job", after_tag(keys.job("s", ""))},
      {"jobs", after_tag(keys.delay_records("s"))},
      {"history", after_tag(keys.history("s", ""))},
      {"state", after_tag(keys.state_index("s", ""))},
      {"waiting_marks", after_tag(keys.waiting_marks("s"))},
      {"waiting", after_tag(keys.waiting("s", ""))},
      {"wake", after_tag(keys.wake("s"))},
      {"leaf", after_tag(keys.pending_leaf("s", ""))},
      {"window", after_tag(keys.pending_window("s", ""))},
      {"size", after_tag(keys.pending_size("s"))},
      {"set_0_3", after_tag(keys.pending_0_3("s"))},
  };
  lua += "local KEY = {";
  for (const auto& [name, suffix] : kKeys) lua += std::string(name) + " = '" + suffix + "', ";
  lua.resize(lua.size() - 2);
  lua += "}\n";
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out << lua;
  out.close();
  if (!out) {
    std::fprintf(stderr, "%s: cannot write %s\n", argv[0], argv[1]);
    return 1;
  }
  return 0;
}
