// End-to-end harness: runs the real delayd executable as a child process against the local
// stack, with topics, consumer group and Redis prefix of its own, so tests never see each
// other's jobs. Jobs go in through a real Kafka producer; ready records come out through a real
// consumer; job state is read from Redis.
//
// Threading: single-threaded tests.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "connectors/kafka_admin.hpp"
#include "connectors/kafka_consumer.hpp"
#include "connectors/kafka_producer.hpp"
#include "connectors/librdkafka_version.hpp"
#include "connectors/record.hpp"
#include "redis/client.hpp"
#include "redis/connection.hpp"
#include "redis/url.hpp"
#include "storage/job_store.hpp"
#include "support/kafka_acls.hpp"
#include "support/test_env.hpp"

namespace delayd::e2e {

std::int64_t now_ms();
// `base` with `more` appended (librdkafka applies them in order: a later entry wins).
connectors::Properties with(connectors::Properties base, const connectors::Properties& more);

// DELAYD_KAFKA_PRODUCER_PROPERTIES for tests of missing ready topics: librdkafka calls a topic
// unknown after topic.metadata.propagation.max.ms (30 s by default) and sees a new one at the
// next metadata refresh (5 min by default); 1 s each here.
inline constexpr const char* kQuickTopicMetadata =
    "topic.metadata.propagation.max.ms=1000,topic.metadata.refresh.interval.ms=1000";

// One isolated delayd world: names, and the settings delayd gets through DELAYD_* variables.
struct World {
  explicit World(const std::string& name);

  std::string bootstrap;
  std::string redis_url;
  std::string ingest_topic;
  std::string dlq_topic;
  std::string status_topic;  // consumers' status reports (running, finished, failed)
  std::string ready_prefix;  // ready topics are ready_prefix + business
  std::string group;
  std::string redis_prefix;
  std::string log_path;
  std::map<std::string, std::string> settings;  // extra DELAYD_* variables
  // On a secured stack (scripts/stack.sh with DELAYD_KAFKA_SASL=1): whether create_topics()
  // grants the stack's delayd user delayd_acls() for those topics. Tests of missing ACLs turn
  // it off and grant their own.
  bool grant_acls = true;

  std::string ready_topic(const std::string& business) const { return ready_prefix + business; }
  // Creates the ingest, status and DLQ topics and the ready topics of these businesses; on a
  // secured stack, grants delayd's user the ACLs it needs for them (grant_acls).
  void create_topics(const std::vector<std::string>& businesses, int partitions = 4);
  // Creates an ingest topic (one that exists is left as it is) and its delivery log
  // (config::delivery_log_topic(): exactly_once needs it, with as many partitions); on a secured
  // stack, grants delayd's user the log's ACLs too. create_topics() does this for ingest_topic.
  void create_ingest_topic(const std::string& topic, int partitions = 4);
  // The ACLs delayd needs in this world with ready topics for these businesses: exactly those
  // docs/operating/configuration.md's "Kafka security" lists (kafka.create_topics off: the tests create the topics).
  std::vector<testing::Acl> delayd_acls(const std::vector<std::string>& businesses) const;
  std::vector<std::pair<std::string, std::string>> environment() const;
};

// The delayd executable as a child process. The destructor kills it if it still runs.
class DelaydProcess {
 public:
  explicit DelaydProcess(const World& world);
  ~DelaydProcess();
  DelaydProcess(const DelaydProcess&) = delete;
  DelaydProcess& operator=(const DelaydProcess&) = delete;

