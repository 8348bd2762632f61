// MissingTopics: the ready topics Kafka says do not exist, since when, and how many deliveries
// have been waiting for them.
//
// A ready topic can disappear under delayd (an operator deleted it, or re-created it with other
// settings). Every job of that business then fails with "unknown topic" until the topic is back.
// That is one cause, not N failures: this table turns the N reports into one line when a topic
// goes missing and one when it is back (with the count), a problem for /healthz naming the
// topics, and the age that decides when its jobs are dead-lettered (FireOptions::
// missing_topic_timeout). Until then the jobs wait without spending attempts.
//
// A failure that arrives after the topic was seen back, for a record handed to the producer
// before that (a straggler: its send met the producer's old metadata, or it waited behind the
// records that went through), belongs to the outage that ended: it opens no new one, so an
// outage is one line however its reports interleave (two were logged for one once, under load).
// Its job is retried as any failed delivery to a missing topic is.
//
// Invariants: a topic is in the table from its first failed delivery sent after it was last
// seen back to its first successful one; `since_ms` is the wall time of the first failure and
// never moves while it is missing. No I/O, no clock: the caller passes the times.
// Threading: one owner thread (the fire path's).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace delayd::broker {

class MissingTopics {
 public:
  struct Entry {
    std::int64_t since_ms = 0;   // wall ms of the first failed delivery since it went missing
    std::uint64_t failures = 0;  // failed deliveries to it since then
    std::int64_t asked_ms = 0;   // wall ms when it was last asked to be created again (0: never)
  };

  // A delivery to `topic`, handed to the producer at `sent_ms`, failed as unknown at `now_ms`:
  // records it and returns its entry (failures >= 1; failures == 1 on the first sighting), or
  // nullptr for a straggler (sent before the topic was last seen back, and the topic not missing
  // since): nothing recorded. The caller may set asked_ms.
  Entry* failed(const std::string& topic, std::int64_t now_ms, std::int64_t sent_ms) {
    auto it = missing_.find(topic);
    if (it == missing_.end()) {
      const auto back = back_ms_.find(topic);
      if (back != back_ms_.end() && sent_ms < back->second) return nullptr;
      it = missing_.emplace(topic, Entry{now_ms, 0}).first;
    }
    ++it->second.failures;
    return &it->second;
  }
  // A delivery to `topic` went through at `now_ms`: the entry it had while missing, if it was.
  // Postcondition: !missing(topic); a failure of a record sent before `now_ms` is a straggler.
  std::optional<Entry> delivered(const std::string& topic, std::int64_t now_ms) {
    auto it = missing_.find(topic);
    if (it == missing_.end()) return std::nullopt;
    Entry e = it->second;
    missing_.erase(it);
    back_ms_[topic] = now_ms;
    return e;
  }
  // How long `topic` has been missing at `now_ms` (0 if it is not missing, or the clock stepped
  // back past its first failure).
  std::chrono::milliseconds missing_for(const std::string& topic, std::int64_t now_ms) const {
    auto it = missing_.find(topic);
    if (it == missing_.end() || now_ms < it->second.since_ms) return std::chrono::milliseconds(0);
    return std::chrono::milliseconds(now_ms - it->second.since_ms);
  }
  bool empty() const { return missing_.empty(); }
  const std::map<std::string, Entry>& topics() const { return missing_; }
  // "ready topic(s) a, b do not exist (N deliveries waiting)"; empty when none is missing.
  std::string problem() const {
    if (missing_.empty()) return {};
    std::string names;
    std::uint64_t waiting = 0;
    for (const auto& [topic, e] : missing_) {
      names += (names.empty() ? "" : ", ") + topic;
      waiting += e.failures;
    }
    return (missing_.size() == 1 ? "ready topic " : "ready topics ") + names +
           (missing_.size() == 1 ? " does not exist (" : " do not exist (") + std::to_string(waiting) +
           " failed deliveries so far; their jobs wait)";
  }

 private:
  std::map<std::string, Entry> missing_;
  std::map<std::string, std::int64_t>
      back_ms_;  // topic -> wall ms it was last seen back (one per topic that went missing)
};

}  // namespace delayd::broker
