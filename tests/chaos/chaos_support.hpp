// Support for the fault tests (label `chaos`): each case drives the real stack (delayd, Kafka,
// Redis from scripts/stack.sh) through one fault while jobs flow, then counts what came out on
// the ready topics and prints one summary line that scripts/chaos.sh collects:
//
//   chaos: <case>: sent N, delivered N, lost L, early E, duplicates D, delayd up yes|no[, more]
//
//   sent        jobs published that the case expects to be delivered
//   delivered   distinct job-ids of those seen on their ready topics
//   lost        sent jobs never seen by the end (after the case's settle wait)
//   early       ready records whose Kafka timestamp, or the moment this test received them, is
//               before their deliver-at
//   duplicates  extra ready records of a job-id
//   delayd up   the delayd started at the beginning still runs at the end (never exited)
//   max late ms the latest first delivery: its ready record's Kafka timestamp - deliver-at
//
// The stack is restarted through scripts/stack.sh of this source tree. It must be the stack that
// KAFKA_BOOTSTRAP and REDIS_URL name: the same DELAYD_STACK_DIR as the `scripts/stack.sh up` that
// started it (default .stack). Every case checks that before it touches a server, and brings
// every server it stopped back up before it ends, failure or not (ServerGuard).
//
// Threading: the test's thread owns everything here, except that a fault may run on a helper
// thread (run_stack_script and RedisPinger are safe there; they share nothing).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "e2e/harness.hpp"

namespace delayd::chaos {

using e2e::DelaydProcess;
using e2e::Job;
using e2e::now_ms;
using e2e::World;

// job-id -> deliver-at (epoch ms) of every job a case expects on a ready topic.
using Expected = std::map<std::string, std::int64_t>;

class Sender;

// Starts delayd so that it dies with the test process (a case killed by ctest's timeout leaves
// none behind). False, with the failure recorded, if it did not come up.
bool start_delayd(DelaydProcess& delayd);

// Publishes n jobs "<prefix><i>" due evenly over [from, from + spread), businesses in turn,
// and records them in `expected`. Does not flush.
void publish_spread(Sender& sender, Expected& expected, const std::string& prefix, int n, std::int64_t from,
                    std::int64_t spread, const std::vector<std::string>& businesses = {"orders"},
                    std::int32_t partition = -1);

// Publishes to the ingest topic through a producer of its own (so that a case can lift
// message.max.bytes), optionally to a fixed partition.
class Sender {
 public:
  Sender(const World& world, connectors::Properties extra = {});
  void send(const Job& job, std::int32_t partition = -1);
  void send_raw(connectors::OutRecord rec);
  // Waits until Kafka acknowledged everything sent; fails the test if anything was refused.
  void flush(std::chrono::milliseconds timeout = std::chrono::seconds(90));
  // Serves delivery reports without waiting (call while publishing over a long time).
  void poll() { producer_.poll(0); }
  // The report of the record sent with this tag (OutRecord::tag, not 0), once Kafka acknowledged
  // it: where it was written.
  std::optional<connectors::DeliveryReport> delivered(std::uint64_t tag) const;

 private:
  const World& world_;
  std::vector<connectors::DeliveryReport> failed_;
  std::vector<connectors::DeliveryReport> tagged_;  // acknowledged records that carried a tag
  connectors::KafkaProducer producer_;
};

// A ready record and the moment (epoch ms, this host's clock) the test received it.
struct Delivery {
  connectors::Record record;
  std::int64_t received_ms = 0;
};

// Reads topics from the beginning in a fresh group, like e2e::Collector, and stamps each record
// with its receive time. Topics that do not exist yet are picked up within a second or so.
// A consumer reads committed records only (librdkafka's default, the one a consumer of delayd's
// ready topics should keep); `uncommitted` reads those of open and aborted transactions too, what
// a consumer left at read_uncommitted (the Java client's default) would see.
class ReadyWatcher {
 public:
  ReadyWatcher(const World& world, std::vector<std::string> topics, bool uncommitted = false);
  // One poll of up to `wait`.
  void poll(std::chrono::milliseconds wait = std::chrono::milliseconds(100));
  // Polls until done() or the timeout; returns done().
  bool poll_until(const std::function<bool()>& done, std::chrono::milliseconds timeout);
  // Polls for this long, whatever arrives.
  void poll_for(std::chrono::milliseconds how_long);

  const std::vector<Delivery>& deliveries() const { return deliveries_; }
  // Distinct job-ids among `expected` seen so far.
  std::size_t seen_of(const Expected& expected) const;
  bool all_seen(const Expected& expected) const { return seen_of(expected) == expected.size(); }

 private:
  connectors::KafkaConsumer consumer_;
  std::vector<Delivery> deliveries_;
  std::map<std::string, int> count_by_id_;
  // A rebalance of this consumer (a subscribed topic appearing) re-reads from the beginning,
  // since it commits nothing: records already seen are recognised by position and skipped.
  std::set<std::tuple<std::string, std::int32_t, std::int64_t>> positions_;
};

struct Tally {
  std::size_t sent = 0;
  std::size_t delivered = 0;
  std::size_t lost = 0;
  std::size_t early = 0;
  std::size_t duplicates = 0;
  std::size_t unexpected = 0;          // ready records whose job-id the case did not send
  std::vector<std::string> lost_ids;   // the first few
  std::vector<std::string> early_ids;  // the first few, with their figures
  std::int64_t max_late_ms = 0;        // over delivered jobs: first receipt's Kafka time - deliver-at
};

Tally tally(const Expected& expected, const ReadyWatcher& watcher);

// The summary line of one case. print() computes the tally and prints the line once; if the
// case ends by an exception before that, the destructor prints it with what was seen so far.
class CaseLine {
 public:
  CaseLine(std::string name, const Expected& expected, const ReadyWatcher& watcher, std::function<std::string()> up);
  ~CaseLine();
  CaseLine(const CaseLine&) = delete;
  CaseLine& operator=(const CaseLine&) = delete;
  // Appended to the line as ", <key> <value>", in the order given.
  void note(const std::string& key, const std::string& value);
  Tally print();

