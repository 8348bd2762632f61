#include "scale_case.hpp"

#include <algorithm>

#include "storage/key_schema.hpp"

namespace delayd::chaos {

using namespace std::chrono_literals;

std::int64_t in_flight_now(const World& w, int partitions) {
  auto redis = redis_for(w);
  const storage::KeySchema keys(w.redis_prefix);
  std::vector<redis::Command> cmds;
  for (int p = 0; p < partitions; ++p) {
    cmds.push_back({"HLEN", keys.in_flight(storage::shard_id(w.ingest_topic, p))});
  }
  std::int64_t n = 0;
  for (auto& r : redis.pipeline(cmds)) n += r.view().is_integer() ? r.view().integer() : 0;
  return n;
}

ScaleCase::ScaleCase(const std::string& name, int partitions_) : w(name), partitions(partitions_) {
  // A killed or stopped instance's partitions move after the session timeout; the default
  // harness setting (6 s) keeps the cases short.
  w.create_topics({"orders", "mail"}, partitions);
}

void ScaleCase::publish(Sender& pub, const std::string& prefix, int n, std::int64_t from, std::int64_t spread) {
  for (int i = 0; i < n; ++i) {
    const std::int64_t at = from + spread * i / std::max(n, 1);
    const std::string id = prefix + std::to_string(i);
    pub.send(e2e::job_at(id, at, "value of " + id, id, i % 2 == 0 ? "orders" : "mail"));
    expected[id] = at;
    if (i % 20 == 7) cancels.emplace(at - 3000, id);
  }
  pub.flush();
}

void ScaleCase::send_due_cancels(Sender& pub) {
  const std::int64_t now = now_ms();
  bool sent = false;
  while (!cancels.empty() && cancels.begin()->first <= now) {
    const std::string id = cancels.begin()->second;
    cancels.erase(cancels.begin());
    connectors::OutRecord rec;
    rec.key = id;
    rec.headers = {{"op", "cancel"}, {"job-id", id}};
    pub.send_raw(std::move(rec));
    cancelled_asked.push_back(id);
    sent = true;
  }
  if (sent) pub.poll();
}

void ScaleCase::run_for(Sender& pub, const std::vector<ReadyWatcher*>& watchers, std::chrono::milliseconds how_long) {
  const auto until = std::chrono::steady_clock::now() + how_long;
  while (std::chrono::steady_clock::now() < until) {
    send_due_cancels(pub);
    for (auto* r : watchers) r->poll(std::chrono::milliseconds(50 / std::max<std::size_t>(watchers.size(), 1)));
  }
}

// Waits until every job was delivered or reached a final state that says it will not be, then
// compares each job's state with what the ready topics show.
Verdict judge(ScaleCase& c, ReadyWatcher& ready, Fleet& fleet, std::chrono::milliseconds timeout) {
  e2e::JobReader reader(c.w);
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
      if (auto id = e2e::header(d.record, "job-id")) ++seen[*id];
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

}  // namespace delayd::chaos
