// Fleet: several delayd instances of one world (one consumer group per topic, one Redis prefix),
// by slot, each with an admin endpoint of its own so that the test can read its /stats; and how
// the groups spread the topics' partitions over the running instances.
// Threading: the test's thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "chaos_support.hpp"

namespace delayd::chaos {

// Partitions per topic read, of each running instance, by slot (from its /stats).
struct Spread {
  std::map<std::size_t, std::map<std::string, int>> by_slot;
  // Per topic, the running instances' counts in slot order.
  std::map<std::string, std::vector<int>> by_topic() const;
  // "ingest 4/4/4, status 2/1/1" (each topic's short name given by `names`, else its own).
  std::string text(const std::map<std::string, std::string>& names = {}) const;
  // Every topic of `partitions` (topic -> its partition count) fully assigned over the running
  // instances, each instance's count within one of every other's.
  bool even(const std::map<std::string, int>& partitions) const;
};

class Fleet {
 public:
  explicit Fleet(const World& world) : world_(world) {}
  // Starts slot i (a new process, the slot's admin port kept across restarts) and waits until its
  // ingest topic's consumer has partitions. False if it did not come up.
  bool start(std::size_t i);
  // The same, but waits only until it runs (an instance may get no partition of a topic).
  bool start_member(std::size_t i);
  DelaydProcess& at(std::size_t i) { return *members_.at(i); }
  // Slot i's instances run as this user from their next start (the one a partition test cuts off),
  // and log apart, to the world's log path + ".cut".
  void run_as(std::size_t i, uid_t uid, gid_t gid) {
    users_[i] = {uid, gid};
    log_apart(i, ".cut");
  }
  // Slot i's instances log to the world's log path + `suffix` from their next start, so that the
  // world's log holds the others' lines only (what the instance a case faults says apart).
  void log_apart(std::size_t i, std::string suffix) { log_suffixes_[i] = std::move(suffix); }
  // Slot i's instances get this environment variable (a setting of their own, e.g.
  // DELAYD_KAFKA_GROUP_INSTANCE_ID) from their next start.
  void set_env(std::size_t i, std::string name, std::string value) { envs_[i][std::move(name)] = std::move(value); }
  // How many instances run now; any that died by itself is reported.
  std::size_t running(std::vector<std::string>* died = nullptr);
  void stop_all();
  // Each running instance's partitions per topic, now (an instance that does not answer yet
  // counts none).
  Spread spread();
  // Polls spread() until it is even() or the timeout passes; returns the last one.
  Spread wait_even(const std::map<std::string, int>& partitions, std::chrono::milliseconds timeout);

 private:
  bool launch(std::size_t i, const std::string& until);

  const World& world_;
  std::vector<std::unique_ptr<DelaydProcess>> members_;
  std::vector<std::uint16_t> admin_ports_;
  std::map<std::size_t, std::pair<uid_t, gid_t>> users_;            // run_as()'s
  std::map<std::size_t, std::string> log_suffixes_;                 // log_apart()'s
  std::map<std::size_t, std::map<std::string, std::string>> envs_;  // set_env()'s
};

}  // namespace delayd::chaos
