// Calendar repeats (docs/producing.md, "Calendar schedules" and "Catch-up after an outage"), end to end:
// cron expressions with seconds deliver on the second, never early, numbered; repeat-until,
// repeat-count and a cancel end them; a kill -9 between occurrences loses and doubles none; and
// each catch-up policy after delayd was stopped across several occurrences, for cron and
// interval repeats alike. Expected instants are computed here from the grid the expression
// names (every second, every even second), not by delayd's cron code.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "harness.hpp"

using namespace delayd::e2e;
using delayd::connectors::Record;
using Records = std::vector<Record>;

namespace {

// The deliver-at and the repeat of each record, in arrival order.
std::vector<std::int64_t> instants(const std::vector<const Record*>& recs) { return numbers(recs, "deliver-at"); }
std::vector<std::int64_t> repeats(const std::vector<const Record*>& recs) { return numbers(recs, "repeat"); }

// Each record was produced at or after its deliver-at.
void check_never_early(const std::vector<const Record*>& recs) {
  for (const auto* r : recs) {
    INFO("repeat " << number(header(*r, "repeat")) << " due " << number(header(*r, "deliver-at")));
    CHECK(r->timestamp_ms >= number(header(*r, "deliver-at")));
  }
}

// The first multiple of `step` ms at or after t.
std::int64_t ceil_to(std::int64_t t, std::int64_t step) { return (t + step - 1) / step * step; }

// Whether Redis shows the job waiting for occurrence `rep`, nothing in flight.
bool waiting_for(JobReader& redis, const std::string& id, int rep) {
  return redis.field(id, "state") == "delay" && redis.field(id, "repeat") == std::to_string(rep) &&
         !redis.field(id, "firing_at");
}

// A skip in a job's history: when it was written, the occurrence it skipped (its due time), and
// the occurrence the series went on at (the "repeat" line right after it).
struct Skip {
  std::int64_t when = 0;
  std::int64_t due = 0;
  std::int64_t to = 0;
};

std::optional<Skip> skipped(std::vector<std::string> history) {
  for (auto& line : history) {  // the detail is stored with its spaces percent-encoded
    for (auto p = line.find("%20"); p != std::string::npos; p = line.find("%20", p)) line.replace(p, 3, " ");
  }
  for (std::size_t i = 0; i + 1 < history.size(); ++i) {
    // "<ms> skipped <attempt> occurrence <n> due at <ms> missed", "<ms> repeat <attempt> occurrence <n> at <ms>"
    Skip s;
    long long when = 0, due = 0, to = 0;
    int att = 0, n = 0, m = 0;
    if (std::sscanf(history[i].c_str(), "%lld skipped %d occurrence %d due at %lld", &when, &att, &n, &due) == 4 &&
        std::sscanf(history[i + 1].c_str(), "%*s repeat %d occurrence %d at %lld", &att, &m, &to) == 3) {
      s.when = when;
      s.due = due;
      s.to = to;
      return s;
    }
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("a cron repeat with seconds delivers on the second, numbered, and ends by count, until or cancel",
          "[e2e][cron]") {
  World w("cron-basic");
  w.create_topics({"orders"});
  DelaydProcess delayd(w);
  delayd.start();
  Publisher pub(w);
  JobReader redis(w);
  const std::string orders = w.ready_topic("orders");
  Collector out(w, {orders, w.dlq_topic});
  REQUIRE(out.wait_assigned());

  const std::int64_t from = now_ms() + 1500;
  // Every second, 4 times, from the record's timestamp (no deliver-at).
  Job counted;
  counted.job_id = "counted";
  counted.value = "vc";
  counted.key = "counted";
  counted.extra = {{"repeat-cron", "* * * * * *"}, {"repeat-count", "4"}};
  // Every even second from `from` until 6 s later, in a zone with an offset (seconds agree).
  // Keyed by their ids, as README asks of every record of a job (the cancel below is).
  Job until = job_at("until", from, "vu", "until");
  const std::int64_t until_at = from + 6000;
  until.extra = {
      {"repeat-cron", "*/2 * * * * *"}, {"repeat-tz", "Asia/Kolkata"}, {"repeat-until", std::to_string(until_at)}};
  // Every second without end, cancelled once its second delivery is read.
  Job endless = job_at("endless", from, "ve", "endless");
  endless.extra = {{"repeat-cron", "* * * * * *"}};
  // A bad expression: a dead letter naming the field.
  Job bad = job_at("bad", from, "vb");
  bad.extra = {{"repeat-cron", "* * * 13 *"}};
  const std::int64_t sent_at = now_ms();
  for (const Job& j : {counted, until, endless, bad}) pub.send(j);
  pub.flush();

  std::int64_t cancelled_at = -1;
  std::size_t handled = 0;
  auto on_new = [&](const Record& r) {
    if (r.topic == orders && header(r, "job-id") == "endless" && header(r, "repeat") == "2") {
      pub.send_cancel("endless");
      pub.flush();
      cancelled_at = now_ms();
    }
  };
  auto done = [&] {
    return redis.field("counted", "state") == "ready" && redis.field("until", "state") == "ready" && cancelled_at > 0 &&
           now_ms() > cancelled_at + 2500 && !of(out.records(), w.dlq_topic, "bad").empty();
  };
  const bool complete = react_until(out, handled, on_new, done, std::chrono::seconds(30));
  linger(out, std::chrono::milliseconds(1200));
  CHECK(delayd.stop() == 0);
  CHECK(complete);

  const auto c = of(out.records(), orders, "counted");
  INFO("counted's history:\n" << joined(redis.history("counted")));
  REQUIRE(c.size() == 4);
  CHECK(repeats(c) == std::vector<std::int64_t>{1, 2, 3, 4});
  const std::int64_t first = instants(c)[0];
  CHECK(first % 1000 == 0);
  CHECK(first >= sent_at - 1000);  // the first whole second at or after the record's timestamp
  CHECK(instants(c) == std::vector<std::int64_t>{first, first + 1000, first + 2000, first + 3000});
  check_never_early(c);
  for (const auto* r : c) CHECK(r->value == "vc");

  const auto u = of(out.records(), orders, "until");
  std::vector<std::int64_t> expected;
  for (std::int64_t t = ceil_to(from, 2000); t <= until_at; t += 2000) expected.push_back(t);
  CHECK(instants(u) == expected);
  std::vector<std::int64_t> numbers(expected.size());
  for (std::size_t k = 0; k < numbers.size(); ++k) numbers[k] = static_cast<std::int64_t>(k + 1);
  CHECK(repeats(u) == numbers);
  check_never_early(u);

  const auto e = of(out.records(), orders, "endless");
  CHECK(repeats(e) == std::vector<std::int64_t>{1, 2});
  check_never_early(e);
  CHECK(redis.field("endless", "state") == "cancelled");
  CHECK(redis.field("endless", "repeat_cron") == "* * * * * *");

  const auto dead = of(out.records(), w.dlq_topic, "bad");
  REQUIRE(dead.size() == 1);
  CHECK_THAT(header(*dead[0], "error").value_or(""),
             Catch::StartsWith("header 'repeat-cron' is not a cron expression"));
}

TEST_CASE("a kill -9 between occurrences of a cron repeat loses none and doubles none", "[e2e][cron][crash]") {
  World w("cron-kill");
  w.create_topics({"orders"});
  const std::string orders = w.ready_topic("orders");
  Collector out(w, {orders, w.dlq_topic});
  REQUIRE(out.wait_assigned());
  Publisher pub(w);
  JobReader redis(w);
  auto first = std::make_unique<DelaydProcess>(w);
  first->start();

  constexpr int kOccurrences = 8;
  const std::int64_t from = ceil_to(now_ms() + 1000, 2000);
  Job j = job_at("tick", from, "vt", "tick");
  j.extra = {
      {"repeat-cron", "*/2 * * * * *"}, {"repeat-count", std::to_string(kOccurrences)}, {"repeat-catchup", "all"}};
  pub.send(j);
  pub.flush();

  // Killed between occurrences: at least three delivered and marked, and the job waiting for the
  // next one (the 8th at the latest, so that one is still to come). Which one that is depends on how
  // soon delayd read the job: a late start catches up on the missed occurrences back to back
  // (repeat-catchup all), and a given occurrence's wait may then be too short to be seen.
  std::size_t handled = 0;
  int waited_for = 0;
  const bool between = react_until(
      out, handled, [](const Record&) {},
      [&] {
        const auto n = static_cast<int>(of(out.records(), orders, "tick").size());
        if (n < 3 || n >= kOccurrences || !waiting_for(redis, "tick", n + 1)) return false;
        waited_for = n + 1;
        return true;
      },
      std::chrono::seconds(20));
  INFO("tick: " << of(out.records(), orders, "tick").size() << " delivered, state "
                << redis.field("tick", "state").value_or("<none>") << ", repeat "
                << redis.field("tick", "repeat").value_or("<none>") << "; its history:\n"
                << joined(redis.history("tick")) << "delayd's log:\n"
                << log_text(w));
  REQUIRE(between);
  first->kill9();
  const std::int64_t killed_at = now_ms();
  first.reset();
  DelaydProcess second(w);
  second.start();
  std::cout << "cron kill -9: killed " << killed_at - from << " ms after the first occurrence, waiting for occurrence "
            << waited_for << ", running again " << now_ms() - killed_at << " ms later\n";
  const bool complete = react_until(
      out, handled, [](const Record&) {}, [&] { return redis.field("tick", "state") == "ready"; },
      std::chrono::seconds(30));
  linger(out, std::chrono::milliseconds(1500));
  CHECK(second.stop() == 0);
  CHECK(complete);

  const auto t = of(out.records(), orders, "tick");
  INFO("tick's history:\n" << joined(redis.history("tick")));
  std::vector<std::int64_t> expected_at, expected_rep;
  for (int k = 0; k < kOccurrences; ++k) {
    expected_at.push_back(from + 2000 * k);
    expected_rep.push_back(k + 1);
  }
  CHECK(instants(t) == expected_at);
  CHECK(repeats(t) == expected_rep);
  check_never_early(t);
}

TEST_CASE("after delayd was stopped across several occurrences, each catch-up policy delivers what it says",
          "[e2e][cron][catchup]") {
  World w("cron-catchup");
  w.create_topics({"orders"});
  const std::string orders = w.ready_topic("orders");
  Collector out(w, {orders, w.dlq_topic});
  REQUIRE(out.wait_assigned());
  Publisher pub(w);
  JobReader redis(w);
  auto first = std::make_unique<DelaydProcess>(w);
  first->start();

  constexpr std::int64_t kPeriod = 2000;
  const std::int64_t from = ceil_to(now_ms() + 1000, kPeriod);
  const std::vector<std::string> policies{"latest", "all", "none"};
  std::vector<std::string> ids;
  for (const auto& p : policies) {
    // Keyed by their ids, so that each series' occurrences share a ready partition and their order
    // can be checked (records without a key are spread over the partitions at random).
    Job cron = job_at("cron-" + p, from, "v", "cron-" + p);
    cron.extra = {{"repeat-cron", "*/2 * * * * *"}, {"repeat-catchup", p}};
    Job every = job_at("every-" + p, from, "v", "every-" + p);
    every.extra = {{"repeat-every-ms", std::to_string(kPeriod)}, {"repeat-catchup", p}};
    for (const Job& j : {cron, every}) {
      pub.send(j);
      ids.push_back(j.job_id);
    }
  }
  pub.flush();

  // Stopped once every series delivered occurrence 2 and waits for occurrence 3.
  // This needs delayd to read the jobs before their second occurrence (a series read later skips
  // or catches up before the outage); a failure prints where each series stood.
  std::size_t handled = 0;
  const bool waiting = react_until(
      out, handled, [](const Record&) {},
      [&] {
        return std::all_of(ids.begin(), ids.end(), [&](const std::string& id) { return waiting_for(redis, id, 3); });
      },
      std::chrono::seconds(20));
  std::string where;
  for (const auto& id : ids) {
    where += id + ": " + std::to_string(of(out.records(), orders, id).size()) + " delivered, state " +
             redis.field(id, "state").value_or("<none>") + ", repeat " + redis.field(id, "repeat").value_or("<none>") +
             "\n";
  }
  INFO(where << "delayd's log:\n" << log_text(w));
  REQUIRE(waiting);
  REQUIRE(first->stop() == 0);
  const std::int64_t stopped_at = now_ms();
  first.reset();
  // The outage: at least four occurrences pass while no delayd runs.
  std::this_thread::sleep_for(std::chrono::milliseconds(4 * kPeriod + 500));
  DelaydProcess second(w);
  second.start();
  const std::int64_t resumed_at = now_ms();
  linger(out, std::chrono::milliseconds(3 * kPeriod));
  CHECK(second.stop() == 0);
  std::cout << "catch-up: stopped " << stopped_at - from << " ms after the first occurrence, running again "
            << resumed_at - stopped_at << " ms later\n";

  // Occurrence 3 was the first one missed: due at from + 2 periods, while no delayd ran.
  const std::int64_t first_missed = from + 2 * kPeriod;
  REQUIRE(first_missed > stopped_at);
  REQUIRE(first_missed + 3 * kPeriod < resumed_at);
  for (const auto& id : ids) {
    const auto recs = of(out.records(), orders, id);
    const auto history = redis.history(id);
    INFO(id << "'s history:\n" << joined(history));
    check_never_early(recs);
    const auto at = instants(recs);
    REQUIRE(at.size() >= 3);
    CHECK(at[0] == from);
    CHECK(at[1] == from + kPeriod);
    for (std::size_t k = 1; k < at.size(); ++k) {  // each instant once, in order, on the grid
      CHECK(at[k] > at[k - 1]);
      CHECK((at[k] - from) % kPeriod == 0);
    }
    const std::string policy = id.substr(id.find('-') + 1);
    const auto skip = skipped(history);
    if (policy == "all") {
      // Every missed occurrence, oldest first: no gap on the grid, several delivered late.
      CHECK_FALSE(skip);
      for (std::size_t k = 1; k < at.size(); ++k) CHECK(at[k] - at[k - 1] == kPeriod);
      const auto late = std::count_if(recs.begin(), recs.end(), [](const Record* r) {
        return r->timestamp_ms - number(header(*r, "deliver-at")) > kPeriod;
      });
      CHECK(late >= 3);
    } else {
      // Occurrence 3 skipped once, for the latest missed one (due by the skip) or the first one
      // still to come (due after it), and that is the next one delivered.
      REQUIRE(skip);
      CHECK(skip->due == first_missed);
      if (policy == "latest") {
        CHECK(skip->to <= skip->when);
        CHECK(skip->to > skip->when - kPeriod);
      } else {
        CHECK(skip->to > skip->when);
        CHECK(skip->to <= skip->when + kPeriod);
      }
      CHECK(skip->to - first_missed >= 3 * kPeriod);
      CHECK(at[2] == skip->to);
      for (std::size_t k = 3; k < at.size(); ++k) CHECK(at[k] - at[k - 1] == kPeriod);
    }
    // Numbering: an interval's occurrences keep their place on the grid; a calendar series numbers
    // its deliveries.
    const bool is_cron = id.starts_with("cron-");
    const auto reps = repeats(recs);
    for (std::size_t k = 0; k < recs.size(); ++k) {
      CHECK(reps[k] == (is_cron ? static_cast<std::int64_t>(k + 1) : (at[k] - from) / kPeriod + 1));
    }
  }
}

TEST_CASE("max-lateness-ms expires a job delayd reaches too late, and skips a repeat's late occurrences",
          "[e2e][cron][expiry]") {
  World w("expiry");
  w.create_topics({"orders"});
  const std::string orders = w.ready_topic("orders");
  Collector out(w, {orders, w.dlq_topic});
  REQUIRE(out.wait_assigned());
  Publisher pub(w);
  JobReader redis(w);

  // Published while no delayd runs; it starts 2.5 s after their time.
  const std::int64_t due = now_ms() + 500;
  Job strict = job_at("strict", due, "vs", "strict");
  strict.extra = {{"max-lateness-ms", "1000"}};
  Job lenient = job_at("lenient", due, "vl", "lenient");
  lenient.extra = {{"max-lateness-ms", "600000"}};
  Job ticks = job_at("ticks", ceil_to(due, 1000), "vt", "ticks");
  ticks.extra = {{"repeat-cron", "* * * * * *"}, {"repeat-catchup", "all"}, {"max-lateness-ms", "400"}};
  Job bad = job_at("bad", due, "vb", "bad");
  bad.extra = {{"max-lateness-ms", "0"}};
  for (const Job& j : {strict, lenient, ticks, bad}) pub.send(j);
  pub.flush();
  std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::milliseconds(due + 2500)));
  DelaydProcess delayd(w);
  delayd.start();
  const std::int64_t started_at = now_ms();
  std::size_t handled = 0;
  const bool complete = react_until(
      out, handled, [](const Record&) {},
      [&] {
        return !of(out.records(), w.dlq_topic, "strict").empty() && !of(out.records(), orders, "lenient").empty() &&
               !of(out.records(), w.dlq_topic, "bad").empty() && now_ms() > started_at + 3000;
      },
      std::chrono::seconds(30));
  CHECK(delayd.stop() == 0);
  CHECK(complete);

  INFO("strict's history:\n" << joined(redis.history("strict")));
  CHECK(of(out.records(), orders, "strict").empty());
  const auto dead = of(out.records(), w.dlq_topic, "strict");
  REQUIRE(dead.size() == 1);
  const std::string error = header(*dead[0], "error").value_or("");
  CHECK_THAT(error, Catch::StartsWith("expired: "));
  CHECK_THAT(error, Catch::EndsWith(" ms past its deliver-at (max-lateness-ms 1000)"));
  CHECK(std::stoll(error.substr(9)) > 1000);
  CHECK(header(*dead[0], "reason") == "expired");
  CHECK(dead[0]->value == "vs");
  CHECK(redis.field("strict", "state") == "failed");
  CHECK(events(redis.history("strict"), "expired") == 1);

  CHECK(of(out.records(), orders, "lenient").size() == 1);
  CHECK(redis.field("lenient", "state") == "ready");

  // Every occurrence delayd reached more than 400 ms late was skipped, and recorded; the rest
  // came on time.
  const auto t = of(out.records(), orders, "ticks");
  const auto history = redis.history("ticks");
  INFO("ticks' history:\n" << joined(history));
  REQUIRE_FALSE(t.empty());
  check_never_early(t);
  // The decision is taken when delayd reaches an occurrence; the record's timestamp is taken a
  // little later, when it is produced, so it is not compared with the 400 ms. What is checked is
  // that each occurrence up to the last delivered was either delivered or recorded as skipped,
  // never both and never neither.
  CHECK(instants(t)[0] > due + 2500 - 400);  // delayd started at due + 2500: every earlier one was too late
  CHECK(events(history, "skipped") >= 2);
  std::set<std::int64_t> skipped_at;
  for (const auto& line : history) {
    const std::string marker = "%20due%20at%20";
    if (const auto at = line.find(marker); line.find(" skipped ") != std::string::npos && at != std::string::npos) {
      skipped_at.insert(std::stoll(line.substr(at + marker.size())));
    }
  }
  const auto delivered = instants(t);
  for (std::int64_t at = ceil_to(due, 1000); at <= delivered.back(); at += 1000) {
    const auto times = std::count(delivered.begin(), delivered.end(), at);
    INFO("the occurrence due at " << at << ": delivered " << times << " time(s), skipped " << skipped_at.count(at));
    CHECK(times + static_cast<std::int64_t>(skipped_at.count(at)) == 1);
  }
  CHECK(repeats(t)[0] == 1);  // a calendar series numbers its deliveries: none came before

  const auto bad_dead = of(out.records(), w.dlq_topic, "bad");
  REQUIRE(bad_dead.size() == 1);
  CHECK_THAT(header(*bad_dead[0], "error").value_or(""), Catch::StartsWith("header 'max-lateness-ms' must be"));
}