  // Starts it and waits until its ingest topic's consumer has partitions (its log says
  // "assigned <ingest topic>[...").
  void start(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Starts it and waits until its log (from this start on) contains line_text.
  void start_until(const std::string& line_text, std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Starts it and waits until it exits by itself: its exit status (or -signal); nullopt if it
  // still ran after the timeout (then killed). For a start that must be refused.
  std::optional<int> run_to_exit(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // What it wrote to its log since its last start.
  std::string log_since_start() const;
  // SIGTERM, then waits; returns the exit status (or -signal).
  int stop(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // SIGKILL: a crash at whatever point it had reached.
  void kill9();
  bool running();

  // The child's pid while it runs (-1 otherwise).
  pid_t pid() const { return pid_; }
  // How the child ended, once running() has found it gone by itself: its exit status, or
  // -signal. nullopt while it runs, and after stop() or kill9().
  std::optional<int> exit_status() const { return exit_status_; }
  // When set before start(), the child gets SIGKILL if the test process dies (PR_SET_PDEATHSIG),
  // so that a test killed by ctest's timeout leaves no delayd behind.
  void set_die_with_test(bool on) { die_with_test_ = on; }
  // Runs the child as this user and group (the test runs as root): a fault test cuts one user's
  // packets off with an iptables owner match (tests/chaos/network_cut.hpp). From the next start().
  void run_as(uid_t uid, gid_t gid) {
    uid_ = uid;
    gid_ = gid;
  }
  // Runs this executable instead of the build's delayd (an earlier release: tests/upgrade).
  void set_binary(std::string path) { binary_ = std::move(path); }
  // Its output goes to this file instead of the world's log (from the next start()).
  void set_log_path(std::string path) { log_path_ = std::move(path); }
  const std::string& log_path() const { return log_path_.empty() ? world_.log_path : log_path_; }
  // A DELAYD_* variable of this process's own, over the world's (e.g. its admin port when
  // several instances share a world); applies from the next start().
  void set_env(const std::string& name, const std::string& value) { env_[name] = value; }

 private:
  // Forks and execs the child (the world's environment, then set_env()'s); returns its log file.
  std::string launch();

  const World& world_;
  pid_t pid_ = -1;
  std::size_t log_offset_ = 0;
  std::optional<int> exit_status_;
  bool die_with_test_ = false;
  std::map<std::string, std::string> env_;  // set_env()'s
  std::optional<uid_t> uid_;                // run_as()'s
  std::string log_path_;                    // set_log_path()'s; empty: the world's
  std::string binary_;                      // set_binary()'s; empty: the build's delayd
  gid_t gid_ = 0;
};

struct Job {
  std::string job_id;  // empty: no job-id header
  std::optional<std::string> deliver_at;
  std::optional<std::string> delay_ms;
  std::string business = "orders";
  std::optional<std::string> key;
  std::optional<std::string> value;
  connectors::Headers extra;
};

// A job due at `deliver_at` (epoch ms), the common case of the tests.
inline Job job_at(std::string job_id, std::int64_t deliver_at, std::string value,
                  std::optional<std::string> key = std::nullopt, std::string business = "orders") {
  Job j;
  j.job_id = std::move(job_id);
  j.deliver_at = std::to_string(deliver_at);
  j.value = std::move(value);
  j.key = std::move(key);
  j.business = std::move(business);
  return j;
}

// The ingest record a producer would publish for `job` (no topic or partition set).
connectors::OutRecord ingest_record(const Job& job);

// Publishes records to the ingest topic and waits until Kafka acknowledged all of them.
class Publisher {
 public:
  explicit Publisher(const World& world);
  void send(const Job& job);
  void send_raw(connectors::OutRecord rec);
  // A record to its own topic (and partition, if set): another ingest topic's format.
  void send_to(connectors::OutRecord rec);
  void send_cancel(const std::string& job_id);
  // A reschedule on the ingest topic, keyed by the job-id; `when` is its time header(s):
  // {{"deliver-at", "<epoch ms or RFC 3339>"}} or {{"delay-ms", "<n>"}}.
  void send_reschedule(const std::string& job_id, const connectors::Headers& when);
  // A consumer's status report on the status topic, keyed by the job-id, as the contract has it:
  // headers job-id, status, and error and retry-after-ms when given. An empty job_id or status
  // leaves that header out (a record the broker must refuse).
  void send_report(const std::string& job_id, const std::string& status,
                   const std::optional<std::string>& error = std::nullopt,
                   std::optional<std::int64_t> retry_after_ms = std::nullopt,
                   std::optional<std::int64_t> attempt = std::nullopt);
  // Throws if any record was not acknowledged.
  void flush();

 private:
  const World& world_;
  std::vector<connectors::DeliveryReport> reports_;
  connectors::KafkaProducer producer_;
};

// Reads topics from the beginning in a fresh group.
class Collector {
 public:
  Collector(const World& world, std::vector<std::string> topics);
  // Polls until `done` says so or the timeout passes; returns whether `done` was reached.
  bool collect_until(const std::function<bool(const std::vector<connectors::Record>&)>& done,
                     std::chrono::milliseconds timeout);
  // Polls (keeping what arrives) until the consumer has its partitions, so that a test that
  // must react to a record in time does not lose the group join to it; whether it got them.
  bool wait_assigned(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  const std::vector<connectors::Record>& records() const { return records_; }
  // When each record of records() reached this collector: epoch ms by the wall clock, taken as
  // its poll returned. A record's own timestamp is when its producer handed it to librdkafka;
  // this is when a consumer could act on it.
  const std::vector<std::int64_t>& received_ms() const { return received_ms_; }

 private:
  connectors::KafkaConsumer consumer_;
  std::vector<connectors::Record> records_;
  std::vector<std::int64_t> received_ms_;  // parallel to records_
};

std::optional<std::string> header(const connectors::Record& r, const std::string& name);
// The values of the records whose job-id header is `id`, sorted (no value reads as "").
std::vector<std::string> values_of(const std::vector<connectors::Record>& recs, const std::string& id);
// The records of one job on one topic, in arrival order.
std::vector<const connectors::Record*> of(const std::vector<connectors::Record>& recs, const std::string& topic,
                                          const std::string& id);
// A header's decimal number; -1 when absent.
std::int64_t number(const std::optional<std::string>& text);
// The number in header `name` of each record, in order (-1 where absent).
std::vector<std::int64_t> numbers(const std::vector<const connectors::Record*>& recs, const std::string& name);
// Polls until done(), handing each record to on_new once, in arrival order, as it arrives.
bool react_until(Collector& c, std::size_t& handled, const std::function<void(const connectors::Record&)>& on_new,
                 const std::function<bool()>& done, std::chrono::milliseconds timeout);
// Keeps collecting for `span` (to see whatever extra record would follow).
void linger(Collector& c, std::chrono::milliseconds span);
// How many entries of a history list (lines "<ms> <event> <attempt> <detail>") have that event
// (and that attempt, if given).
int events(const std::vector<std::string>& history, const std::string& event,
           std::optional<std::int64_t> attempt = std::nullopt);
// The lines, each ended by "\n", for messages.
std::string joined(const std::vector<std::string>& lines);
// Everything delayd has logged in this world so far (every run of it).
std::string log_text(const World& w);
// How many times delayd left a consumer group because Redis was unreachable, by a log (one line
// per leave and group, broker/ingest_stage.cpp): the world's, or the file given.
std::size_t groups_left(const World& w);
std::size_t groups_left(const std::string& log_path);
// How many times `text` occurs in a delayd log file (0 if it cannot be read).
std::size_t count_in_log(const std::string& log_path, std::string_view text);
// How many lines of a delayd log hold `text` and were written from `from_ms` to `to_ms` (epoch
// milliseconds, both included), by each line's time stamp (apps/delayd/main.cpp's pattern:
// 2026-12-08T01:40:55.256+00:00); lines without one are not counted.
std::size_t count_in_log_between(const std::string& log_path, std::string_view text, std::int64_t from_ms,
                                 std::int64_t to_ms);
// The librdkafka the first delayd that wrote this log ran on, from its first line ("..., librdkafka
// 2.12.1"); none if the log cannot be read or names none.
std::optional<connectors::LibrdkafkaVersion> logged_librdkafka(const std::string& log_path);

// Redis, for reading job state.
class JobReader {
 public:
  explicit JobReader(const World& world);
  // The state of each job, in one round trip per call ("<none>" for a missing job).
  std::vector<std::string> states(const std::vector<std::string>& job_ids) { return fields(job_ids, "state"); }
  // One field of each job, in one round trip ("<none>" where absent).
  std::vector<std::string> fields(const std::vector<std::string>& job_ids, const std::string& name);
  std::optional<std::string> field(const std::string& job_id, const std::string& name);
  // The job's history list (<prefix>:{<shard>}:history:<job-id>), oldest first, each entry
  // "<ms> <event> <attempt> <detail>"; empty for an unknown job.
  std::vector<std::string> history(const std::string& job_id);
  // A string key's value as it is ("" when there is none): for keys that are no job's.
  std::string raw_get(const std::string& key);
  // The shards listed under the prefix (<prefix>:shards: JobStore::shards()).
  std::vector<std::string> shards() { return store_.shards(); }

 private:
  const World& world_;
  std::unique_ptr<redis::RedisClient> redis_;  // the slot router for a redis-cluster:// url
  storage::JobStore store_;                    // get_many(): the documented look-up, as delayctl get does it
};

// A loopback port for the admin endpoint of a test's delayd: support/free_port.hpp's free_port().
std::uint16_t free_port();
// GET path from 127.0.0.1:port; the whole HTTP response, or "" if nothing answers.
std::string http_get(std::uint16_t port, const std::string& path);
// GETs path every 100 ms until it answers 200 or the timeout passes; returns the last response.
std::string http_get_until_ok(std::uint16_t port, const std::string& path,
                              std::chrono::milliseconds timeout = std::chrono::seconds(30));
// One HTTP/1.0 request with extra header lines (each ending in CRLF) and a body (sent with its
// Content-Length when not empty) from 127.0.0.1:port; the whole response, or "" if nothing answers.
std::string http_request(std::uint16_t port, const std::string& method, const std::string& path,
                         const std::string& headers, const std::string& body = "");

// Percentile of a sorted sample (nearest rank).
std::int64_t percentile(const std::vector<std::int64_t>& sorted, double p);

}  // namespace delayd::e2e
