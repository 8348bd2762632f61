// The upgrade from the previous release with the real old binary (scripts/old-release.sh builds
// delayd 0.3.0, commit 7be43d9, once): 0.3.0 runs with jobs waiting, due and in flight around
// its stop, cancelled, rescheduled and repeating; it stops; a 0.3.0 instance started again beside
// a 0.4 one makes the 0.4 refuse to start (the version interlock, exit status 2, its sentence in
// the log); then 0.4 starts alone on the same Redis and Kafka and goes on:
//   every job delivered once (each occurrence of the repeat once), none early, the cancels kept
//   (also those sent after the upgrade, applied to 0.3's records), the reschedule kept;
//   `delayctl get` and the console (GET /jobs/{id}) read every job;
//   Redis records layout 2 (broker/version_interlock.hpp); the new consumer group of the status
//   topic started where 0.3's single group had left it (its log says so).
// Prints one line: "upgrade: 0.3.0 -> 0.4: <n> jobs, ...".
//   upgrade_test <old delayd> <this delayctl>
#define CATCH_CONFIG_RUNNER  // main() below: the paths of the two binaries as options
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "admin/console_client.hpp"
#include "harness.hpp"

using namespace delayd::e2e;
using delayd::connectors::Record;
using namespace std::chrono_literals;

namespace {

std::string old_delayd;
std::string this_delayctl;

Job repeating(const std::string& id, std::int64_t first, int every_ms, int count) {
  Job j = job_at(id, first, "value of " + id, id);
  j.extra = {{"repeat-every-ms", std::to_string(every_ms)}, {"repeat-count", std::to_string(count)}};
  return j;
}

}  // namespace

