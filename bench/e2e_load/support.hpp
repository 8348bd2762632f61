// The shared parts of bench/e2e_load (see main.cpp for what the tool does): options and output,
// RAII over librdkafka and hiredis handles, Kafka topics and offsets, the publishing producer,
// the ready-topic collector, the lateness figures, Redis (INFO and the public counters only) and
// the CPU windows of a phase. Every subcommand's file includes this one.
#pragma once

#include <hiredis/hiredis.h>
#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace e2e {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::size_t kValueBytes = 200;
constexpr std::string_view kBusiness = "bench";
constexpr int kPartitions = 4;  // of the topics this tool creates, as delayd creates its own

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A job lost, early or fired too soon: the run goes on, the exit status says it.
constexpr int kPipelineBroken = 3;

// ---------------------------------------------------------------------------------------------
// Time, output, options

// Wall-clock now in epoch milliseconds: the clock of deliver-at and of record timestamps.
std::int64_t epoch_ms();

// Seconds from a to b.
double seconds_between(Clock::time_point a, Clock::time_point b);

// One figure as a JSON line on stdout, flushed so that the script sees it at once.
void emit(const Json& line);

// A progress line on stderr.
void note(const std::string& message);

// "--name value" pairs after the subcommand.
class Options {
 public:
  // Throws UsageError for a word that is not a "--name value" pair.
  Options(int argc, char** argv) {
    for (int i = 2; i < argc; i += 2) {
      const std::string name = argv[i];
      if (!name.starts_with("--") || i + 1 >= argc) throw UsageError("expected --name value, got " + name);
      values_[name.substr(2)] = argv[i + 1];
    }
  }
  // The value of --name, or `fallback`.
  std::string str(const std::string& name, const std::string& fallback) const {
    const auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  // The value of --name; throws UsageError when it is missing.
  std::string required(const std::string& name) const {
    const auto it = values_.find(name);
    if (it == values_.end()) throw UsageError("missing --" + name);
    return it->second;
  }
  // The value of --name as an integer; throws UsageError when it is missing or not one.
  std::int64_t required_num(const std::string& name) const {
    required(name);
    return num(name, 0);
  }
  // The value of --name as an integer, or `fallback`; throws UsageError when it is not one.
  std::int64_t num(const std::string& name, std::int64_t fallback) const {
    const auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    std::int64_t v = 0;
    const auto& s = it->second;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) throw UsageError("--" + name + " is not an integer: " + s);
    return v;
  }

 private:
  std::map<std::string, std::string> values_;
};

// The comma-separated words of `list`.
std::vector<std::string> split_commas(const std::string& list);

// ---------------------------------------------------------------------------------------------
// RAII for librdkafka and hiredis handles

template <auto Fn>
struct FnDeleter {
  template <class T>
  void operator()(T* p) const noexcept {
    Fn(p);
  }
};
// A consumer is closed (leaving no fetch or group state behind) before it is destroyed.
struct ConsumerCloser {
  void operator()(rd_kafka_t* rk) const noexcept {
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
  }
};
using ConfPtr = std::unique_ptr<rd_kafka_conf_t, FnDeleter<rd_kafka_conf_destroy>>;
using KafkaPtr = std::unique_ptr<rd_kafka_t, FnDeleter<rd_kafka_destroy>>;
using ConsumerPtr = std::unique_ptr<rd_kafka_t, ConsumerCloser>;
using ListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, FnDeleter<rd_kafka_topic_partition_list_destroy>>;
using MessagePtr = std::unique_ptr<rd_kafka_message_t, FnDeleter<rd_kafka_message_destroy>>;
using HeadersPtr = std::unique_ptr<rd_kafka_headers_t, FnDeleter<rd_kafka_headers_destroy>>;
using TopicPtr = std::unique_ptr<rd_kafka_topic_t, FnDeleter<rd_kafka_topic_destroy>>;
using MetadataPtr = std::unique_ptr<const rd_kafka_metadata_t, FnDeleter<rd_kafka_metadata_destroy>>;
using QueuePtr = std::unique_ptr<rd_kafka_queue_t, FnDeleter<rd_kafka_queue_destroy>>;
using EventPtr = std::unique_ptr<rd_kafka_event_t, FnDeleter<rd_kafka_event_destroy>>;
using NewTopicPtr = std::unique_ptr<rd_kafka_NewTopic_t, FnDeleter<rd_kafka_NewTopic_destroy>>;
using DeleteTopicPtr = std::unique_ptr<rd_kafka_DeleteTopic_t, FnDeleter<rd_kafka_DeleteTopic_destroy>>;
using DeleteGroupPtr = std::unique_ptr<rd_kafka_DeleteGroup_t, FnDeleter<rd_kafka_DeleteGroup_destroy>>;
using RedisPtr = std::unique_ptr<redisContext, FnDeleter<redisFree>>;
using ReplyPtr = std::unique_ptr<redisReply, FnDeleter<freeReplyObject>>;

