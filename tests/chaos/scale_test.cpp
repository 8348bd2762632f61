// Scale-out under faults: several delayd instances in one consumer group, 12 ingest partitions,
// jobs flowing, and one kind of fault per case:
//   scale_kill9             kill -9 of one instance after another, each restarted at once
//   scale_sigstop           one instance stopped (SIGSTOP) past the session timeout, then resumed
//   scale_add_remove        a third instance joins mid-flight, then one leaves (SIGTERM)
//   scale_rolling_restart   each of the three stopped (SIGTERM) and started again in turn
//   scale_issue_run         the run of the scale-out issue: 10 000 jobs over 40 s, six kill -9
//                           with restarts and one SIGSTOP of 15 s (long; only with
//                           DELAYD_CHAOS_LONG=1, see scripts/chaos.sh; skipped otherwise)
// Every job is keyed by its id, and about one in twenty gets a cancel a few seconds before it
// is due. Each case prints one line (chaos_support.hpp) with, besides the usual figures:
//   bound        the duplicates the faults may cause: at each fault, the jobs in flight in
//                Redis (claimed, not settled: the in-flight hashes of all shards) right after
//                the signal, summed. Only records produced before a shard's fence moved can be
//                delivered twice, and each of those is in flight at that moment.
//   wrong states jobs whose final state contradicts the ready topics: ready but never
//                delivered, cancelled but delivered, failed, or still delay at the end.
// Expected: lost 0, early 0, wrong states 0, duplicates <= bound.
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <memory>

#include "chaos_support.hpp"
#include "storage/key_schema.hpp"
#include "support/requires.hpp"
#include "support/test_env.hpp"

using namespace delayd::chaos;
using namespace std::chrono_literals;

namespace {

constexpr int kPartitions = 12;

// The instances of one world, by index; each restart reuses its slot.
class Fleet {
 public:
  explicit Fleet(const World& w) : world_(w) {}
  // Starts instance i (a new process in slot i). False if it did not come up.
  bool start(std::size_t i) {
    while (members_.size() <= i) members_.push_back(nullptr);
    members_[i] = std::make_unique<DelaydProcess>(world_);
    return start_delayd(*members_[i]);
  }
  DelaydProcess& at(std::size_t i) { return *members_.at(i); }
  // How many instances are running now; any that died by itself is reported.
  std::size_t running(std::vector<std::string>* died = nullptr) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < members_.size(); ++i) {
      if (!members_[i]) continue;
      if (members_[i]->running()) {
        ++n;
      } else if (died && members_[i]->exit_status()) {
        died->push_back("instance " + std::to_string(i) + " exited " + std::to_string(*members_[i]->exit_status()));
      }
    }
    return n;
  }
  void stop_all() {
    for (auto& m : members_) {
      if (m && m->running()) m->stop();
    }
  }

 private:
  const World& world_;
  std::vector<std::unique_ptr<DelaydProcess>> members_;
};

// Jobs claimed and not settled, over every shard of the world: HLEN of each in-flight hash.
std::int64_t in_flight_now(const World& w) {
  auto redis = redis_for(w);
  const delayd::storage::KeySchema keys(w.redis_prefix);
  std::vector<delayd::redis::Command> cmds;
  for (int p = 0; p < kPartitions; ++p) {
    cmds.push_back({"HLEN", keys.in_flight(delayd::storage::shard_id(w.ingest_topic, p))});
  }
  std::int64_t n = 0;
  for (auto& r : redis.pipeline(cmds)) n += r.view().is_integer() ? r.view().integer() : 0;
  return n;
}

// One case's world: topics, watcher, publisher, and the jobs with their cancels.
struct ScaleCase {
  explicit ScaleCase(const std::string& name) : w(name) {
    // A killed or stopped instance's partitions move after the session timeout; the default
    // harness setting (6 s) keeps the cases short.
    w.create_topics({"orders", "mail"}, kPartitions);
  }

  // n jobs due evenly over [from, from + spread), keyed by id; every 20th gets a cancel, sent
  // by send_due_cancels() about 3 s before its deliver-at.
  void publish(Sender& pub, const std::string& prefix, int n, std::int64_t from, std::int64_t spread) {
    for (int i = 0; i < n; ++i) {
      const std::int64_t at = from + spread * i / std::max(n, 1);
      const std::string id = prefix + std::to_string(i);
      pub.send(delayd::e2e::job_at(id, at, "value of " + id, id, i % 2 == 0 ? "orders" : "mail"));
      expected[id] = at;
      if (i % 20 == 7) cancels.emplace(at - 3000, id);
    }
    pub.flush();
  }

  // Sends the cancels whose time has come (call it often while a case runs).
  void send_due_cancels(Sender& pub) {
    const std::int64_t now = now_ms();
    bool sent = false;
    while (!cancels.empty() && cancels.begin()->first <= now) {
      const std::string id = cancels.begin()->second;
      cancels.erase(cancels.begin());
      delayd::connectors::OutRecord rec;
      rec.key = id;
      rec.headers = {{"op", "cancel"}, {"job-id", id}};
      pub.send_raw(std::move(rec));
      cancelled_asked.push_back(id);
      sent = true;
    }
    if (sent) pub.poll();
  }

