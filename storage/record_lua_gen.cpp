// Writes the Lua lines that give prelude.lua the record's facts from job_record.hpp: STATES,
// FIELDS, AT_DIGITS and ATT_DIGITS; and WAITING_MAX and LEAF_MAX from key_schema.hpp. Run by the build
// (storage/CMakeLists.txt), which puts its output in front of prelude.lua; so the Lua reading of
// a record can never know other states, names or limits than the C++ one.
// Usage: record_lua_gen <output.lua>
#include <cstdio>
#include <fstream>
#include <string>

#include "storage/job_record.hpp"
#include "storage/key_schema.hpp"

int main(int argc, char** argv) {
  using namespace delayd::storage;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output.lua>\n", argv[0]);
    return 2;
  }
  std::string lua = "-- Generated from storage/job_record.hpp (storage/record_lua_gen.cpp): do not edit.\n";
  lua += "local STATES = {";
  for (JobState s : job_record::kStates) lua += std::string(to_string(s)) + " = true, ";
  lua.resize(lua.size() - 2);
  lua += "}\nlocal FIELDS = {";
  for (std::string_view name : job_record::kFields) lua += "'" + std::string(name) + "', ";
  lua.resize(lua.size() - 2);
  lua += "}\nlocal AT_DIGITS, ATT_DIGITS = " + std::to_string(job_record::kMaxDeliverAtDigits) + ", " +
         std::to_string(job_record::kMaxAttemptDigits) + "\n";
  lua += "local WAITING_MAX = " + std::to_string(kWaitingIndexMax) + "\n";
  lua += "local LEAF_MAX = " + std::to_string(kPendingLeafMax) + "\n";
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out << lua;
  out.close();
  if (!out) {
    std::fprintf(stderr, "%s: cannot write %s\n", argv[0], argv[1]);
    return 1;
  }
  return 0;
}