using Settings = std::vector<std::pair<std::string, std::string>>;

// A librdkafka configuration holding `settings`; throws naming a refused one.
ConfPtr make_conf(const Settings& settings);

// A client of `type` built from `conf` (which it takes over).
rd_kafka_t* new_client(rd_kafka_type_t type, ConfPtr conf);

// The producer settings of every publish of this tool, the Kafka limit and the load phases
// alike: acknowledged by all in-sync replicas, idempotent (as a careful producer of jobs would
// be), batched for throughput.
Settings producer_settings(const std::string& bootstrap, int linger_ms = 5);

// A consumer that never commits; `group` is only its name unless the caller asks about the
// group's offsets.
Settings consumer_settings(const std::string& bootstrap, const std::string& group);

// ---------------------------------------------------------------------------------------------
// Kafka: topics, offsets

// Throws unless `err` is success.
void check_kafka(rd_kafka_resp_err_t err, const std::string& what);

// How many partitions `topic` has, waiting for it to appear until `deadline`.
int partition_count(rd_kafka_t* rk, const std::string& topic, Clock::time_point deadline);

// Runs one admin request whose result arrives on `queue`; returns the result event.
EventPtr await_admin(rd_kafka_queue_t* queue, const std::string& what);

// Creates `topic` (kPartitions partitions, one replica) unless it exists.
void create_topic(rd_kafka_t* rk, const std::string& topic);

// The end offset (high watermark) of each partition of `topic`.
std::vector<std::int64_t> end_offsets(rd_kafka_t* rk, const std::string& topic, int partitions);

// Polls `group`'s committed offsets on `topic` every 50 ms, without joining the group, until
// every partition's reaches `ends`; returns the moment it saw that, or nullopt at `deadline`.
std::optional<Clock::time_point> wait_committed(const std::string& bootstrap, const std::string& group,
                                                const std::string& topic, const std::vector<std::int64_t>& ends,
                                                Clock::time_point deadline);

// ---------------------------------------------------------------------------------------------
// Publishing

// An idempotent producer that counts its delivery reports. A failed report is an error of the
// run: every job must reach the ingest topic.
// The key of every record about one job: its schedule, a cancel or reschedule, a status report.
// One key puts them in one partition number (delayd reads a report's shard first by it:
// storage/job_store.hpp, locate()), as the clients key them (clients/, by the job-id).
inline std::string record_key(std::string_view job_id) { return "k:" + std::string(job_id); }

class Producer {
 public:
  // linger_ms: the producer's linger.ms (producer_settings()).
  explicit Producer(const std::string& bootstrap, int linger_ms = 5) {
    ConfPtr conf = make_conf(producer_settings(bootstrap, linger_ms));
    rd_kafka_conf_set_dr_msg_cb(conf.get(), &Producer::on_report);
    rd_kafka_conf_set_opaque(conf.get(), reports_.get());
    rk_.reset(new_client(RD_KAFKA_PRODUCER, std::move(conf)));
  }

  // Enqueues one job record (copied), serving delivery reports while librdkafka's queue is full.
  void send(const std::string& topic, const std::string& job_id, std::int64_t deliver_at, const std::string& value) {
    const std::string due = std::to_string(deliver_at);
    send_record(topic, record_key(job_id), value, {{"deliver-at", due}, {"business", kBusiness}, {"job-id", job_id}});
  }