  // Watches (and sends cancels) for this long.
  void run_for(Sender& pub, ReadyWatcher& ready, std::chrono::milliseconds how_long) {
    const auto until = std::chrono::steady_clock::now() + how_long;
    while (std::chrono::steady_clock::now() < until) {
      send_due_cancels(pub);
      ready.poll(50ms);
    }
  }

  // A fault's share of the bound: the jobs in flight right after its signal.
  void count_fault() { bound += in_flight_now(w); }

  World w;
  Expected expected;
  std::multimap<std::int64_t, std::string> cancels;  // send time -> job-id
  std::vector<std::string> cancelled_asked;
  std::int64_t bound = 0;
};

struct Verdict {
  std::size_t lost = 0;
  std::size_t wrong = 0;
  std::vector<std::string> cancelled;  // ended cancelled (so not expected on a ready topic)
  std::vector<std::string> wrong_examples;
};

// Waits until every job was delivered or reached a final state that says it will not be, then
// compares each job's state with what the ready topics show.
Verdict judge(ScaleCase& c, ReadyWatcher& ready, Fleet& fleet, std::chrono::milliseconds timeout) {
  delayd::e2e::JobReader reader(c.w);
  std::vector<std::string> ids;
  for (const auto& [id, at] : c.expected) ids.push_back(id);
  std::map<std::string, int> seen;
  std::vector<std::string> states;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto read_states = [&] {
    states.clear();
    for (std::size_t from = 0; from < ids.size(); from += 500) {
      std::vector<std::string> part(ids.begin() + static_cast<std::ptrdiff_t>(from),
                                    ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), from + 500)));
      for (auto& s : reader.states(part)) states.push_back(std::move(s));
    }
    seen.clear();
    for (const auto& d : ready.deliveries()) {
      if (auto id = delayd::e2e::header(d.record, "job-id")) ++seen[*id];
    }
  };
  // Settled: every job is final, and each ready one has been seen (reports may trail records).
  auto settled = [&] {
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (states[i] == "delay" || states[i] == "<none>") return false;
      if (states[i] == "ready" && seen.count(ids[i]) == 0) return false;
    }
    return true;
  };
  for (;;) {
    ready.poll_for(500ms);
    read_states();
    if (settled() || std::chrono::steady_clock::now() > deadline || fleet.running() == 0) break;
  }
  ready.poll_for(2s);  // duplicates right behind the last records
  read_states();
  Verdict v;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const bool delivered = seen.count(ids[i]) != 0;
    const std::string& st = states[i];
    std::string why;
    if (st == "cancelled") {
      v.cancelled.push_back(ids[i]);
      if (delivered) why = "cancelled but delivered";
    } else if (!delivered) {
      ++v.lost;
      if (st == "ready") why = "ready but never delivered";
    } else if (st != "ready") {
      why = "delivered but " + st;
    }
    if (!why.empty()) {
      ++v.wrong;
      if (v.wrong_examples.size() < 5) v.wrong_examples.push_back(ids[i] + ": " + why);
    }
  }
  return v;
}

// The checks and the printed line every case ends with.
void finish(ScaleCase& c, ReadyWatcher& ready, Fleet& fleet, CaseLine& line, std::chrono::milliseconds timeout) {
  const Verdict v = judge(c, ready, fleet, timeout);
  std::vector<std::string> died;
  const std::size_t up = fleet.running(&died);
  // The line's "sent" and "lost" count the jobs that were to be delivered: not the cancelled.
  for (const auto& id : v.cancelled) c.expected.erase(id);
  line.note("cancelled", std::to_string(v.cancelled.size()) + " of " + std::to_string(c.cancelled_asked.size()) +
                             " asked");
  line.note("wrong states", std::to_string(v.wrong));
  line.note("bound", std::to_string(c.bound));
  line.note("instances up", std::to_string(up));
  const Tally t = line.print();
  INFO("wrong states, the first: " << (v.wrong_examples.empty() ? "-" : v.wrong_examples.front()));
  INFO("instances that died: " << died.size() << (died.empty() ? "" : " (" + died.front() + ")"));
  INFO("delayd log:\n" << log_tail(c.w, 40));
  CHECK(v.lost == 0);
  CHECK(t.lost == 0);
  CHECK(t.early == 0);
  CHECK(t.unexpected == 0);
  CHECK(v.wrong == 0);
  CHECK(static_cast<std::int64_t>(t.duplicates) <= c.bound);
  CHECK(died.empty());
}

std::vector<std::string> topics_of(const World& w) { return {w.ready_topic("orders"), w.ready_topic("mail")}; }

}  // namespace