TEST_CASE("upgrade from 0.3.0: waiting, in-flight, cancelled, rescheduled and repeating jobs go on under 0.4",
          "[upgrade]") {
  REQUIRE_FALSE(old_delayd.empty());
  World w("upgrade");
  const std::uint16_t port = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(port);
  w.create_topics({"orders"}, 4);
  Collector out(w, {w.ready_topic("orders")});
  REQUIRE(out.wait_assigned());

  DelaydProcess old(w);
  old.set_binary(old_delayd);
  old.set_die_with_test(true);
  old.start();

  // What 0.3 holds when it stops, by kind; each id's deliver-at (the repeat: its first).
  const std::int64_t t = now_ms();
  std::map<std::string, std::int64_t> due;  // delivered once each
  std::set<std::string> cancelled;
  Publisher pub(w);
  for (int i = 0; i < 40; ++i) due["w-" + std::to_string(i)] = t + 20'000;           // waiting
  for (int i = 0; i < 200; ++i) due["n-" + std::to_string(i)] = t + 3'000 + 10 * i;  // due around the stop
  for (int i = 0; i < 10; ++i) cancelled.insert("c-" + std::to_string(i));           // cancelled under 0.3
  for (int i = 0; i < 10; ++i) cancelled.insert("k-" + std::to_string(i));           // cancelled under 0.4
  for (const auto& [id, at] : due) pub.send(job_at(id, at, "value of " + id, id));
  for (const auto& id : cancelled) pub.send(job_at(id, t + 22'000, "value of " + id, id));
  for (int i = 0; i < 10; ++i)
    pub.send(job_at("r-" + std::to_string(i), t + 60'000, "later", "r-" + std::to_string(i)));
  constexpr int kOccurrences = 6;
  pub.send(repeating("rep", t + 3'000, 2'000, kOccurrences));
  pub.flush();
  for (int i = 0; i < 10; ++i) pub.send_cancel("c-" + std::to_string(i));
  for (int i = 0; i < 10; ++i) {
    const std::string id = "r-" + std::to_string(i);
    pub.send_reschedule(id, {{"deliver-at", std::to_string(t + 16'000)}});
    due[id] = t + 16'000;
  }
  pub.flush();
  JobReader redis(w);
  REQUIRE(delayd::e2e::console::wait_states(redis, {"c-0", "c-9"}, {"cancelled", "cancelled"}));

  // Stopped while the "n-" jobs fall due: some delivered by 0.3, some claimed and held, the rest
  // waiting.
  const std::int64_t stop_at = t + 4'000;
  out.collect_until([&](const auto&) { return now_ms() >= stop_at; }, 30s);
  // A report under 0.3, so that its one group has read the status topic and commits there: 0.4's
  // group of the status topic must start where it left off.
  // The first one-off job delivered: "rep" falls due at the same millisecond as "n-0", and a
  // report of one of a repeat's occurrences does not make the repeat finished.
  std::string reported;
  for (const auto& r : out.records()) {
    reported = header(r, "job-id").value_or("");
    if (reported.starts_with("n-")) break;
  }
  REQUIRE(reported.starts_with("n-"));
  pub.send_report(reported, "finished");
  pub.flush();
  REQUIRE(delayd::e2e::console::wait_states(redis, {reported}, {"finished"}));
  REQUIRE(old.stop() == 0);

  {  // the interlock: a 0.3 instance runs in the group, so a 0.4 one refuses to start
    DelaydProcess again(w);
    again.set_binary(old_delayd);
    again.set_die_with_test(true);
    again.start();
    DelaydProcess refused(w);
    refused.set_env("DELAYD_ADMIN_LISTEN", "");  // the port is the other's
    const auto status = refused.run_to_exit(60s);
    const std::string said = refused.log_since_start();
    INFO(said);
    CHECK(status == std::optional<int>(2));
    CHECK_THAT(said, Catch::Contains("refusing to start: another version of delayd is running"));
    CHECK(again.stop() == 0);
  }

  DelaydProcess next(w);
  next.set_die_with_test(true);
  next.start();
  for (int i = 0; i < 10; ++i) pub.send_cancel("k-" + std::to_string(i));
  pub.flush();

  // Until every job due was delivered and every occurrence of the repeat, then a little longer.
  auto count = [&](const std::vector<Record>& recs) {
    std::set<std::string> seen;
    int occurrences = 0;
    for (const auto& r : recs) {
      const auto id = header(r, "job-id").value_or("");
      if (id == "rep") {
        ++occurrences;
      } else {
        seen.insert(id);
      }
    }
    std::size_t want = 0;
    for (const auto& [id, at] : due) want += seen.count(id);
    return want == due.size() && occurrences >= kOccurrences;
  };
  REQUIRE(out.collect_until(count, 90s));
  linger(out, 3s);

  std::map<std::string, int> times;
  std::set<std::int64_t> occurrence_numbers;
  int early = 0, repeats = 0, cancelled_delivered = 0;
  for (const auto& r : out.records()) {
    const std::string id = header(r, "job-id").value_or("?");
    const std::int64_t at = number(header(r, "deliver-at"));
    early += r.timestamp_ms < at;
    if (id == "rep") {
      ++repeats;
      occurrence_numbers.insert(number(header(r, "repeat")));
      continue;
    }
    ++times[id];
    cancelled_delivered += cancelled.count(id) != 0;
    if (const auto it = due.find(id); it != due.end()) early += r.timestamp_ms < it->second;
  }
  int twice = 0, missing = 0;
  for (const auto& [id, at] : due) {
    twice += times[id] > 1;
    missing += times[id] == 0;
  }
  const auto states = redis.states(std::vector<std::string>(cancelled.begin(), cancelled.end()));
  const auto kept = static_cast<int>(std::count(states.begin(), states.end(), "cancelled"));

  // Every job read by delayctl get and by the console.
  std::vector<std::string> ids;
  for (const auto& [id, at] : due) ids.push_back(id);
  ids.insert(ids.end(), cancelled.begin(), cancelled.end());
  ids.push_back("rep");
  int delayctl_read = 0, console_read = 0;
  for (const auto& id : ids) {
    delayctl_read += delayd::e2e::console::delayctl(this_delayctl.c_str(), w, "get " + id).first == 0;
    console_read += http_get(port, "/jobs/" + id).find(" 200 ") != std::string::npos;
  }
  const std::string layout = redis.raw_get(w.redis_prefix + ":layout");

  std::printf(
      "upgrade: 0.3.0 -> 0.4: %zu jobs due (and a repeat of %d), delivered once %zu, twice %d, missing %d, "
      "early %d; %d of %zu cancels kept (10 under 0.4), %zu occurrences of the repeat; delayctl read %d, "
      "the console %d of %zu; layout '%s'\n",
      due.size(), kOccurrences, due.size() - twice - missing, twice, missing, early, kept, cancelled.size(),
      occurrence_numbers.size(), delayctl_read, console_read, ids.size(), layout.c_str());
  CHECK(twice == 0);
  CHECK(missing == 0);
  CHECK(early == 0);
  CHECK(cancelled_delivered == 0);
  CHECK(kept == static_cast<int>(cancelled.size()));
  CHECK(repeats == kOccurrences);
  CHECK(occurrence_numbers.size() == static_cast<std::size_t>(kOccurrences));
  CHECK(delayctl_read == static_cast<int>(ids.size()));
  CHECK(console_read == static_cast<int>(ids.size()));
  CHECK(layout.rfind("2 ", 0) == 0);
  CHECK_THAT(next.log_since_start(), Catch::Contains("where group " + w.group + " left it"));
  CHECK(next.stop() == 0);
}

int main(int argc, char** argv) {
  Catch::Session session;
  using namespace Catch::clara;
  const auto cli = session.cli() | Opt(old_delayd, "old delayd")["--old-delayd"]("the previous release's delayd") |
                   Opt(this_delayctl, "delayctl")["--delayctl"]("this build's delayctl");
  session.cli(cli);
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  return session.run();
}