  // Enqueues one record (copied) with these headers, in this order: the other kinds of record
  // (a cancel, a reschedule, a repeat, a status report). Serves delivery reports while
  // librdkafka's queue is full.
  void send_record(const std::string& topic, std::string_view key, std::string_view value,
                   std::initializer_list<std::pair<std::string_view, std::string_view>> header_list) {
    for (;;) {
      HeadersPtr headers(rd_kafka_headers_new(header_list.size()));
      for (const auto& [name, text] : header_list) {
        rd_kafka_header_add(headers.get(), name.data(), static_cast<ssize_t>(name.size()), text.data(),
                            static_cast<ssize_t>(text.size()));
      }
      const auto err = rd_kafka_producev(
          rk_.get(), RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY(key.data(), key.size()),
          RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_HEADERS(headers.get()), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        headers.release();  // the record owns them now
        return;
      }
      if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) check_kafka(err, "produce to " + topic);
      rd_kafka_poll(rk_.get(), 5);
    }
  }

  // Serves delivery reports for up to `ms` milliseconds.
  void poll(int ms) { rd_kafka_poll(rk_.get(), ms); }

  // Waits until every record is acknowledged; throws if one failed or time ran out.
  void flush(milliseconds timeout) {
    check_kafka(rd_kafka_flush(rk_.get(), static_cast<int>(timeout.count())), "flush");
    if (reports_->failed > 0) {
      throw std::runtime_error(std::to_string(reports_->failed) +
                               " records not acknowledged: " + reports_->first_error);
    }
  }

  rd_kafka_t* handle() const { return rk_.get(); }

 private:
  struct Reports {
    std::int64_t ok = 0;
    std::int64_t failed = 0;
    std::string first_error;
  };

  static void on_report(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    auto& reports = *static_cast<Reports*>(opaque);
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      ++reports.ok;
    } else if (reports.failed++ == 0) {
      reports.first_error = rd_kafka_err2str(m->err);
    }
  }

  std::unique_ptr<Reports> reports_ = std::make_unique<Reports>();
  KafkaPtr rk_;
};

// The value every job carries: kValueBytes bytes, the same each time (only key and id differ).
const std::string& job_value();

// The values of --values FILE (one per line), or none: then every job carries job_value().
std::vector<std::string>& corpus();

// Loads --values FILE into corpus(), if given. Throws UsageError for a missing or empty file.
void load_corpus(const std::string& path);

// The value of job `index`: line index mod the corpus's size of --values, else job_value().
const std::string& value_of(std::int64_t index);

// The job-id of job `index` of `tag`.
std::string job_id(const std::string& tag, std::int64_t index);

// Sends one job "<tag>.warmup-0", due at once, and waits until it is on the ready topic; returns
// how long that took (ms). Afterwards the measured jobs meet a warm producer here and a delayd past
// its first fire (a fresh delayd sets up its ready topic then; the first job took about 2 s here).
std::int64_t warm_up(const std::string& bootstrap, const std::string& tag, Producer& producer,
                     const std::string& ingest, const std::string& ready);

// Publishes jobs [first, last) of `tag` as fast as the producer takes them, job i due at due(i).
template <class DueFn>
void publish_all(Producer& producer, const std::string& topic, const std::string& tag, std::int64_t first,
                 std::int64_t last, DueFn due) {
  for (std::int64_t i = first; i < last; ++i) {
    producer.send(topic, job_id(tag, i), due(i), value_of(i));
    if ((i & 1023) == 0) producer.poll(0);
  }
}

// The moment the group has committed everything now in `topic`, waiting until `deadline`.
// Throws if the deadline passes first: delayd stopped ingesting.
Clock::time_point ingest_done(const std::string& bootstrap, Producer& producer, const std::string& group,
                              const std::string& topic, Clock::time_point deadline);

// ---------------------------------------------------------------------------------------------
// Reading the ready topic

// A consumer outside any group's membership (assign, not subscribe) reading every partition of
// `topic` from its first offset; `name` is its group.id, never joined or committed to.
ConsumerPtr open_reader(const std::string& bootstrap, const std::string& name, const std::string& topic);

// One job's first delivery as the ready topic shows it.
struct Delivery {
  std::int64_t index = 0;
  // When it was due: the ready record's deliver-at header (a retry after a failed report is due
  // later: lives.cpp)
  std::int64_t deliver_at = 0;
  std::int64_t timestamp = 0;  // the ready record's Kafka timestamp: when delayd produced it
  // Epoch ms when this reader took the record: when a consumer could act on it. It adds to the
  // timestamp what the record spent in delayd's producer queue, Kafka and this reader.
  std::int64_t received = 0;
};

// The integer in `text`, if it is one.
std::optional<std::int64_t> parse_int(std::string_view text);

// The last header `name` of `m`, if any.
std::optional<std::string_view> header(const rd_kafka_message_t* m, const char* name);

