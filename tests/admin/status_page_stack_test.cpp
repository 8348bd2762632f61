// The status page of the real delayd, rendered by headless Chromium (Debian's `chromium`), against
// the local stack (label e2e; needs KAFKA_BOOTSTRAP and REDIS_URL): with jobs held far in the
// future (so the numbers stand still) and a few delivered, the numbers the page shows under its
// stable element ids equal /stats and /overview, and a screenshot comes out as a PNG.
// Without chromium on PATH it fails under CI=true and is skipped elsewhere (support/requires.hpp);
// scripts/install-deps.sh installs it.
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "e2e/harness.hpp"
#include "support/requires.hpp"

using namespace delayd::e2e;
namespace asio = boost::asio;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

const std::string kToken = "status-page-token";

// GET path with the bearer token; the body, or "" when the answer is not 200.
std::string get_body(std::uint16_t port, const std::string& path) {
  const std::string out = delayd::e2e::http_request(port, "GET", path, "Authorization: Bearer " + kToken + "\r\n");
  const auto at = out.find("\r\n\r\n");
  if (out.find(" 200 ") > out.find("\r\n") || at == std::string::npos) return "";
  return out.substr(at + 4);
}

Json get_json(std::uint16_t port, const std::string& path) {
  const std::string b = get_body(port, path);
  return b.empty() ? Json() : Json::parse(b);
}

// Runs headless chromium on the page with `args`; its standard output (the DOM with
// --dump-dom). Its own chatter goes to a log file beside the test.
std::string chromium(std::uint16_t port, const std::string& args) {
  const fs::path profile = fs::temp_directory_path() / ("delayd-status-chromium-" + std::to_string(::getpid()));
  const std::string url = "'http://127.0.0.1:" + std::to_string(port) + "/#token=" + kToken + "'";
  const std::string cmd =
      "timeout 90 chromium --headless --no-sandbox --disable-gpu --no-first-run "
      "--disable-extensions --user-data-dir=" +
      profile.string() + " --virtual-time-budget=6000 " + args + " " + url + " 2>> status-page-chromium.log";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
  }
  std::error_code ec;
  fs::remove_all(profile, ec);
  return out;
}

// The text of the element with id="<id>" in a serialized DOM (its first text, up to the next
// tag); nullopt when there is no such element.
std::optional<std::string> text_of(const std::string& dom, const std::string& id) {
  const auto at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return std::nullopt;
  const auto open_end = dom.find('>', at);
  if (open_end == std::string::npos) return std::nullopt;
  return dom.substr(open_end + 1, dom.find('<', open_end) - open_end - 1);
}