TEST_CASE("scale_kill9", "[chaos][scale]") {
  ScaleCase c("scale-kill9");
  ReadyWatcher ready(c.w, topics_of(c.w));
  Fleet fleet(c.w);
  CaseLine line("scale_kill9", c.expected, ready, [&] { return std::to_string(fleet.running()) + "/3"; });
  for (std::size_t i = 0; i < 3; ++i) REQUIRE(fleet.start(i));
  Sender pub(c.w);
  c.publish(pub, "job-", 3000, now_ms() + 4000, 20000);
  c.run_for(pub, ready, 6s);
  for (std::size_t k = 0; k < 3; ++k) {
    fleet.at(k).kill9();
    c.count_fault();
    c.run_for(pub, ready, 1s);
    REQUIRE(fleet.start(k));
    c.run_for(pub, ready, 4s);
  }
  c.run_for(pub, ready, 4s);
  finish(c, ready, fleet, line, 60s);
  fleet.stop_all();
}

TEST_CASE("scale_sigstop", "[chaos][scale]") {
  ScaleCase c("scale-sigstop");
  ReadyWatcher ready(c.w, topics_of(c.w));
  Fleet fleet(c.w);
  CaseLine line("scale_sigstop", c.expected, ready, [&] { return std::to_string(fleet.running()) + "/3"; });
  for (std::size_t i = 0; i < 3; ++i) REQUIRE(fleet.start(i));
  Sender pub(c.w);
  c.publish(pub, "job-", 2400, now_ms() + 3000, 20000);
  c.run_for(pub, ready, 5s);
  // Stopped past the session timeout (6 s): its partitions move; when it wakes up, its wheel
  // and its held records must produce nothing for them.
  ::kill(fleet.at(1).pid(), SIGSTOP);
  c.count_fault();
  c.run_for(pub, ready, 10s);
  ::kill(fleet.at(1).pid(), SIGCONT);
  c.run_for(pub, ready, 12s);
  finish(c, ready, fleet, line, 60s);
  fleet.stop_all();
}

TEST_CASE("scale_add_remove", "[chaos][scale]") {
  ScaleCase c("scale-add-remove");
  ReadyWatcher ready(c.w, topics_of(c.w));
  Fleet fleet(c.w);
  CaseLine line("scale_add_remove", c.expected, ready, [&] { return std::to_string(fleet.running()) + "/2"; });
  for (std::size_t i = 0; i < 2; ++i) REQUIRE(fleet.start(i));
  Sender pub(c.w);
  c.publish(pub, "job-", 2400, now_ms() + 3000, 18000);
  c.run_for(pub, ready, 5s);
  c.count_fault();  // a member joining moves partitions too
  REQUIRE(fleet.start(2));
  c.run_for(pub, ready, 6s);
  c.count_fault();
  REQUIRE(fleet.at(0).stop() == 0);
  c.run_for(pub, ready, 12s);
  finish(c, ready, fleet, line, 60s);
  fleet.stop_all();
}

TEST_CASE("scale_rolling_restart", "[chaos][scale]") {
  ScaleCase c("scale-rolling");
  ReadyWatcher ready(c.w, topics_of(c.w));
  Fleet fleet(c.w);
  CaseLine line("scale_rolling_restart", c.expected, ready, [&] { return std::to_string(fleet.running()) + "/3"; });
  for (std::size_t i = 0; i < 3; ++i) REQUIRE(fleet.start(i));
  Sender pub(c.w);
  c.publish(pub, "job-", 2400, now_ms() + 3000, 20000);
  c.run_for(pub, ready, 4s);
  for (std::size_t k = 0; k < 3; ++k) {
    c.count_fault();
    REQUIRE(fleet.at(k).stop() == 0);
    REQUIRE(fleet.start(k));
    c.run_for(pub, ready, 3s);
  }
  c.run_for(pub, ready, 8s);
  finish(c, ready, fleet, line, 60s);
  fleet.stop_all();
}

TEST_CASE("scale_issue_run", "[chaos][scale][long]") {
  // Minutes long, so opt-in (skipped, never passed, without it; under CI too): scale_kill9 and
  // scale_sigstop are its bounded forms, run everywhere.
  delayd::testing::require_opt_in("DELAYD_CHAOS_LONG", "set DELAYD_CHAOS_LONG=1 (scripts/chaos.sh --long) to run it");
  ScaleCase c("scale-issue");
  ReadyWatcher ready(c.w, topics_of(c.w));
  Fleet fleet(c.w);
  CaseLine line("scale_issue_run", c.expected, ready, [&] { return std::to_string(fleet.running()) + "/3"; });
  for (std::size_t i = 0; i < 3; ++i) REQUIRE(fleet.start(i));
  Sender pub(c.w);
  c.publish(pub, "job-", 10000, now_ms() + 3000, 40000);
  c.run_for(pub, ready, 4s);
  // Six kill -9, each instance twice, restarted at once; between the third and the fourth, a
  // SIGSTOP of 15 s of another instance.
  for (std::size_t k = 0; k < 6; ++k) {
    fleet.at(k % 3).kill9();
    c.count_fault();
    REQUIRE(fleet.start(k % 3));
    c.run_for(pub, ready, 3s);
    if (k == 2) {
      ::kill(fleet.at(1).pid(), SIGSTOP);
      c.count_fault();
      c.run_for(pub, ready, 15s);
      ::kill(fleet.at(1).pid(), SIGCONT);
    }
  }
  c.run_for(pub, ready, 10s);
  finish(c, ready, fleet, line, 90s);
  fleet.stop_all();
}