// What the readers need of a ready record: its deliver-at header, and its job's index when its
// job-id is "<tag>-<index>" (nullopt for another id: a foreign record). Throws for a record
// without a numeric deliver-at: delayd's contract is broken.
struct ReadyRecord {
  std::int64_t deliver_at = 0;
  std::optional<std::int64_t> index;
};
ReadyRecord read_ready(const rd_kafka_message_t* m, std::string_view tag);

// Polls `rk` until `stop` is set, handing each record to `take` and calling `between` (if any)
// after each poll; an error other than a partition's end is noted as "<who>: <error>".
void read_until(rd_kafka_t* rk, const std::atomic<bool>& stop, std::string_view who,
                const std::function<void(const rd_kafka_message_t*)>& take, const std::function<void()>& between = {});

// Reads a ready topic from its start on a thread of its own and keeps the first delivery of
// each job "<tag>-<index>" with index < expected. Other ids count as foreign, repeats as
// duplicates, and any record produced before its deliver-at as early.
class ReadyCollector {
 public:
  ReadyCollector(const std::string& bootstrap, const std::string& topic, std::string tag, std::int64_t expected)
      : tag_(std::move(tag)),
        rk_(open_reader(bootstrap, "e2e-reader-" + tag_, topic)),
        seen_flags_(static_cast<std::size_t>(expected), false) {
    thread_ = std::thread([this] { run(); });
  }
  ~ReadyCollector() { stop(); }
  ReadyCollector(const ReadyCollector&) = delete;
  ReadyCollector& operator=(const ReadyCollector&) = delete;

  // Waits until every expected job was seen or `deadline` passed, then stops reading. True when
  // all were seen. Rethrows what stopped the reading thread, if anything did.
  bool finish(Clock::time_point deadline) {
    while (seen_.load() < static_cast<std::int64_t>(seen_flags_.size()) && Clock::now() < deadline && !failed_.load()) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    stop();
    if (error_) std::rethrow_exception(error_);
    return seen_.load() == static_cast<std::int64_t>(seen_flags_.size());
  }

  std::int64_t seen() const { return seen_.load(); }
  // The rest is read after finish().
  std::int64_t expected() const { return static_cast<std::int64_t>(seen_flags_.size()); }
  const std::vector<Delivery>& deliveries() const { return deliveries_; }
  std::int64_t duplicates() const { return duplicates_; }
  std::int64_t foreign() const { return foreign_; }
  std::int64_t early() const { return early_; }
  // Jobs whose first ready record's value differs from the one published.
  std::int64_t altered() const { return altered_; }
  // Records whose deliver-at is earlier than that of the record before them in their partition:
  // how far a ready topic departs from due order (Kafka keeps each partition's order).
  std::int64_t out_of_order() const { return out_of_order_; }

 private:
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  void run() {
    try {
      read_until(rk_.get(), stop_, "ready reader", [this](const rd_kafka_message_t* m) { take(m); });
    } catch (...) {
      error_ = std::current_exception();
      failed_ = true;
    }
  }

  void take(const rd_kafka_message_t* m) {
    const std::int64_t received = epoch_ms();
    const std::int64_t timestamp = rd_kafka_message_timestamp(m, nullptr);
    const auto [due, index] = read_ready(m, tag_);
    if (timestamp < due) ++early_;
    auto [last_due, first_in_partition] = last_due_.try_emplace(m->partition, due);
    if (!first_in_partition && due < last_due->second) ++out_of_order_;
    last_due->second = std::max(last_due->second, due);
    if (!index || *index < 0 || *index >= expected()) {
      ++foreign_;
      return;
    }
    const auto slot = static_cast<std::size_t>(*index);
    if (seen_flags_[slot]) {
      ++duplicates_;
      return;
    }
    seen_flags_[slot] = true;
    const std::string& sent = value_of(*index);
    if (m->len != sent.size() || (m->len > 0 && std::memcmp(m->payload, sent.data(), m->len) != 0)) ++altered_;
    deliveries_.push_back({*index, due, timestamp, received});
    seen_.fetch_add(1);
  }

  std::string tag_;
  ConsumerPtr rk_;
  std::vector<bool> seen_flags_;
  std::vector<Delivery> deliveries_;
  std::int64_t duplicates_ = 0;
  std::int64_t foreign_ = 0;
  std::int64_t early_ = 0;
  std::int64_t altered_ = 0;
  std::int64_t out_of_order_ = 0;
  std::map<std::int32_t, std::int64_t> last_due_;  // partition -> the latest deliver-at read in it
  std::atomic<std::int64_t> seen_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  std::thread thread_;  // last: it starts once everything above is in place
};