// The number an element shows ("1,234" -> 1234); -1 when it is missing or not a number.
std::int64_t number_of(const std::string& dom, const std::string& id) {
  const auto text = text_of(dom, id);
  if (!text) return -1;
  std::string digits;
  for (const char c : *text) {
    if (c != ',') digits.push_back(c);
  }
  try {
    std::size_t used = 0;
    const std::int64_t v = std::stoll(digits, &used);
    return used == digits.size() ? v : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

// What the page must show, from the endpoints: the element id and its value.
std::vector<std::pair<std::string, std::int64_t>> expected_numbers(const Json& stats, const Json& overview) {
  std::vector<std::pair<std::string, std::int64_t>> out = {
      {"held", stats["held"]},
      {"in_wheel", stats["in_wheel"]},
      {"in_flight", stats["in_flight"]},
      {"accepted", stats["counters"]["accepted"]},
      {"delivered", stats["counters"]["delivered"]},
      {"lateness-count", stats["lateness"]["count"]},
      {"pending", overview["pending"]},
  };
  for (const auto& [name, v] : stats["counters"].items()) {
    if (name != "max_turn_ms") out.emplace_back("counter-" + name, v.get<std::int64_t>());  // moves by itself
  }
  for (std::size_t i = 0; i < stats["lateness"]["counts"].size(); ++i) {
    out.emplace_back("lateness-" + std::to_string(i), stats["lateness"]["counts"][i].get<std::int64_t>());
  }
  for (const auto& [b, v] : overview["pending_by_business"].items())
    out.emplace_back("business-" + b, v.get<std::int64_t>());
  for (const auto& [s, v] : overview["pending_by_shard"].items()) out.emplace_back("shard-" + s, v.get<std::int64_t>());
  for (std::size_t i = 0; i < overview["due"].size(); ++i) {
    out.emplace_back("due-" + std::to_string(i), overview["due"][i]["count"].get<std::int64_t>());
  }
  return out;
}

// The parts of /stats and /overview that stand still while nothing falls due.
Json steady(const Json& stats, const Json& overview) {
  Json s = stats;
  s.erase("alive");
  s["counters"].erase("max_turn_ms");
  Json o = overview;
  o.erase("read_at");
  o.erase("read_at_iso");
  for (auto& w : o["due"]) w.erase("window");  // the counts stay; the labels are fixed anyway
  return {{"stats", s}, {"overview", o}};
}

}  // namespace

TEST_CASE("headless chromium shows the numbers of /stats and /overview on the status page", "[e2e][admin][page]") {
  delayd::testing::require_tool("chromium", "Debian package chromium; scripts/install-deps.sh installs it");
  World w("statuspage");
  const std::uint16_t port = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(port);
  w.settings["DELAYD_ADMIN_TOKEN"] = kToken;
  w.settings["DELAYD_SCHEDULER_LOAD_WINDOW_MS"] = "600000";  // the jobs due in 4 min are held
  w.create_topics({"orders", "mail"}, 2);
  DelaydProcess delayd(w);
  delayd.set_die_with_test(true);
  delayd.start();
  REQUIRE_THAT(http_get_until_ok(port, "/readyz"), Catch::Contains(" 200 "));

  // Held far ahead (stable numbers in several due windows), and five delivered now.
  Publisher pub(w);
  const std::int64_t now = now_ms();
  for (int i = 0; i < 30; ++i) pub.send(job_at("p-orders-" + std::to_string(i), now + 3 * 3600'000 + i, "v"));
  for (int i = 0; i < 12; ++i)
    pub.send(job_at("p-mail-" + std::to_string(i), now + 20 * 60'000 + i, "v", std::nullopt, "mail"));
  for (int i = 0; i < 4; ++i)
    pub.send(job_at("p-mail-late-" + std::to_string(i), now + 4 * 60'000, "v", std::nullopt, "mail"));
  for (int i = 0; i < 5; ++i) pub.send(job_at("p-now-" + std::to_string(i), now + 200, "v"));
  pub.flush();

  // Until /stats and /overview agree that everything arrived and stand still.
  Json stats, overview;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (Json last;;) {
    stats = get_json(port, "/stats");
    overview = get_json(port, "/overview");
    const bool arrived = !stats.is_null() && !overview.is_null() && stats["counters"].value("accepted", 0) == 51 &&
                         stats["counters"].value("delivered", 0) == 5 && stats["in_flight"] == 0 &&
                         overview["pending"] == 46;
    const Json now_steady = arrived ? steady(stats, overview) : Json();
    if (arrived && now_steady == last) break;
    last = now_steady;
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // past /overview's cache
  }
  INFO(stats.dump() << "\n" << overview.dump());
  REQUIRE(stats["counters"]["accepted"] == 51);
  REQUIRE(stats["counters"]["delivered"] == 5);
  REQUIRE(overview["pending"] == 46);
  CHECK(overview["pending_by_business"]["orders"] == 30);
  CHECK(overview["pending_by_business"]["mail"] == 16);
  // Windows (kDueWindowsS): 0 overdue, 1 < 1 min, 2 1-2 min, 3 2-5 min, 4 5-10 min, 5 10-30 min,
  // 6 30 min-1 h, 7 1-2 h, 8 2-6 h, 9 6-24 h, 10 > 24 h.
  CHECK(overview["due"][3]["count"] == 4);
  CHECK(overview["due"][5]["count"] == 12);
  CHECK(overview["due"][8]["count"] == 30);
  CHECK(stats["lateness"]["count"] == 5);
  CHECK(stats["held"] == 4);

  const std::string dom = chromium(port, "--dump-dom");
  INFO(dom.substr(0, 20000));
  REQUIRE_THAT(dom, Catch::Contains("id=\"held\""));
  CHECK(number_of(dom, "polls") >= 1);
  CHECK(text_of(dom, "problem") == std::optional<std::string>("all well"));
  CHECK(text_of(dom, "next_due") == std::optional<std::string>(stats.value("next_due_iso", "none")));
  // Still the same numbers after the page read them (nothing fell due meanwhile).
  CHECK(steady(get_json(port, "/stats"), get_json(port, "/overview")) == steady(stats, overview));
  int matched = 0, compared = 0;
  for (const auto& [id, value] : expected_numbers(stats, overview)) {
    INFO("element id=" << id);
    CHECK(number_of(dom, id) == value);
    ++compared;
    matched += number_of(dom, id) == value ? 1 : 0;
  }

  // A screenshot: a non-empty PNG.
  const fs::path png = fs::absolute("status-page-test.png");
  fs::remove(png);
  chromium(port, "--hide-scrollbars --window-size=1280,1200 --screenshot=" + png.string());
  REQUIRE(fs::exists(png));
  CHECK(fs::file_size(png) > 10'000);
  std::ifstream in(png, std::ios::binary);
  std::string head(8, '\0');
  in.read(head.data(), 8);
  CHECK(head == std::string("\x89PNG\r\n\x1a\n", 8));
  // The figures for the log (scripts/test.sh shows lines starting "admin:").
  std::cout << "admin: status page in headless chromium: " << matched << " of " << compared
            << " numbers equal /stats and /overview (accepted " << stats["counters"]["accepted"] << ", pending "
            << overview["pending"] << ", held " << stats["held"] << "); screenshot " << fs::file_size(png)
            << " bytes\n";
  CHECK(delayd.stop() == 0);
}
