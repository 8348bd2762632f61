// What the console's stack tests (console_stack_test.cpp, dead_letters_stack_test.cpp) share: the
// admin endpoint called with a token, a walk followed through its cursors, an operation waited
// for, jobs' states waited for in Redis, and delayctl run with a world's settings.
// Threading: the test's thread.
#pragma once

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "e2e/harness.hpp"

namespace delayd::e2e::console {

struct Answer {
  unsigned status = 0;
  nlohmann::json body;  // discarded (is_discarded()) when the body is not JSON
};

// One request with `Authorization: Bearer <token>`; its status and JSON body.
inline Answer call(std::uint16_t port, const std::string& method, const std::string& path, const std::string& body,
                   const std::string& token) {
  const std::string r = http_request(port, method, path, "Authorization: Bearer " + token + "\r\n", body);
  Answer a;
  if (r.size() > 12) a.status = static_cast<unsigned>(std::stoi(r.substr(9, 3)));
  const auto at = r.find("\r\n\r\n");
  if (at != std::string::npos) a.body = nlohmann::json::parse(r.substr(at + 4), nullptr, false);
  return a;
}

// Every `field` of every entry of `list` of a walk of `path?query`, following `next` with pages
// of `limit` (REQUIREs each page to answer 200).
inline std::vector<std::string> walk(std::uint16_t port, const std::string& path, const std::string& query,
                                     const std::string& list, const std::string& field, int limit,
                                     const std::string& token) {
  std::vector<std::string> out;
  std::string cursor;
  for (int pages = 0; pages < 1000; ++pages) {
    const Answer a = call(port, "GET", path + "?" + query + "&limit=" + std::to_string(limit) + cursor, "", token);
    INFO(a.body.dump());
    REQUIRE(a.status == 200);
    CHECK(a.body["snapshot"] == false);
    for (const auto& e : a.body[list]) out.push_back(e[field]);
    if (a.body["next"].is_null()) break;
    cursor = "&cursor=" + a.body["next"].get<std::string>();
  }
  return out;
}

// Polls GET /operations/{id} every 100 ms until its status is `status` or `timeout` passed; the
// last answer.
inline Answer wait_operation(std::uint16_t port, const std::string& id, const std::string& status,
                             std::chrono::milliseconds timeout, const std::string& token) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Answer a = call(port, "GET", "/operations/" + id, "", token);
  while (a.body.value("status", "") != status && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    a = call(port, "GET", "/operations/" + id, "", token);
  }
  return a;
}

// Polls Redis (for 30 s at most) until the jobs are in these states (a ready record can reach a
// consumer before delayd has marked it delivered); whether they got there.
inline bool wait_states(JobReader& redis, const std::vector<std::string>& ids, const std::vector<std::string>& states) {
  for (int tries = 0; tries < 300 && redis.states(ids) != states; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return redis.states(ids) == states;
}

// Runs the delayctl at `bin` with the world's settings; its exit status and standard output.
inline std::pair<int, std::string> delayctl(const char* bin, const World& w, const std::string& args) {
  std::string command = "env";
  for (const auto& [k, v] : w.environment()) command += " " + k + "='" + v + "'";
  command += std::string(" ") + bin + " " + args;
  FILE* out = ::popen(command.c_str(), "r");
  REQUIRE(out != nullptr);
  std::string text;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, out) != nullptr) text += buf;
  const int status = ::pclose(out);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

}  // namespace delayd::e2e::console