// ---------------------------------------------------------------------------------------------
// Figures

// Nearest-rank percentile p (0..100) of sorted samples.
std::int64_t percentile(const std::vector<std::int64_t>& sorted, double p);

// Lateness in ms of each delivery, sorted: by the record's timestamp (`&Delivery::timestamp`,
// the default) or by when the reader had it (`&Delivery::received`), minus its deliver-at.
std::vector<std::int64_t> lateness_of(const std::vector<Delivery>& deliveries,
                                      std::int64_t Delivery::*at = &Delivery::timestamp);

// Lateness in ms at the reader (received - deliver-at), as "at_consumer": {p50, p99, p999, max}.
// The figures above go by the record's timestamp, which cannot show time spent after delayd's
// produce call; this one can, and also counts Kafka's own latency and the reader's.
Json at_consumer_json(const std::vector<Delivery>& deliveries);

// The lateness statistics of sorted samples, as JSON fields; "value" is p99.
Json lateness_json(const std::vector<std::int64_t>& sorted);

// Writes the empirical CDF of sorted samples: "lateness_ms fraction_at_or_below" per distinct value.
void write_cdf(const std::filesystem::path& file, const std::vector<std::int64_t>& sorted);

// The lateness of the jobs due in each minute of a long run, by the ready record's timestamp:
// "minute jobs p50 p99 max" per line (the soak's p99 per minute).
void write_per_minute(const std::filesystem::path& file, const std::vector<Delivery>& deliveries);

// Prints "<phase>_check" (jobs lost, duplicated, foreign, early) and returns the exit status
// it implies: the pipeline is broken when a job is missing or a record came early.
int check(const std::string& phase, const ReadyCollector& c);

// ---------------------------------------------------------------------------------------------
// Redis (INFO and the public counters only)

// RAII over one hiredis connection to a redis:// URL.
class Redis {
 public:
  explicit Redis(const std::string& url) {
    // redis://[[user]:password@]host[:port][/db]
    if (!url.starts_with("redis://")) throw UsageError("not a redis:// URL: " + url);
    std::string rest = url.substr(8);
    std::string user, password;
    if (const auto at = rest.rfind('@'); at != std::string::npos) {
      const std::string auth = rest.substr(0, at);
      rest = rest.substr(at + 1);
      const auto colon = auth.find(':');
      user = colon == std::string::npos ? "" : auth.substr(0, colon);
      password = colon == std::string::npos ? auth : auth.substr(colon + 1);
    }
    std::string db;
    if (const auto slash = rest.find('/'); slash != std::string::npos) {
      db = rest.substr(slash + 1);
      rest = rest.substr(0, slash);
    }
    int port = 6379;
    if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
      port = static_cast<int>(parse_int(rest.substr(colon + 1)).value_or(6379));
      rest = rest.substr(0, colon);
    }
    const timeval timeout{10, 0};
    ctx_.reset(redisConnectWithTimeout(rest.c_str(), port, timeout));
    if (!ctx_ || ctx_->err) throw std::runtime_error("redis " + url + ": " + (ctx_ ? ctx_->errstr : "no memory"));
    redisSetTimeout(ctx_.get(), timeout);
    if (!password.empty()) {
      user.empty() ? command({"AUTH", password}) : command({"AUTH", user, password});
    }
    if (!db.empty()) command({"SELECT", db});
  }

  // Runs one command; throws on a connection error or an error reply.
  ReplyPtr command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    ReplyPtr r(static_cast<redisReply*>(
        redisCommandArgv(ctx_.get(), static_cast<int>(args.size()), argv.data(), lens.data())));
    if (!r) throw std::runtime_error(std::string("redis: ") + ctx_->errstr);
    if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error("redis " + args[0] + ": " + std::string(r->str, r->len));
    return r;
  }

  // INFO memory's used_memory, in bytes.
  std::int64_t used_memory() {
    const ReplyPtr r = command({"INFO", "memory"});
    const std::string_view text(r->str, r->len);
    const std::string_view field = "used_memory:";
    const auto pos = text.find(field);
    if (pos == std::string_view::npos) throw std::runtime_error("INFO memory has no used_memory");
    const auto end = text.find('\r', pos);
    return parse_int(text.substr(pos + field.size(), end - pos - field.size())).value_or(0);
  }

 private:
  RedisPtr ctx_;
};

// The keys matching `pattern` (SCAN, so Redis is never blocked).
std::vector<std::string> keys_matching(Redis& redis, const std::string& pattern);

