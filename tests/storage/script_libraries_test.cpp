// delayd's function libraries in Redis (storage/script_libraries.hpp, `delayctl scripts`): the
// names it counts as its own, the list, and the prune of other builds' libraries.
#include "storage/script_libraries.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "job_store_fixture.hpp"
#include "storage/lua_scripts.hpp"

using namespace delayd::storage;
using namespace delayd::storage::test;

TEST_CASE("delayd's library names are delayd_ and 16 lowercase hex digits", "[scripts]") {
  CHECK(is_delayd_library(lua::library_name()));
  CHECK(is_delayd_library("delayd_0123456789abcdef"));
  CHECK_FALSE(is_delayd_library("delayd_0123456789ABCDEF"));
  CHECK_FALSE(is_delayd_library("delayd_0123456789abcde"));
  CHECK_FALSE(is_delayd_library("delayd_0123456789abcdef0"));
  CHECK_FALSE(is_delayd_library("delayd_jobs_of_mine_xyz"));
  CHECK_FALSE(is_delayd_library("other_0123456789abcdef"));
}

namespace {

// Loads a one-function library named `name` (its function: <name>_x).
void load_library(delayd::redis::RedisClient& redis, const std::string& name) {
  const std::string text =
      "#!lua name=" + name + "\nredis.register_function('" + name + "_x', function() return 1 end)\n";
  const auto r = redis.command({"FUNCTION", "LOAD", "REPLACE", text});
  INFO(name << ": " << r.view().error());
  REQUIRE_FALSE(r.view().is_error());
}

bool listed(const std::vector<ScriptLibrary>& libs, const std::string& name) {
  return std::any_of(libs.begin(), libs.end(), [&](const ScriptLibrary& l) { return l.name == name; });
}

}  // namespace

TEST_CASE_METHOD(Fixture, "the libraries of other builds are listed and pruned, this build's and others' stay",
                 "[scripts]") {
  const std::string older = "delayd_00000000000000ff";         // another build's, by its name
  const std::string lookalike = "delayd_not_a_build_of_ours";  // matches delayd_*, not a build's name
  const std::string foreign = "app_of_a_user";                 // a user's own library
  for (const auto& name : {older, lookalike, foreign}) load_library(redis, name);
  struct Drop {
    delayd::redis::RedisClient& redis;
    std::vector<std::string> names;
    ~Drop() {
      for (const auto& n : names) {
        try {
          redis.command({"FUNCTION", "DELETE", n});
        } catch (...) {  // the test's result matters more than its clean-up
        }
      }
    }
  } drop{redis, {older, lookalike, foreign}};

  const auto before = script_libraries(redis);
  REQUIRE(listed(before, lua::library_name()));  // the fixture's store loaded it
  REQUIRE(listed(before, older));
  CHECK_FALSE(listed(before, lookalike));
  CHECK_FALSE(listed(before, foreign));
  for (const auto& l : before) CHECK(l.this_build == (l.name == lua::library_name()));
  CHECK(std::is_sorted(before.begin(), before.end(),
                       [](const ScriptLibrary& a, const ScriptLibrary& b) { return a.name < b.name; }));

  const auto deleted = prune_script_libraries(redis);
  CHECK(std::find(deleted.begin(), deleted.end(), older) != deleted.end());
  CHECK(std::find(deleted.begin(), deleted.end(), lua::library_name()) == deleted.end());
  const auto after = script_libraries(redis);
  REQUIRE(after.size() == 1);
  CHECK(after[0].name == lua::library_name());
  CHECK(after[0].this_build);
  // The others are Redis's as before.
  for (const auto& name : {lookalike, foreign}) {
    const auto r = redis.command({"FUNCTION", "LIST", "LIBRARYNAME", name});
    CHECK(r.view().size() == 1);
  }
  // Nothing to prune the second time; the store works on.
  CHECK(prune_script_libraries(redis).empty());
  CHECK(store.accept(std::vector<NewJob>{job("after-prune", 5)}, 0)[0].created());
}
