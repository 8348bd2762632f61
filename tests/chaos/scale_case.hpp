// A case of several delayd instances in one world (scale_test.cpp, partition_test.cpp): its
// topics, the jobs it publishes (every 20th with a cancel a few seconds before it is due), and the
// verdict on what the ready topics show against each job's final state in Redis.
// Threading: the test's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "chaos_support.hpp"
#include "fleet.hpp"

namespace delayd::chaos {

// Jobs claimed and not settled, over the world's first `partitions` shards of its ingest topic:
// HLEN of each in-flight hash.
std::int64_t in_flight_now(const World& w, int partitions);

// One case's world: topics, watchers, publisher, and the jobs with their cancels.
struct ScaleCase {
  // Ingest (and the other) topics of `partitions` partitions; ready topics orders and mail.
  ScaleCase(const std::string& name, int partitions);

  // n jobs due evenly over [from, from + spread), keyed by id, businesses orders and mail in
  // turn; every 20th gets a cancel, sent by send_due_cancels() about 3 s before its deliver-at.
  void publish(Sender& pub, const std::string& prefix, int n, std::int64_t from, std::int64_t spread);
  // Sends the cancels whose time has come (call it often while a case runs).
  void send_due_cancels(Sender& pub);
  // Watches (and sends cancels) for this long.
  void run_for(Sender& pub, const std::vector<ReadyWatcher*>& watchers, std::chrono::milliseconds how_long);
  void run_for(Sender& pub, ReadyWatcher& ready, std::chrono::milliseconds how_long) {
    run_for(pub, std::vector<ReadyWatcher*>{&ready}, how_long);
  }
  // A fault's share of the duplicates bound: the jobs in flight right after its signal.
  void count_fault() { bound += in_flight_now(w, partitions); }

  World w;
  int partitions;
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

// Waits until every job was delivered or reached a final state that says it will not be (or the
// timeout, or no instance runs), then compares each job's state with what `ready` shows: ready
// but never delivered, cancelled but delivered, delivered but not ready, still delay.
Verdict judge(ScaleCase& c, ReadyWatcher& ready, Fleet& fleet, std::chrono::milliseconds timeout);

}  // namespace delayd::chaos