// Waits until `field`, summed over the counter hashes matching `pattern` (delayd's documented
// "<business>|<state>" counters, one hash or one per shard), reaches `target`, for at most
// `timeout`; true if it did. With no hash matching (another layout) it returns false at once.
bool wait_counters(Redis& redis, const std::string& pattern, const std::string& field, std::int64_t target,
                   milliseconds timeout);

// ---------------------------------------------------------------------------------------------
// Subcommands

// What every phase against delayd needs.
struct Phase {
  explicit Phase(const Options& o)
      : bootstrap(o.str("bootstrap", "127.0.0.1:19092")),
        redis_url(o.str("redis-url", "redis://127.0.0.1:16379")),
        tag(o.str("tag", "e2e")),
        data_dir(o.str("data-dir", ".")) {
    std::filesystem::create_directories(data_dir);
  }
  std::string bootstrap, redis_url, tag;
  std::filesystem::path data_dir;
};

// CPU time from /proc, in ms: a process's user + system time, or for pid 0 the idle time of
// every core together; nullopt when it cannot be read (the process is gone, not Linux).
std::optional<std::int64_t> cpu_ms(long pid);

// --cpu-pids "redis:123,kafka:456,delayd:789": the processes whose CPU time a phase reports.
std::vector<std::pair<std::string, long>> cpu_pids(const Options& o);

// CPU time of each of `pids` (cpu_pids()), read now; -1 for one that cannot be read.
std::vector<std::int64_t> cpu_now(const std::vector<std::pair<std::string, long>>& pids);

// The figure "<phase>_cpu": what each process of `pids` spent over a phase of `n` jobs that took
// `seconds`, in ms and in µs a job, the idle time of all cores, and the cores' busy fraction.
// What bounds a phase that leaves cores idle is waiting, not the machine's CPU; one that leaves
// none is bound by the CPU that every process on the machine shares (Redis's limit, measured
// with Redis alone, is not).
Json cpu_figure(const std::string& phase, const std::vector<std::pair<std::string, long>>& pids,
                const std::vector<std::int64_t>& before, const std::vector<std::int64_t>& after, std::int64_t n,
                double seconds);

// One phase's CPU window: the processes of --cpu-pids (with this one and the cores' idle time),
// read when it is made; figure() reads them again and makes "<phase>_cpu" of the time between.
class CpuWindow {
 public:
  explicit CpuWindow(const Options& o) : pids_(cpu_pids(o)), before_(cpu_now(pids_)), t0_(Clock::now()) {}

  // cpu_figure() of the window from its start until now, for `n` jobs.
  Json figure(const std::string& phase, std::int64_t n) const {
    const auto after = cpu_now(pids_);
    return cpu_figure(phase, pids_, before_, after, n, seconds_between(t0_, Clock::now()));
  }

 private:
  std::vector<std::pair<std::string, long>> pids_;
  std::vector<std::int64_t> before_;
  Clock::time_point t0_;
};

// The figure of a whole-life rate of the sweep: "lateness_<rate>_per_s".
std::string rate_figure(std::int64_t rate);

// The stem of a lateness figure's other names: the figure without a trailing "_per_s"
// ("lateness_1000" of "lateness_1000_per_s", "lateness_short_20ms" of itself). Its check is
// "<stem>_check" and its CDF "<stem, '_' as '-'>.txt" in the data directory (the figure's cdf_file).
std::string lateness_stem(std::string_view figure);

// The generator kept a rate when it sent at least this share of it.
constexpr double kRateKept = 0.95;

// The shape of a whole-life run (cmd_rate, cmd_lives): jobs published at `rate` a second for
// `seconds` (`achieved` the rate the generator kept), each due `delay_ms` after its publish.
struct WholeLifeRun {
  std::string figure;  // "lateness_<...>_per_s": lateness_stem() names the rest
  std::int64_t rate = 0, seconds = 0, delay_ms = 0, warmup_ms = 0;
  double achieved = 0;
};

// Emits the run's lateness figure (by the records' timestamps, and at the consumer) and `cpu`
// (its "<stem>_cpu"), notes a rate the generator did not keep, and writes the lateness CDF into
// the data directory, with the p99 per minute beside it for a run of two minutes or more.
void emit_whole_life(const Phase& ph, const WholeLifeRun& run, const std::vector<Delivery>& deliveries,
                     const Json& cpu);

}  // namespace e2e