 private:
  std::string name_;
  const Expected& expected_;
  const ReadyWatcher& watcher_;
  std::function<std::string()> up_;
  std::vector<std::pair<std::string, std::string>> notes_;
  bool printed_ = false;
};

// "yes" if the process runs; otherwise "no" with how it ended.
std::string up_word(DelaydProcess& delayd);

// Polls until every expected job was seen, delayd is gone, or the timeout passes; then, if all
// were seen, a little longer for duplicates right behind them. Returns whether all were seen.
bool settle(ReadyWatcher& watcher, const Expected& expected, DelaydProcess& delayd, std::chrono::milliseconds timeout);

// The assertions every case makes: nothing lost, nothing early, and delayd up if expected.
void check_outcome(const Tally& t, const World& world, bool expect_up, const std::string& up);

// The last lines of the world's delayd log, for failure messages.
std::string log_tail(const World& world, std::size_t lines = 25);

// Shards the instances that log to `log_path` lost without a revoke (broker/ownership.cpp's
// "lost" line), and the librdkafka they ran on, both noted on the case's line ("shards lost by
// the others", "librdkafka"). An instance a case faults logs apart (Fleet::log_apart()), so the
// log holds the others only, which keep their shards through a rebalance unless their librdkafka
// drops an assignment when an offset commit meets one (connectors::commits_lose_assignment()).
struct ShardsLost {
  std::size_t count = 0;
  std::optional<connectors::LibrdkafkaVersion> librdkafka;  // none: the log names none
  // True when none may be lost: a librdkafka that keeps its assignment.
  bool none_expected() const;
};
ShardsLost note_shards_lost(CaseLine& line, const std::string& log_path);

// ---- the stack ----

struct ScriptResult {
  int status = -1;
  std::string output;
};
// Runs scripts/stack.sh with these arguments (stdout and stderr together), with no descriptor
// of this process inherited beyond the standard three.
// `env` adds to (or overrides in) this process's environment for the script.
ScriptResult run_stack_script(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {});
// Fails the test unless scripts/stack.sh speaks of the same servers as KAFKA_BOOTSTRAP and
// REDIS_URL (checked once per process).
void require_stack_is_ours();
// scripts/stack.sh restart <server>; fails the test if it did not come back.
void restart_server(const std::string& server, const std::map<std::string, std::string>& env = {});
// Whether `scripts/stack.sh status` says the server is up and answering.
bool server_up(const std::string& server);

// Brings the server back (scripts/stack.sh restart) at scope exit if it does not answer then.
class ServerGuard {
 public:
  explicit ServerGuard(std::string server);
  ~ServerGuard();
  ServerGuard(const ServerGuard&) = delete;
  ServerGuard& operator=(const ServerGuard&) = delete;

 private:
  std::string server_;
};

// Creates a topic (one replica) with topic-level configuration, e.g. max.message.bytes, and
// waits until its partitions have leaders. Fails the test if Kafka refuses.
void create_topic_with_config(const World& world, const std::string& topic,
                              const std::map<std::string, std::string>& config, int partitions = 4);

// A Redis connection of the test's own to the world's Redis.
redis::RedisConnection redis_for(const World& world, int timeout_ms = 2000);

// Pauses the world's Redis for every client (CLIENT PAUSE <ms> ALL: it answers nobody until then)
// and ends the pause when it goes, should the case end sooner.
class RedisPause {
 public:
  RedisPause(const World& world, std::chrono::milliseconds how_long);
  ~RedisPause();
  RedisPause(const RedisPause&) = delete;
  RedisPause& operator=(const RedisPause&) = delete;

 private:
  const World& world_;
};

// Pings Redis from a thread of its own with fresh connections every few ms, and records whether
// it answered LOADING (and for how long) and for how long it did not answer PONG at all.
class RedisPinger {
 public:
  explicit RedisPinger(const World& world);
  ~RedisPinger();
  void stop();
  bool saw_loading() const { return first_loading_ms_ > 0; }
  // From the first LOADING answer to the last one.
  std::int64_t loading_ms() const { return saw_loading() ? last_loading_ms_ - first_loading_ms_ : 0; }
  std::int64_t longest_gap_ms() const { return longest_gap_ms_; }

 private:
  std::string host_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::int64_t> first_loading_ms_{0};
  std::atomic<std::int64_t> last_loading_ms_{0};
  std::atomic<std::int64_t> longest_gap_ms_{0};
  std::thread thread_;
};

// GET /stats of delayd's admin endpoint; the value of a field named max_turn_ms anywhere in
// the JSON (loop.max_turn_ms, say), or "n/a".
std::string max_turn_ms(std::uint16_t admin_port);

}  // namespace delayd::chaos
