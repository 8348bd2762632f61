// e2e_load: the load generator and measurer behind bench/run-e2e.sh. It drives delayd only
// through its contract: jobs go in as records on the ingest topic (a 200-byte value, a unique
// key, headers deliver-at, business=bench and job-id "<tag>-<index>"); ready records come out of
// the ready topic; ingest progress is the consumer group's committed offsets; Redis is read only
// through INFO used_memory and the documented counters hash; the restart phase also reads the
// time of delayd's "assigned" log line. So a change of delayd's Redis layout
// or of its libraries does not break it: it uses librdkafka's C API and hiredis directly and
// links none of delayd's code.
//
// Every subcommand prints one JSON object per figure on stdout, progress on stderr. Exit status:
// 0 the pipeline was whole; 3 a job was lost, delivered early, or fired before its time in the
// restart phase; 1 an error (a timeout, Kafka or Redis refusing); 2 bad usage.
//
//   e2e_load kafka-limit     --topic T --n N
//   e2e_load ingest          --ingest-topic T --ready-topic R --group G --n N [--due-ms 60000]
//                            [--stats-match GLOB] [--settle-ms MS] [--cpu-pids name:pid,...]
//                            [--values FILE]   (job i's value: line i mod the lines of FILE; each
//                            ready record's value is checked against it: "altered" in the check)
//   e2e_load burst           --ingest-topic T --ready-topic R --group G --n N [--spread-ms 2000]
//                            [--lead-ms L] [--cpu-pids name:pid,...]
//   e2e_load rate            --ingest-topic T --ready-topic R --rate R --seconds D --delay-ms MS
//                            [--figure lateness_<R>_per_s] [--cpu-pids name:pid,...]
//   e2e_load restart-publish --ingest-topic T --ready-topic R --group G --far N --overdue M
//                            [--far-ms 3600000] [--margin-ms 10000]
//   e2e_load restart-measure --ready-topic R --overdue M --start-ms S --log FILE
//   e2e_load report          --in RAW.jsonl --out e2e.jsonl   (with each phase's "<phase>_cpu",
//                            the cores' ceiling beside its machine limit: cmd_report)
//   e2e_load compare         --before e2e.jsonl --after e2e.jsonl [--peer e2e.jsonl]
//   e2e_load medians         --dir D --rounds N   (D/round<k>/{off,on}/e2e.jsonl: run-trace-cost.sh)
//   e2e_load cleanup         [--topic-prefix P] [--redis-match GLOB,...] [--groups G,...]
// Common options: --bootstrap host:port, --redis-url redis://host:port, --tag (job-id prefix,
// default "e2e"), --data-dir (where the raw data for the plots goes, default ".").
//
// Threading: a ready topic is read on a thread of its own (ReadyCollector); everything else,
// delivery reports included, runs on the main thread.
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

namespace {

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
std::int64_t epoch_ms() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Seconds from a to b.
double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One figure as a JSON line on stdout, flushed so that the script sees it at once.
void emit(const Json& line) { std::cout << line.dump() << std::endl; }

// A progress line on stderr.
void note(const std::string& message) { std::cerr << "e2e_load: " << message << std::endl; }

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
std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    const auto end = std::min(list.find(',', start), list.size());
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

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
ConfPtr make_conf(const Settings& settings) {
  ConfPtr conf(rd_kafka_conf_new());
  char err[512];
  for (const auto& [name, value] : settings) {
    if (rd_kafka_conf_set(conf.get(), name.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      throw std::runtime_error("kafka setting " + name + "=" + value + ": " + err);
    }
  }
  return conf;
}

// A client of `type` built from `conf` (which it takes over).
rd_kafka_t* new_client(rd_kafka_type_t type, ConfPtr conf) {
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(type, conf.get(), err, sizeof err);
  if (rk == nullptr) throw std::runtime_error(std::string("kafka client: ") + err);
  conf.release();  // rd_kafka_new owns it now
  return rk;
}

// The producer settings of every publish of this tool, the Kafka limit and the load phases
// alike: acknowledged by all in-sync replicas, idempotent (as a careful producer of jobs would
// be), batched for throughput.
Settings producer_settings(const std::string& bootstrap) {
  return {{"bootstrap.servers", bootstrap}, {"acks", "all"},
          {"enable.idempotence", "true"},   {"linger.ms", "5"},
          {"batch.num.messages", "10000"},  {"queue.buffering.max.messages", "1000000"},
          {"compression.type", "none"}};
}

// A consumer that never commits; `group` is only its name unless the caller asks about the
// group's offsets.
Settings consumer_settings(const std::string& bootstrap, const std::string& group) {
  return {{"bootstrap.servers", bootstrap},
          {"group.id", group},
          {"enable.auto.commit", "false"},
          {"enable.auto.offset.store", "false"},
          {"auto.offset.reset", "earliest"}};
}

// ---------------------------------------------------------------------------------------------
// Kafka: topics, offsets

// Throws unless `err` is success.
void check_kafka(rd_kafka_resp_err_t err, const std::string& what) {
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) throw std::runtime_error(what + ": " + rd_kafka_err2str(err));
}

// How many partitions `topic` has, waiting for it to appear until `deadline`.
int partition_count(rd_kafka_t* rk, const std::string& topic, Clock::time_point deadline) {
  TopicPtr handle(rd_kafka_topic_new(rk, topic.c_str(), nullptr));
  for (;;) {
    const rd_kafka_metadata_t* raw = nullptr;
    const auto err = rd_kafka_metadata(rk, 0, handle.get(), &raw, 5000);
    MetadataPtr md(raw);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR && md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR &&
        md->topics[0].partition_cnt > 0) {
      return md->topics[0].partition_cnt;
    }
    if (Clock::now() > deadline) throw std::runtime_error("topic " + topic + " did not appear");
    std::this_thread::sleep_for(milliseconds(100));
  }
}

// Runs one admin request whose result arrives on `queue`; returns the result event.
EventPtr await_admin(rd_kafka_queue_t* queue, const std::string& what) {
  EventPtr ev(rd_kafka_queue_poll(queue, 60000));
  if (!ev) throw std::runtime_error(what + ": no answer within 60 s");
  check_kafka(rd_kafka_event_error(ev.get()), what);
  return ev;
}

// Creates `topic` (kPartitions partitions, one replica) unless it exists.
void create_topic(rd_kafka_t* rk, const std::string& topic) {
  char err[512];
  NewTopicPtr nt(rd_kafka_NewTopic_new(topic.c_str(), kPartitions, 1, err, sizeof err));
  if (!nt) throw std::runtime_error("topic " + topic + ": " + err);
  QueuePtr queue(rd_kafka_queue_new(rk));
  rd_kafka_NewTopic_t* topics[] = {nt.get()};
  rd_kafka_CreateTopics(rk, topics, 1, nullptr, queue.get());
  const EventPtr ev = await_admin(queue.get(), "create topic " + topic);
  std::size_t count = 0;
  const auto** results = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev.get()), &count);
  for (std::size_t i = 0; i < count; ++i) {
    const auto e = rd_kafka_topic_result_error(results[i]);
    if (e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) check_kafka(e, "create topic " + topic);
  }
  partition_count(rk, topic, Clock::now() + seconds(30));
}

// The end offset (high watermark) of each partition of `topic`.
std::vector<std::int64_t> end_offsets(rd_kafka_t* rk, const std::string& topic, int partitions) {
  std::vector<std::int64_t> ends;
  for (int p = 0; p < partitions; ++p) {
    std::int64_t low = 0, high = 0;
    check_kafka(rd_kafka_query_watermark_offsets(rk, topic.c_str(), p, &low, &high, 10000), "watermarks of " + topic);
    ends.push_back(high);
  }
  return ends;
}

// Polls `group`'s committed offsets on `topic` every 50 ms, without joining the group, until
// every partition's reaches `ends`; returns the moment it saw that, or nullopt at `deadline`.
std::optional<Clock::time_point> wait_committed(const std::string& bootstrap, const std::string& group,
                                                const std::string& topic, const std::vector<std::int64_t>& ends,
                                                Clock::time_point deadline) {
  ConsumerPtr rk(new_client(RD_KAFKA_CONSUMER, make_conf(consumer_settings(bootstrap, group))));
  for (;;) {
    ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(ends.size())));
    for (std::size_t p = 0; p < ends.size(); ++p)
      rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), static_cast<int>(p));
    bool done = rd_kafka_committed(rk.get(), list.get(), 5000) == RD_KAFKA_RESP_ERR_NO_ERROR;
    for (int i = 0; done && i < list->cnt; ++i) {
      const auto& tp = list->elems[i];
      done = tp.err == RD_KAFKA_RESP_ERR_NO_ERROR && tp.offset >= ends[static_cast<std::size_t>(tp.partition)];
    }
    const auto now = Clock::now();
    if (done) return now;
    if (now > deadline) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(50));
  }
}

// ---------------------------------------------------------------------------------------------
// Publishing

// An idempotent producer that counts its delivery reports. A failed report is an error of the
// run: every job must reach the ingest topic.
class Producer {
 public:
  explicit Producer(const std::string& bootstrap) {
    ConfPtr conf = make_conf(producer_settings(bootstrap));
    rd_kafka_conf_set_dr_msg_cb(conf.get(), &Producer::on_report);
    rd_kafka_conf_set_opaque(conf.get(), reports_.get());
    rk_.reset(new_client(RD_KAFKA_PRODUCER, std::move(conf)));
  }

  // Enqueues one job record (copied), serving delivery reports while librdkafka's queue is full.
  void send(const std::string& topic, const std::string& job_id, std::int64_t deliver_at, const std::string& value) {
    const std::string due = std::to_string(deliver_at);
    const std::string key = "k:" + job_id;
    for (;;) {
      HeadersPtr headers(rd_kafka_headers_new(3));
      rd_kafka_header_add(headers.get(), "deliver-at", -1, due.data(), static_cast<ssize_t>(due.size()));
      rd_kafka_header_add(headers.get(), "business", -1, kBusiness.data(), static_cast<ssize_t>(kBusiness.size()));
      rd_kafka_header_add(headers.get(), "job-id", -1, job_id.data(), static_cast<ssize_t>(job_id.size()));
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
const std::string& job_value() {
  static const std::string value = [] {
    std::string v(kValueBytes, 'x');
    const std::string_view label = "delayd e2e benchmark payload ";
    std::copy(label.begin(), label.end(), v.begin());
    return v;
  }();
  return value;
}

// The values of --values FILE (one per line), or none: then every job carries job_value().
std::vector<std::string>& corpus() {
  static std::vector<std::string> values;
  return values;
}

// Loads --values FILE into corpus(), if given. Throws UsageError for a missing or empty file.
void load_corpus(const std::string& path) {
  if (path.empty()) return;
  std::ifstream in(path);
  if (!in) throw UsageError("--values: cannot read " + path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) corpus().push_back(line);
  }
  if (corpus().empty()) throw UsageError("--values: no value in " + path);
}

// The value of job `index`: line index mod the corpus's size of --values, else job_value().
const std::string& value_of(std::int64_t index) {
  const auto& values = corpus();
  return values.empty() ? job_value() : values[static_cast<std::size_t>(index) % values.size()];
}

// The job-id of job `index` of `tag`.
std::string job_id(const std::string& tag, std::int64_t index) { return tag + "-" + std::to_string(index); }

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
                              const std::string& topic, Clock::time_point deadline) {
  const int partitions = partition_count(producer.handle(), topic, deadline);
  const auto ends = end_offsets(producer.handle(), topic, partitions);
  const auto done = wait_committed(bootstrap, group, topic, ends, deadline);
  if (!done) throw std::runtime_error("group " + group + " did not commit the end of " + topic + " in time");
  return *done;
}

// ---------------------------------------------------------------------------------------------
// Reading the ready topic

// A consumer outside any group's membership (assign, not subscribe) reading every partition of
// `topic` from its first offset; `name` is its group.id, never joined or committed to.
ConsumerPtr open_reader(const std::string& bootstrap, const std::string& name, const std::string& topic) {
  ConsumerPtr rk(new_client(RD_KAFKA_CONSUMER, make_conf(consumer_settings(bootstrap, name))));
  rd_kafka_poll_set_consumer(rk.get());
  const int partitions = partition_count(rk.get(), topic, Clock::now() + seconds(60));
  ListPtr list(rd_kafka_topic_partition_list_new(partitions));
  for (int p = 0; p < partitions; ++p) {
    rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  check_kafka(rd_kafka_assign(rk.get(), list.get()), "assign " + topic);
  return rk;
}

// One job's first delivery as the ready topic shows it.
struct Delivery {
  std::int64_t index = 0;
  std::int64_t deliver_at = 0;  // the ready record's deliver-at header
  std::int64_t timestamp = 0;   // the ready record's Kafka timestamp: when delayd produced it
  // Epoch ms when this reader took the record: when a consumer could act on it. It adds to the
  // timestamp what the record spent in delayd's producer queue, Kafka and this reader.
  std::int64_t received = 0;
};

// The integer in `text`, if it is one.
std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// The last header `name` of `m`, if any.
std::optional<std::string_view> header(const rd_kafka_message_t* m, const char* name) {
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(m, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR) return std::nullopt;
  const void* value = nullptr;
  std::size_t size = 0;
  if (rd_kafka_header_get_last(headers, name, &value, &size) != RD_KAFKA_RESP_ERR_NO_ERROR) return std::nullopt;
  return std::string_view(static_cast<const char*>(value), size);
}

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

 private:
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  void run() {
    try {
      while (!stop_.load()) {
        MessagePtr m(rd_kafka_consumer_poll(rk_.get(), 100));
        if (!m) continue;
        if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
          if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;
          note(std::string("ready reader: ") + rd_kafka_message_errstr(m.get()));
          continue;
        }
        take(m.get());
      }
    } catch (...) {
      error_ = std::current_exception();
      failed_ = true;
    }
  }

  void take(const rd_kafka_message_t* m) {
    const std::int64_t received = epoch_ms();
    const std::int64_t timestamp = rd_kafka_message_timestamp(m, nullptr);
    const auto due_text = header(m, "deliver-at");
    const auto due = due_text ? parse_int(*due_text) : std::nullopt;
    if (!due) throw std::runtime_error("a ready record without a numeric deliver-at header");
    if (timestamp < *due) ++early_;
    const auto id = header(m, "job-id");
    std::optional<std::int64_t> index;
    if (id && id->size() > tag_.size() + 1 && id->starts_with(tag_) && (*id)[tag_.size()] == '-') {
      index = parse_int(id->substr(tag_.size() + 1));
    }
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
    deliveries_.push_back({*index, *due, timestamp, received});
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
  std::atomic<std::int64_t> seen_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  std::thread thread_;  // last: it starts once everything above is in place
};

// ---------------------------------------------------------------------------------------------
// Figures

// Nearest-rank percentile p (0..100) of sorted samples.
std::int64_t percentile(const std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

// Lateness in ms of each delivery, sorted: by the record's timestamp (`&Delivery::timestamp`,
// the default) or by when the reader had it (`&Delivery::received`), minus its deliver-at.
std::vector<std::int64_t> lateness_of(const std::vector<Delivery>& deliveries,
                                      std::int64_t Delivery::*at = &Delivery::timestamp) {
  std::vector<std::int64_t> late;
  late.reserve(deliveries.size());
  for (const auto& d : deliveries) late.push_back(d.*at - d.deliver_at);
  std::sort(late.begin(), late.end());
  return late;
}

// Lateness in ms at the reader (received - deliver-at), as "at_consumer": {p50, p99, p999, max}.
// The figures above go by the record's timestamp, which cannot show time spent after delayd's
// produce call; this one can, and also counts Kafka's own latency and the reader's.
Json at_consumer_json(const std::vector<Delivery>& deliveries) {
  const std::vector<std::int64_t> late = lateness_of(deliveries, &Delivery::received);
  return {{"p50", percentile(late, 50)},
          {"p99", percentile(late, 99)},
          {"p999", percentile(late, 99.9)},
          {"max", late.empty() ? 0 : late.back()}};
}

// The lateness statistics of sorted samples, as JSON fields; "value" is p99.
Json lateness_json(const std::vector<std::int64_t>& sorted) {
  const auto early = std::count_if(sorted.begin(), sorted.end(), [](std::int64_t v) { return v < 0; });
  return {{"value", percentile(sorted, 99)},
          {"unit", "ms"},
          {"p50", percentile(sorted, 50)},
          {"p90", percentile(sorted, 90)},
          {"p99", percentile(sorted, 99)},
          {"p999", percentile(sorted, 99.9)},
          {"max", sorted.empty() ? 0 : sorted.back()},
          {"count", sorted.size()},
          {"early", early}};
}

// Writes the empirical CDF of sorted samples: "lateness_ms fraction_at_or_below" per distinct value.
void write_cdf(const std::filesystem::path& file, const std::vector<std::int64_t>& sorted) {
  std::ofstream out(file);
  out << "# lateness_ms fraction_at_or_below\n";
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (i + 1 < sorted.size() && sorted[i + 1] == sorted[i]) continue;
    out << sorted[i] << ' ' << static_cast<double>(i + 1) / static_cast<double>(sorted.size()) << '\n';
  }
}

// Prints "<phase>_check" (jobs lost, duplicated, foreign, early) and returns the exit status
// it implies: the pipeline is broken when a job is missing or a record came early.
int check(const std::string& phase, const ReadyCollector& c) {
  const std::int64_t lost = c.expected() - c.seen();
  emit({{"figure", phase + "_check"},
        {"expected", c.expected()},
        {"delivered", c.seen()},
        {"lost", lost},
        {"duplicates", c.duplicates()},
        {"foreign", c.foreign()},
        {"early", c.early()},
        {"altered", c.altered()},
        {"ok", lost == 0 && c.early() == 0 && c.altered() == 0}});
  if (lost == 0 && c.early() == 0 && c.altered() == 0) return 0;
  note(phase + ": pipeline broken: " + std::to_string(lost) + " lost, " + std::to_string(c.early()) + " early, " +
       std::to_string(c.altered()) + " altered");
  return kPipelineBroken;
}

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
std::vector<std::string> keys_matching(Redis& redis, const std::string& pattern) {
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    const ReplyPtr r = redis.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "2000"});
    cursor.assign(r->element[0]->str, r->element[0]->len);
    const redisReply* batch = r->element[1];
    for (std::size_t i = 0; i < batch->elements; ++i) keys.emplace_back(batch->element[i]->str, batch->element[i]->len);
  } while (cursor != "0");
  return keys;
}

// Waits until `field`, summed over the counter hashes matching `pattern` (delayd's documented
// "<business>|<state>" counters, one hash or one per shard), reaches `target`, for at most
// `timeout`; true if it did. With no hash matching (another layout) it returns false at once.
bool wait_counters(Redis& redis, const std::string& pattern, const std::string& field, std::int64_t target,
                   milliseconds timeout) {
  const auto keys = keys_matching(redis, pattern);
  if (keys.empty()) return false;
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    std::int64_t sum = 0;
    for (const auto& key : keys) {
      const ReplyPtr r = redis.command({"HGET", key, field});
      if (r->type == REDIS_REPLY_STRING) sum += parse_int(std::string_view(r->str, r->len)).value_or(0);
    }
    if (sum >= target) return true;
    std::this_thread::sleep_for(milliseconds(100));
  }
  return false;
}

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

// Kafka alone: how fast this producer (the settings of the load phases) writes n 200-byte
// records to a fresh topic until all are acknowledged, and how fast one consumer reads them.
int cmd_kafka_limit(const Options& o) {
  const Phase ph(o);
  const std::string topic = o.required("topic");
  const std::int64_t n = o.num("n", 200000);
  Producer producer(ph.bootstrap);
  create_topic(producer.handle(), topic);

  const auto t0 = Clock::now();
  publish_all(producer, topic, ph.tag, 0, n, [](std::int64_t) { return 1; });
  producer.flush(milliseconds(300000));
  const double produce_s = seconds_between(t0, Clock::now());
  emit({{"figure", "kafka_produce_per_s"},
        {"value", static_cast<double>(n) / produce_s},
        {"unit", "records/s"},
        {"machine", true},
        {"n", n},
        {"seconds", produce_s},
        {"value_bytes", kValueBytes}});

  const auto t1 = Clock::now();
  const auto deadline = t1 + seconds(300);
  std::int64_t got = 0;
  {
    ConsumerPtr rk = open_reader(ph.bootstrap, "e2e-limit-" + ph.tag, topic);
    while (got < n && Clock::now() < deadline) {
      MessagePtr m(rd_kafka_consumer_poll(rk.get(), 100));
      if (m && m->err == RD_KAFKA_RESP_ERR_NO_ERROR) ++got;
    }
  }
  const double consume_s = seconds_between(t1, Clock::now());
  if (got < n) throw std::runtime_error("read back only " + std::to_string(got) + " of " + std::to_string(n));
  emit({{"figure", "kafka_consume_per_s"},
        {"value", static_cast<double>(n) / consume_s},
        {"unit", "records/s"},
        {"machine", true},
        {"n", n},
        {"seconds", consume_s}});
  return 0;
}

// CPU time from /proc, in ms: a process's user + system time, or for pid 0 the idle time of
// every core together; nullopt when it cannot be read (the process is gone, not Linux).
std::optional<std::int64_t> cpu_ms(long pid) {
  const double per_tick_ms = 1000.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
  if (pid == 0) {
    std::ifstream stat("/proc/stat");
    std::string cpu;
    std::int64_t user = 0, nice = 0, system = 0, idle = 0;
    if (!(stat >> cpu >> user >> nice >> system >> idle) || cpu != "cpu") return std::nullopt;
    return static_cast<std::int64_t>(static_cast<double>(idle) * per_tick_ms);
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');  // the command name, in parentheses, may hold spaces
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  std::string skip;
  for (int f = 3; f < 14; ++f) fields >> skip;  // state .. cmajflt: fields 3 to 13 of proc(5)
  std::int64_t utime = 0, stime = 0;
  if (!(fields >> utime >> stime)) return std::nullopt;
  return static_cast<std::int64_t>(static_cast<double>(utime + stime) * per_tick_ms);
}

// --cpu-pids "redis:123,kafka:456,delayd:789": the processes whose CPU time a phase reports.
std::vector<std::pair<std::string, long>> cpu_pids(const Options& o) {
  std::vector<std::pair<std::string, long>> out;
  std::istringstream list(o.str("cpu-pids", ""));
  std::string item;
  while (std::getline(list, item, ',')) {
    const auto colon = item.find(':');
    long pid = 0;
    if (colon == std::string::npos ||
        std::from_chars(item.data() + colon + 1, item.data() + item.size(), pid).ec != std::errc() || pid <= 0) {
      throw UsageError("--cpu-pids: expected name:pid, got '" + item + "'");
    }
    out.emplace_back(item.substr(0, colon), pid);
  }
  out.emplace_back("load", static_cast<long>(::getpid()));
  out.emplace_back("idle", 0L);
  return out;
}

// CPU time of each of `pids` (cpu_pids()), read now; -1 for one that cannot be read.
std::vector<std::int64_t> cpu_now(const std::vector<std::pair<std::string, long>>& pids) {
  std::vector<std::int64_t> out;
  for (const auto& [name, pid] : pids) out.push_back(cpu_ms(pid).value_or(-1));
  return out;
}

// The figure "<phase>_cpu": what each process of `pids` spent over a phase of `n` jobs that took
// `seconds`, in ms and in µs a job, the idle time of all cores, and the cores' busy fraction.
// What bounds a phase that leaves cores idle is waiting, not the machine's CPU; one that leaves
// none is bound by the CPU that every process on the machine shares (Redis's limit, measured
// with Redis alone, is not).
Json cpu_figure(const std::string& phase, const std::vector<std::pair<std::string, long>>& pids,
                const std::vector<std::int64_t>& before, const std::vector<std::int64_t>& after, std::int64_t n,
                double seconds) {
  Json j{{"figure", phase + "_cpu"}, {"unit", "us/job"}, {"n", n}, {"seconds", seconds}};
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  double busy_us = 0;
  for (size_t i = 0; i < pids.size(); ++i) {
    const std::string& name = pids[i].first;
    if (before[i] < 0 || after[i] < 0) continue;
    const std::int64_t ms = after[i] - before[i];
    j[name + "_ms"] = ms;
    if (name == "idle") {
      j["cores"] = cores;
      j["busy_fraction"] = seconds > 0 ? 1.0 - static_cast<double>(ms) / (1000.0 * seconds * cores) : 0.0;
      continue;
    }
    const double us = n > 0 ? 1000.0 * static_cast<double>(ms) / static_cast<double>(n) : 0.0;
    j[name + "_us_per_job"] = us;
    busy_us += us;
  }
  j["value"] = busy_us;  // the named processes together, µs of CPU a job
  return j;
}

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

// Durable ingest and Redis bytes per job: n jobs, each due `due-ms` after its publish, sent as
// fast as possible. Ingest time runs from the first publish until delayd's group has committed
// the end of every ingest partition. Bytes per pending job: used_memory after that minus before,
// over n; bytes per finished job: the same once all n ready records are out and delayd's
// counters say ready (or a settle time passed).
int cmd_ingest(const Options& o) {
  const Phase ph(o);
  load_corpus(o.str("values", ""));
  const std::string ingest = o.required("ingest-topic"), ready = o.required("ready-topic"), group = o.required("group");
  const std::int64_t n = o.num("n", 200000), due_ms = o.num("due-ms", 60000);
  Producer producer(ph.bootstrap);
  create_topic(producer.handle(), ready);
  Redis redis(ph.redis_url);
  const std::int64_t mem0 = redis.used_memory();

  const CpuWindow cpu(o);
  const auto t0 = Clock::now();
  const std::int64_t first_due = epoch_ms() + due_ms;
  publish_all(producer, ingest, ph.tag, 0, n, [&](std::int64_t) { return epoch_ms() + due_ms; });
  producer.flush(milliseconds(300000));
  const double published_s = seconds_between(t0, Clock::now());
  const auto done = ingest_done(ph.bootstrap, producer, group, ingest, t0 + seconds(120) + milliseconds(n));
  // Read when ingest_done() returned: its last poll of the committed offsets is in it.
  const Json ingest_cpu = cpu.figure("ingest", n);
  const double ingest_s = seconds_between(t0, done);
  const std::int64_t mem1 = redis.used_memory();
  const std::int64_t margin_ms = first_due - epoch_ms();
  emit({{"figure", "ingest_jobs_per_s"},
        {"value", static_cast<double>(n) / ingest_s},
        {"unit", "jobs/s"},
        {"n", n},
        {"seconds", ingest_s},
        {"published_seconds", published_s},
        {"done_before_first_due_ms", margin_ms}});
  emit(ingest_cpu);
  if (margin_ms <= 0)
    note("ingest: jobs fell due before ingest was done; the pending-bytes figure mixes in fired jobs");
  emit({{"figure", "redis_bytes_per_pending_job"},
        {"value", static_cast<double>(mem1 - mem0) / static_cast<double>(n)},
        {"unit", "B"},
        {"n", n},
        {"used_memory_before", mem0},
        {"used_memory_after", mem1}});

  ReadyCollector collector(ph.bootstrap, ready, ph.tag, n);
  collector.finish(Clock::now() + milliseconds(std::max<std::int64_t>(margin_ms, 0)) + seconds(120) + milliseconds(n));
  // Marked ready in Redis shortly after the record is acknowledged: wait for the counters when they
  // can be found, and a settle time in any case.
  const std::string stats_match = o.str("stats-match", "");
  const bool counted =
      !stats_match.empty() && wait_counters(redis, stats_match, std::string(kBusiness) + "|ready", n, seconds(10));
  std::this_thread::sleep_for(milliseconds(o.num("settle-ms", counted ? 1000 : 3000)));
  const std::int64_t mem2 = redis.used_memory();
  emit({{"figure", "redis_bytes_per_finished_job"},
        {"value", static_cast<double>(mem2 - mem0) / static_cast<double>(n)},
        {"unit", "B"},
        {"n", n},
        {"used_memory_after", mem2},
        {"ready_counter_reached", counted}});
  return check("ingest", collector);
}

// Ready records per 100 ms bucket of their timestamps, from `origin`, next to the jobs due in each
// bucket; written as "t_ms ready due" for the burst plot.
void write_buckets(const std::filesystem::path& file, const std::vector<Delivery>& deliveries, std::int64_t origin) {
  constexpr std::int64_t kBucketMs = 100;
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> buckets;
  auto bucket = [&](std::int64_t t) { return (t - origin) >= 0 ? (t - origin) / kBucketMs : -1; };
  for (const auto& d : deliveries) {
    ++buckets[bucket(d.timestamp)].first;
    ++buckets[bucket(d.deliver_at)].second;
  }
  std::ofstream out(file);
  out << "# t_ms_from_first_due ready_records due_jobs (per " << kBucketMs << " ms)\n";
  if (buckets.empty()) return;
  for (std::int64_t b = buckets.begin()->first; b <= buckets.rbegin()->first; ++b) {
    const auto it = buckets.find(b);
    const auto counts = it == buckets.end() ? std::pair<std::int64_t, std::int64_t>{0, 0} : it->second;
    out << b * kBucketMs << ' ' << counts.first << ' ' << counts.second << '\n';
  }
}

// Fire capacity: n jobs due evenly over `spread-ms`, published `lead-ms` ahead so that ingest is
// done before the first is due. Fired jobs/s = n / (last ready timestamp - first deliver-at).
int cmd_burst(const Options& o) {
  const Phase ph(o);
  const std::string ingest = o.required("ingest-topic"), ready = o.required("ready-topic"), group = o.required("group");
  const std::int64_t n = o.num("n", 100000), spread_ms = o.num("spread-ms", 2000);
  const std::int64_t lead_ms = o.num("lead-ms", 5000 + n / 10);
  Producer producer(ph.bootstrap);
  create_topic(producer.handle(), ready);
  ReadyCollector collector(ph.bootstrap, ready, ph.tag, n);

  const auto t0 = Clock::now();
  const std::int64_t first_due = epoch_ms() + lead_ms;
  publish_all(producer, ingest, ph.tag, 0, n, [&](std::int64_t i) { return first_due + i * spread_ms / n; });
  producer.flush(milliseconds(300000));
  ingest_done(ph.bootstrap, producer, group, ingest, t0 + milliseconds(lead_ms) + seconds(120));
  const std::int64_t margin_ms = first_due - epoch_ms();
  if (margin_ms <= 0) note("burst: ingest was not done when the first job fell due; raise --lead-ms");
  // The fire's CPU: from just before the first claim (scheduler.claim_ahead_ms is 50 ms; the
  // ingest is done by then) until the last record is read. Sampling at the end of ingest would
  // count seconds of the servers' idle upkeep as well (Kafka's was 2.5 s of 15 s in one run).
  const std::int64_t sample_at = first_due - 200;
  if (const std::int64_t wait = sample_at - epoch_ms(); wait > 0) std::this_thread::sleep_for(milliseconds(wait));
  const CpuWindow cpu(o);
  collector.finish(Clock::now() + milliseconds(std::max<std::int64_t>(margin_ms, 0) + spread_ms) + seconds(120));
  emit(cpu.figure("fire", n));

  const auto& ds = collector.deliveries();
  std::int64_t last = first_due;
  for (const auto& d : ds) last = std::max(last, d.timestamp);
  const double span_s = static_cast<double>(std::max<std::int64_t>(last - first_due, 1)) / 1000.0;
  // The figure cannot exceed the rate the jobs fall due at: when delayd keeps up, it measures
  // the offered rate, not delayd (a shorter --spread-ms then finds the capacity).
  const double fired = static_cast<double>(ds.size()) / span_s;
  const double offered = static_cast<double>(n) * 1000.0 / static_cast<double>(std::max<std::int64_t>(spread_ms, 1));
  if (fired >= 0.95 * offered)
    note("burst: delayd kept up with the rate the jobs fell due at (" + std::to_string(std::lround(offered)) +
         " jobs/s); the figure is that rate, a lower bound of the capacity");
  emit({{"figure", "fire_jobs_per_s"},
        {"value", fired},
        {"unit", "jobs/s"},
        {"n", n},
        {"spread_ms", spread_ms},
        {"offered_jobs_per_s", offered},
        {"last_ready_after_first_due_ms", last - first_due},
        {"ingest_done_before_first_due_ms", margin_ms}});
  const auto late = lateness_of(ds);
  Json lateness = lateness_json(late);
  lateness["figure"] = "burst_lateness_ms";
  lateness["n"] = n;
  lateness["at_consumer"] = at_consumer_json(ds);
  emit(lateness);
  write_buckets(ph.data_dir / "burst-buckets.txt", ds, first_due);
  write_cdf(ph.data_dir / "lateness-burst.txt", late);
  return check("burst", collector);
}

// The generator kept a rate when it sent at least this share of it.
constexpr double kRateKept = 0.95;

// The figure of a whole-life rate of the sweep: "lateness_<rate>_per_s".
std::string rate_figure(std::int64_t rate) { return "lateness_" + std::to_string(rate) + "_per_s"; }

// The stem of a lateness figure's other names: the figure without a trailing "_per_s"
// ("lateness_1000" of "lateness_1000_per_s", "lateness_short_20ms" of itself). Its check is
// "<stem>_check" and its CDF "<stem, '_' as '-'>.txt" in the data directory (the figure's cdf_file).
std::string lateness_stem(std::string_view figure) {
  constexpr std::string_view per_s = "_per_s";
  if (figure.ends_with(per_s)) figure.remove_suffix(per_s.size());
  return std::string(figure);
}

// Sends one job "<tag>.warmup-0", due at once, and waits until it is on the ready topic; returns
// how long that took (ms). Afterwards the measured jobs meet a warm producer here and a delayd past
// its first fire (a fresh delayd sets up its ready topic then; the first job took about 2 s here).
std::int64_t warm_up(const Phase& ph, Producer& producer, const std::string& ingest, const std::string& ready) {
  const std::string tag = ph.tag + ".warmup";
  ReadyCollector collector(ph.bootstrap, ready, tag, 1);
  const auto t0 = Clock::now();
  producer.send(ingest, job_id(tag, 0), epoch_ms(), job_value());
  producer.flush(milliseconds(60000));
  if (!collector.finish(t0 + seconds(60))) throw std::runtime_error("the warm-up job was not ready within 60 s");
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
}

// Lateness under load, each job's whole life: after warm_up(), jobs published at `rate` per second
// for `seconds`, each due `delay-ms` after its own publish, while a reader takes every ready record
// (the warm-up job counts as foreign in the check). With a delay of a few seconds, ingest and fire
// both run at `rate` in the steady state. The figure is `figure` (default rate_figure(rate)); see
// lateness_stem() for the check and the data file.
int cmd_rate(const Options& o) {
  const Phase ph(o);
  const std::string ingest = o.required("ingest-topic"), ready = o.required("ready-topic");
  const std::int64_t rate = o.num("rate", 1000), secs = o.num("seconds", 20), delay_ms = o.required_num("delay-ms");
  const std::string figure = o.str("figure", rate_figure(rate));
  const std::string stem = lateness_stem(figure);
  const std::int64_t n = rate * secs;
  Producer producer(ph.bootstrap);
  create_topic(producer.handle(), ready);
  const std::int64_t warmup_ms = warm_up(ph, producer, ingest, ready);
  ReadyCollector collector(ph.bootstrap, ready, ph.tag, n);

  const CpuWindow cpu(o);
  const auto t0 = Clock::now();
  std::int64_t sent = 0;
  Clock::time_point last_send = t0;
  while (sent < n) {
    const double elapsed = seconds_between(t0, Clock::now());
    const auto target = std::min<std::int64_t>(n, static_cast<std::int64_t>(elapsed * static_cast<double>(rate)) + 1);
    for (; sent < target; ++sent) producer.send(ingest, job_id(ph.tag, sent), epoch_ms() + delay_ms, job_value());
    last_send = Clock::now();
    producer.poll(0);
    if (sent < n) std::this_thread::sleep_for(milliseconds(1));
  }
  producer.flush(milliseconds(300000));
  // The first job goes out at t0; job i is due to go at i / rate, so n jobs span (n - 1) / rate.
  const double span_s = seconds_between(t0, last_send);
  const double achieved = span_s > 0 ? static_cast<double>(n - 1) / span_s : static_cast<double>(n);
  collector.finish(Clock::now() + milliseconds(delay_ms) + seconds(60) + milliseconds(n / 5));
  // Every job's whole life (ingest and fire) falls in the window, from the first publish to the
  // last record read: "<stem>_cpu".
  const Json rate_cpu = cpu.figure(stem, n);

  const auto late = lateness_of(collector.deliveries());
  std::string cdf_file = stem + ".txt";
  std::replace(cdf_file.begin(), cdf_file.end(), '_', '-');
  Json lateness = lateness_json(late);
  lateness["figure"] = figure;
  lateness["cdf_file"] = cdf_file;
  lateness["target_rate"] = rate;
  lateness["achieved_rate"] = achieved;
  lateness["seconds"] = secs;
  lateness["delay_ms"] = delay_ms;
  lateness["warmup_ms"] = warmup_ms;
  lateness["at_consumer"] = at_consumer_json(collector.deliveries());
  emit(lateness);
  if (achieved < kRateKept * static_cast<double>(rate)) {
    note("rate " + std::to_string(rate) + ": the generator kept only " + std::to_string(static_cast<long>(achieved)) +
         "/s");
  }
  emit(rate_cpu);
  write_cdf(ph.data_dir / cdf_file, late);
  return check(stem, collector);
}

// Restart, first half: `far` jobs due in `far-ms`, then `overdue` jobs due at an instant T
// chosen from the measured ingest rate so that ingest is committed and delayd has time to stop
// (`margin-ms`) before T. Prints T as restart_setup.overdue_at_ms. Jobs are "<tag>.far-<i>" and
// "<tag>.due-<i>".
int cmd_restart_publish(const Options& o) {
  const Phase ph(o);
  const std::string ingest = o.required("ingest-topic"), ready = o.required("ready-topic"), group = o.required("group");
  const std::int64_t far = o.num("far", 900000), overdue = o.num("overdue", 100000);
  const std::int64_t far_ms = o.num("far-ms", 3600000), margin_ms = o.num("margin-ms", 10000);
  Producer producer(ph.bootstrap);
  create_topic(producer.handle(), ready);

  const auto t0 = Clock::now();
  publish_all(producer, ingest, ph.tag + ".far", 0, far, [&](std::int64_t) { return epoch_ms() + far_ms; });
  producer.flush(milliseconds(600000));
  const auto far_done = ingest_done(ph.bootstrap, producer, group, ingest, t0 + seconds(300) + milliseconds(far));
  const double rate = static_cast<double>(far) / std::max(seconds_between(t0, far_done), 0.001);

  const auto expected_ms = static_cast<std::int64_t>(1500.0 * static_cast<double>(overdue) / rate);
  const std::int64_t overdue_at = epoch_ms() + expected_ms + margin_ms;
  const auto t1 = Clock::now();
  publish_all(producer, ingest, ph.tag + ".due", 0, overdue, [&](std::int64_t) { return overdue_at; });
  producer.flush(milliseconds(600000));
  ingest_done(ph.bootstrap, producer, group, ingest, t1 + seconds(300) + milliseconds(overdue));
  const std::int64_t left_ms = overdue_at - epoch_ms();
  emit({{"figure", "restart_setup"},
        {"far", far},
        {"overdue", overdue},
        {"overdue_at_ms", overdue_at},
        {"ingest_jobs_per_s", rate},
        {"left_before_due_ms", left_ms}});
  if (left_ms < 1000) {
    throw std::runtime_error("ingest finished only " + std::to_string(left_ms) +
                             " ms before the overdue jobs fall due: raise --margin-ms");
  }
  return 0;
}

// The moment (epoch ms) of the first log line of `log` that says "assigned", waiting for it
// until `deadline`; delayd's lines start with an ISO 8601 time with milliseconds and offset.
std::optional<std::int64_t> assignment_time(const std::string& log, Clock::time_point deadline) {
  for (;;) {
    std::ifstream in(log);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find("assigned") == std::string::npos) continue;
      // "2026-11-22T10:00:00.123+00:00" (spdlog's %z) or "...123+0000"
      int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, ms = 0, oh = 0, om = 0, used = 0;
      char sign = '+';
      if (std::sscanf(line.c_str(), "%d-%d-%dT%d:%d:%d.%3d%c%n", &y, &mo, &d, &h, &mi, &s, &ms, &sign, &used) != 8 ||
          (sign != '+' && sign != '-')) {
        continue;
      }
      const char* zone = line.c_str() + used;
      if (std::sscanf(zone, "%2d:%2d", &oh, &om) != 2 && std::sscanf(zone, "%2d%2d", &oh, &om) != 2) continue;
      std::tm tm{};
      tm.tm_year = y - 1900;
      tm.tm_mon = mo - 1;
      tm.tm_mday = d;
      tm.tm_hour = h;
      tm.tm_min = mi;
      tm.tm_sec = s;
      const std::int64_t offset_s = (sign == '-' ? -1 : 1) * (oh * 3600 + om * 60);
      return (static_cast<std::int64_t>(timegm(&tm)) - offset_s) * 1000 + ms;
    }
    if (Clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(100));
  }
}

// Restart, second half (delayd was stopped before T and started again at `start-ms` after
// T + 2 s): times from the restarted consumer's partition assignment (its "assigned" log line;
// the start instant if there is none) to the first and the last of the overdue ready records.
int cmd_restart_measure(const Options& o) {
  const Phase ph(o);
  const std::string ready = o.required("ready-topic"), log = o.required("log");
  const std::int64_t overdue = o.num("overdue", 100000), start_ms = o.num("start-ms", 0);
  ReadyCollector collector(ph.bootstrap, ready, ph.tag + ".due", overdue);
  collector.finish(Clock::now() + seconds(120) + milliseconds(overdue));
  const auto assigned = assignment_time(log, Clock::now() + seconds(5));
  const std::int64_t origin = assigned.value_or(start_ms);
  const std::string from = assigned ? "assignment log line" : "start instant (no 'assigned' log line)";

  const auto& ds = collector.deliveries();
  std::int64_t first = INT64_MAX, last = INT64_MIN, before_restart = 0;
  for (const auto& d : ds) {
    first = std::min(first, d.timestamp);
    last = std::max(last, d.timestamp);
    if (d.timestamp < start_ms) ++before_restart;
  }
  if (ds.empty()) first = last = origin;
  emit({{"figure", "restart_first_ready_ms"},
        {"value", first - origin},
        {"unit", "ms"},
        {"from", from},
        {"start_to_assigned_ms", origin - start_ms},
        {"overdue", overdue}});
  emit({{"figure", "restart_last_ready_ms"},
        {"value", last - origin},
        {"unit", "ms"},
        {"from", from},
        {"overdue", overdue},
        {"fired_before_restart", before_restart}});
  const int status = check("restart", collector);
  if (before_restart > 0 || collector.foreign() > 0) {
    note("restart: " + std::to_string(before_restart) + " overdue jobs fired before the restart and " +
         std::to_string(collector.foreign()) + " far jobs fired at all");
    return kPipelineBroken;
  }
  return status;
}

// ---------------------------------------------------------------------------------------------
// Report

// The figures of a raw JSON-lines file by name (the last line of each name wins).
std::map<std::string, Json> read_figures(const std::string& path, std::vector<std::string>& order) {
  std::ifstream in(path);
  if (!in) throw UsageError("cannot read " + path);
  std::map<std::string, Json> figures;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    Json j = Json::parse(line);
    const std::string name = j.value("figure", "");
    if (name.empty()) continue;
    if (!figures.contains(name)) order.push_back(name);
    figures[name] = std::move(j);
  }
  return figures;
}

// A number with thousands separated by spaces, at most `decimals` decimals below 100.
std::string pretty(double v, int decimals = 1) {
  if (std::fabs(v) >= 100) {
    const auto digits = std::to_string(std::llabs(std::llround(v)));
    std::string out = v < 0 ? "-" : "";
    for (std::size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) out += ' ';
      out += digits[i];
    }
    return out;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// The rate of jobs that each go through two steps one after the other, the steps alone running
// at rates a and b: 1 / (1/a + 1/b). Nothing when either is missing or not positive.
std::optional<double> serial_rate(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *a <= 0 || *b <= 0) return std::nullopt;
  return 1.0 / (1.0 / *a + 1.0 / *b);
}

// A whole-life rate holds when its p99 lateness is at most this many ms, its check passed (none
// lost or early) and the generator kept the rate.
constexpr std::int64_t kWholeLifeP99BoundMs = 10;

// One rate of the whole-life sweep (bench/run-e2e.sh's RATES).
struct SweepPoint {
  std::int64_t offered = 0;
  double achieved = 0;
  std::int64_t p50 = 0, p99 = 0, p999 = 0, max = 0;
  bool ok = false;  // its check passed
  bool holds() const {
    return ok && p99 <= kWholeLifeP99BoundMs && achieved >= kRateKept * static_cast<double>(offered);
  }
};

// The sweep's rates among `figures` (the figures named rate_figure(their target_rate)), by
// offered rate.
std::vector<SweepPoint> sweep_points(const std::map<std::string, Json>& figures) {
  std::vector<SweepPoint> points;
  for (const auto& [name, j] : figures) {
    const auto offered = j.value("target_rate", std::int64_t{0});
    if (offered <= 0 || name != rate_figure(offered)) continue;
    const auto check = figures.find(lateness_stem(name) + "_check");
    points.push_back({offered, j.value("achieved_rate", 0.0), j.value("p50", std::int64_t{0}),
                      j.value("p99", std::int64_t{0}), j.value("p999", std::int64_t{0}),
                      j.value("max", std::int64_t{0}), check != figures.end() && check->second.value("ok", false)});
  }
  std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.offered < b.offered; });
  return points;
}

// The label of a run (its "run" figure's label, else its commit).
std::string run_label(const std::map<std::string, Json>& figures) {
  const auto run = figures.find("run");
  if (run == figures.end() || !run->second.is_object()) return "?";
  return run->second.value("label", run->second.value("commit", std::string("?")));
}

// Writes the sweep for the plots (bench/plot-whole-life.gp): the run's label and the p99 bound as
// comment lines, then one line per rate.
void write_sweep(const std::filesystem::path& file, const std::string& label, const std::vector<SweepPoint>& points) {
  std::ofstream out(file);
  out << "# label: " << label << "\n# p99_bound_ms: " << kWholeLifeP99BoundMs << '\n';
  out << "# offered_per_s achieved_per_s p50_ms p99_ms p999_ms max_ms check_ok\n";
  for (const auto& p : points) {
    out << p.offered << ' ' << p.achieved << ' ' << p.p50 << ' ' << p.p99 << ' ' << p.p999 << ' ' << p.max << ' '
        << (p.ok ? 1 : 0) << '\n';
  }
}

// The figure whole_life_max_rate: the highest offered rate of the sweep that holds (0 if none).
Json whole_life_figure(const std::vector<SweepPoint>& points) {
  std::int64_t best = 0;
  std::optional<std::int64_t> lowest_failing;
  Json rates = Json::array();
  for (const auto& p : points) {
    rates.push_back(p.offered);
    if (p.holds()) {
      best = p.offered;
    } else if (!lowest_failing) {
      lowest_failing = p.offered;
    }
  }
  return {{"figure", "whole_life_max_rate"},
          {"value", best},
          {"unit", "jobs/s"},
          {"p99_bound_ms", kWholeLifeP99BoundMs},
          {"rates", rates},
          {"lowest_failing_rate", lowest_failing ? Json(*lowest_failing) : Json(nullptr)}};
}

// Fills in "limit", "limit_by" and "fraction" (delayd's share of the machine's best: value/limit
// for rates, limit/value for costs) of delayd's figures from the machine-limit figures, adds the
// whole-life sweep's summary whole_life_max_rate (and writes the sweep to
// <data-dir>/whole-life.txt), writes every line to `out`, and prints the table.
int cmd_report(const Options& o) {
  std::vector<std::string> order;
  auto figures = read_figures(o.required("in"), order);
  auto value = [&](const std::string& name) -> std::optional<double> {
    const auto it = figures.find(name);
    if (it == figures.end() || !it->second.contains("value") || !it->second["value"].is_number()) return std::nullopt;
    return it->second["value"].get<double>();
  };
  // The smallest of the named limits that exist, and its name.
  auto lowest = [&](std::vector<std::pair<std::string, std::optional<double>>> limits) {
    std::optional<std::pair<std::string, double>> best;
    for (const auto& [name, v] : limits) {
      if (v && *v > 0 && (!best || *v < best->second)) best = {{name, *v}};
    }
    return best;
  };
  const auto fire_redis = serial_rate(value("redis_claim_jobs_per_s"), value("redis_finish_jobs_per_s"));
  const auto whole_life_redis = serial_rate(value("redis_accept_jobs_per_s"), fire_redis);
  const auto ingest_limit = lowest({{"redis_accept_jobs_per_s", value("redis_accept_jobs_per_s")},
                                    {"kafka_produce_per_s", value("kafka_produce_per_s")},
                                    {"kafka_consume_per_s", value("kafka_consume_per_s")}});
  const auto fire_limit =
      lowest({{"redis claim + finish", fire_redis}, {"kafka_produce_per_s", value("kafka_produce_per_s")}});

  // The whole-life sweep: its summary figure after the sweep's last, and its data for the plots.
  if (const auto points = sweep_points(figures); !points.empty()) {
    const std::string name = "whole_life_max_rate";
    if (!figures.contains(name)) {
      auto last = order.begin();
      for (const auto& p : points) {
        // The rate's lateness figure, and its CPU figure when the run has one.
        for (const auto& f : {rate_figure(p.offered), lateness_stem(rate_figure(p.offered)) + "_cpu"}) {
          if (const auto it = std::find(order.begin(), order.end(), f); it != order.end()) last = std::max(last, it);
        }
      }
      order.insert(last + 1, name);
    }
    figures[name] = whole_life_figure(points);
    const std::filesystem::path data_dir = o.str("data-dir", ".");
    std::filesystem::create_directories(data_dir);
    write_sweep(data_dir / "whole-life.txt", run_label(figures), points);
  }

  auto set_limit = [&](const std::string& name, std::optional<std::pair<std::string, double>> limit, bool cost) {
    const auto v = value(name);
    if (!v || !limit) return;
    auto& j = figures[name];
    j["limit"] = limit->second;
    j["limit_by"] = limit->first;
    j["fraction"] = cost ? (*v > 0 ? limit->second / *v : 0.0) : *v / limit->second;
  };
  auto named = [&](const std::string& name) -> std::optional<std::pair<std::string, double>> {
    if (const auto v = value(name)) return std::pair<std::string, double>{name, *v};
    return std::nullopt;
  };
  set_limit("ingest_jobs_per_s", ingest_limit, false);
  set_limit("fire_jobs_per_s", fire_limit, false);
  if (whole_life_redis) {
    set_limit("whole_life_max_rate", std::pair<std::string, double>{"redis accept + claim + finish", *whole_life_redis},
              false);
  }
  // The cores' ceiling of a phase: the rate at which the machine's cores would be busy all the
  // time if every job cost the CPU that the phase's "<phase>_cpu" figure measured (Redis, Kafka,
  // delayd and the load generator together: they share the cores, which the Redis-only limits
  // above do not see). No version of delayd can pass it on this machine without making the whole
  // chain cheaper per job, so it is shown beside the limit with its own fraction.
  auto cpu_ceiling = [&](const std::string& cpu_name) -> std::optional<double> {
    const auto it = figures.find(cpu_name);
    if (it == figures.end()) return std::nullopt;
    const double us = it->second.value("value", 0.0), cores = it->second.value("cores", 0.0);
    if (us <= 0 || cores <= 0) return std::nullopt;
    return cores * 1e6 / us;
  };
  auto set_ceiling = [&](const std::string& name, std::optional<double> ceiling) {
    if (!ceiling || !figures.contains(name)) return;
    auto& j = figures[name];
    j["cpu_ceiling"] = *ceiling;
    if (j.contains("limit")) j["cpu_ceiling_fraction"] = *ceiling / j["limit"].get<double>();
  };
  set_ceiling("ingest_jobs_per_s", cpu_ceiling("ingest_cpu"));
  set_ceiling("fire_jobs_per_s", cpu_ceiling("fire_cpu"));
  // Whole lives: the highest of the sweep's ceilings (a job costs less CPU at a higher rate).
  std::optional<double> whole_life_ceiling;
  for (const auto& p : sweep_points(figures)) {
    const auto c = cpu_ceiling(lateness_stem(rate_figure(p.offered)) + "_cpu");
    if (c && (!whole_life_ceiling || *c > *whole_life_ceiling)) whole_life_ceiling = c;
  }
  set_ceiling("whole_life_max_rate", whole_life_ceiling);
  set_limit("redis_bytes_per_pending_job", named("redis_lean_bytes_per_pending_job"), true);
  set_limit("redis_bytes_per_finished_job", named("redis_lean_bytes_per_finished_job"), true);
  if (figures.contains("restart_last_ready_ms") && fire_limit) {
    const double n = figures["restart_last_ready_ms"].value("overdue", 0.0);
    set_limit("restart_last_ready_ms",
              std::pair<std::string, double>{"overdue / fire limit", 1000.0 * n / fire_limit->second}, true);
  }

  std::ofstream out(o.required("out"));
  for (const auto& name : order) out << figures[name].dump() << '\n';

  // A peer's run (bench/run-bullmq.sh) is reported under its own name.
  const auto run = figures.find("run");
  const bool peer = run != figures.end() && run->second.is_object() && run->second.contains("peer");
  std::printf("%-30s %16s %16s %9s\n", "figure", peer ? run_label(figures).c_str() : "delayd", "machine limit",
              "fraction");
  std::vector<std::string> machine, checks, notes;
  for (const auto& name : order) {
    const auto& j = figures[name];
    if (j.value("machine", false)) {
      machine.push_back(name);
      continue;
    }
    if (name.ends_with("_check")) {
      checks.push_back(name);
      continue;
    }
    if (name.ends_with("_log") || name == "stack") {
      notes.push_back(name);
      continue;
    }
    if (!j.contains("value")) continue;
    const std::string unit = j.value("unit", "");
    const std::string shown = pretty(j["value"].get<double>()) + " " + unit;
    const std::string limit = j.contains("limit") ? pretty(j["limit"].get<double>()) + " " + unit : "-";
    const std::string fraction = j.contains("fraction") ? pretty(j["fraction"].get<double>(), 2) : "-";
    std::printf("%-30s %16s %16s %9s\n", name.c_str(), shown.c_str(), limit.c_str(), fraction.c_str());
    if (j.contains("cpu_ceiling")) {
      const std::string ceiling = pretty(j["cpu_ceiling"].get<double>()) + " " + unit;
      const std::string of_limit =
          j.contains("cpu_ceiling_fraction") ? pretty(j["cpu_ceiling_fraction"].get<double>(), 2) : "-";
      std::printf("%-30s %16s %16s %9s\n", "  the cores' ceiling", ceiling.c_str(), limit.c_str(), of_limit.c_str());
    }
    if (j.contains("at_consumer")) {
      // The same p99, by when the reader had the record instead of the record's timestamp.
      const std::string at = pretty(j["at_consumer"]["p99"].get<double>()) + " " + unit;
      std::printf("%-30s %16s %16s %9s\n", "  at the consumer", at.c_str(), "-", "-");
    }
  }
  std::printf("\nmachine limits\n");
  for (const auto& name : machine) {
    const auto& j = figures[name];
    std::printf("%-30s %16s\n", name.c_str(), (pretty(j["value"].get<double>()) + " " + j.value("unit", "")).c_str());
  }
  std::printf("\npipeline checks\n");
  bool ok = true;
  for (const auto& name : checks) {
    const auto& j = figures[name];
    ok = ok && j.value("ok", false);
    std::printf("%-30s %s: %lld delivered of %lld, %lld lost, %lld early, %lld duplicates\n", name.c_str(),
                j.value("ok", false) ? "ok" : "BROKEN", j.value("delivered", 0LL), j.value("expected", 0LL),
                j.value("lost", 0LL), j.value("early", 0LL), j.value("duplicates", 0LL));
  }
  std::printf("\nduring the run (the stack is shared; Redis forks to rewrite its AOF each time it doubles)\n");
  for (const auto& name : notes) {
    const auto& j = figures[name];
    if (name == "stack") {
      std::printf("%-30s %s\n", name.c_str(),
                  j.value("redis_restarted", false) ? "Redis was RESTARTED" : "Redis not restarted");
      continue;
    }
    const std::string forks = j.contains("redis_forks") ? std::to_string(j.value("redis_forks", 0)) : "?";
    std::printf("%-30s %s Redis forks (AOF rewrites), %d delayd warnings%s%s\n", name.c_str(), forks.c_str(),
                j.value("warnings", 0), j.value("warnings", 0) > 0 ? "; first: " : "",
                j.value("first_warning", std::string()).c_str());
  }
  return ok ? 0 : kPipelineBroken;
}

// The first figure whose name starts with `prefix` and ends with `suffix`, if any.
const Json* figure_named(const std::map<std::string, Json>& figures, const std::string& prefix,
                         const std::string& suffix = "") {
  for (auto it = figures.lower_bound(prefix); it != figures.end() && it->first.starts_with(prefix); ++it) {
    if (it->first.ends_with(suffix)) return &it->second;
  }
  return nullptr;
}

// Two runs side by side (bench/compare-e2e.sh): the main figures of each, the machine limit each
// run measured for them, and each run's fraction of its own limit.
int cmd_compare(const Options& o) {
  std::vector<std::string> order;
  const auto before = read_figures(o.required("before"), order);
  const auto after = read_figures(o.required("after"), order);
  // A peer measured through the same phases in the same hour (bench/run-bullmq.sh), if given.
  const std::string peer_file = o.str("peer", "");
  const auto peer = peer_file.empty() ? std::map<std::string, Json>{} : read_figures(peer_file, order);
  struct Row {
    std::string title, prefix, field;
  };
  const std::vector<Row> rows = {
      {"fire capacity, jobs/s", "fire_jobs_per_s", "value"},
      {"durable ingest, jobs/s", "ingest_jobs_per_s", "value"},
      {"whole lives at p99 <= " + std::to_string(kWholeLifeP99BoundMs) + " ms, jobs/s", "whole_life_max_rate", "value"},
      {"lateness at 10 000/s, p99 ms", rate_figure(10000), "p99"},
      {"lateness at 10 000/s, p99.9 ms", rate_figure(10000), "p999"},
      {"lateness at 10 000/s, max ms", rate_figure(10000), "max"},
      {"short delays, p99 ms", "lateness_short_", "p99"},
      {"Redis bytes per pending job", "redis_bytes_per_pending_job", "value"},
  };
  // The field of a run's figure, pretty, or "-".
  auto cell = [](const Json* j, const std::string& field, int decimals = 1) {
    return j && j->contains(field) && (*j)[field].is_number() ? pretty((*j)[field].get<double>(), decimals)
                                                              : std::string("-");
  };
  const std::string peer_name = peer.empty() ? "" : run_label(peer);
  // The peer's column, when there is one.
  auto peer_cell = [&](const std::string& text) {
    if (peer.empty()) return std::string();
    char buf[64];
    std::snprintf(buf, sizeof buf, " %14s", text.c_str());
    return std::string(buf);
  };
  std::printf("%-36s %12s %12s %14s %14s %15s %14s%s\n", "figure", "before", "after", "limit before", "limit after",
              "fraction before", "fraction after", peer_cell(peer_name).c_str());
  for (const auto& row : rows) {
    const Json* b = figure_named(before, row.prefix);
    const Json* a = figure_named(after, row.prefix);
    const bool whole = row.field == "value";  // limits and fractions belong to a figure's value
    std::printf("%-36s %12s %12s %14s %14s %15s %14s%s\n", row.title.c_str(), cell(b, row.field).c_str(),
                cell(a, row.field).c_str(), whole ? cell(b, "limit").c_str() : "-",
                whole ? cell(a, "limit").c_str() : "-", whole ? cell(b, "fraction", 2).c_str() : "-",
                whole ? cell(a, "fraction", 2).c_str() : "-",
                peer_cell(cell(figure_named(peer, row.prefix), row.field)).c_str());
  }
  if (!peer.empty()) {
    // The rates where more is better, as after over the peer's.
    for (const auto& [title, name] : {std::pair<std::string, std::string>{"fire capacity", "fire_jobs_per_s"},
                                      {"durable ingest", "ingest_jobs_per_s"}}) {
      const Json* a = figure_named(after, name);
      const Json* p = figure_named(peer, name);
      if (a && p && (*p)["value"].get<double>() > 0) {
        std::printf("\n%s: after / %s = %sx", title.c_str(), peer_name.c_str(),
                    pretty((*a)["value"].get<double>() / (*p)["value"].get<double>(), 1).c_str());
      }
    }
    std::printf("\n");
  }
  const Json* short_b = figure_named(before, "lateness_short_");
  std::printf("\nbefore: %s; after: %s", run_label(before).c_str(), run_label(after).c_str());
  if (short_b) std::printf("; short delays: due %lld ms after publish", short_b->value("delay_ms", 0LL));
  std::printf("\nfraction: the run's figure over the limit the same run measured (limit over figure for bytes)\n");
  return 0;
}

// The medians over bench/run-trace-cost.sh's rounds (--dir D --rounds N: D/round<k>/{off,on}/
// e2e.jsonl): each figure with tracing off and on, on over off, and every round's value. One run
// of each is noise on a shared two-core machine; the median of several alternated ones is the
// figure to quote. A row whose figure no run has (the smoke runs no rate) prints "-".
int cmd_medians(const Options& o) {
  const std::string dir = o.required("dir");
  const std::int64_t rounds = o.required_num("rounds");
  if (rounds < 1) throw UsageError("--rounds must be at least 1");
  struct Row {
    std::string title, prefix, suffix, field;
    int decimals;
  };
  const std::vector<Row> rows = {
      {"fire capacity, jobs/s", "fire_jobs_per_s", "", "value", 0},
      {"fire capacity, fraction of limit", "fire_jobs_per_s", "", "fraction", 2},
      {"durable ingest, jobs/s", "ingest_jobs_per_s", "", "value", 0},
      {"durable ingest, fraction of limit", "ingest_jobs_per_s", "", "fraction", 2},
      {"lateness at the rate, p50 ms", "lateness_", "_per_s", "p50", 0},
      {"lateness at the rate, p99 ms", "lateness_", "_per_s", "p99", 0},
      {"lateness at the rate, p99.9 ms", "lateness_", "_per_s", "p999", 0},
      {"lateness at the rate, max ms", "lateness_", "_per_s", "max", 0},
      {"short delays, p99 ms", "lateness_short_", "", "p99", 0},
  };
  std::map<std::string, std::vector<std::map<std::string, Json>>> runs;  // side -> one per round
  for (const std::string side : {"off", "on"}) {
    for (std::int64_t r = 1; r <= rounds; ++r) {
      std::vector<std::string> order;
      runs[side].push_back(read_figures(dir + "/round" + std::to_string(r) + "/" + side + "/e2e.jsonl", order));
    }
  }
  // The field of the row's figure in each run of `side` that has it.
  auto values = [&](const std::string& side, const Row& row) {
    std::vector<double> out;
    for (const auto& figures : runs[side]) {
      const Json* j = figure_named(figures, row.prefix, row.suffix);
      if (j && j->contains(row.field) && (*j)[row.field].is_number()) out.push_back((*j)[row.field].get<double>());
    }
    return out;
  };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  auto joined = [](const std::vector<double>& v, int decimals) {
    std::string out;
    for (double x : v) out += (out.empty() ? "" : ", ") + pretty(x, decimals);
    return out;
  };
  std::printf("%-36s %13s %12s %9s   %s\n", "figure", "off (median)", "on (median)", "on / off",
              "off, each round / on, each round");
  for (const auto& row : rows) {
    const auto off = values("off", row), on = values("on", row);
    if (off.empty() || on.empty()) {
      std::printf("%-36s %13s %12s %9s\n", row.title.c_str(), "-", "-", "-");
      continue;
    }
    const double m_off = median(off), m_on = median(on);
    const std::string ratio = m_off > 0 ? pretty(m_on / m_off, 2) : "-";
    std::printf("%-36s %13s %12s %9s   %s / %s\n", row.title.c_str(), pretty(m_off, row.decimals).c_str(),
                pretty(m_on, row.decimals).c_str(), ratio.c_str(), joined(off, row.decimals).c_str(),
                joined(on, row.decimals).c_str());
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Cleanup

// Deletes the topics whose names start with `prefix`.
void delete_topics(rd_kafka_t* rk, const std::string& prefix) {
  const rd_kafka_metadata_t* raw = nullptr;
  check_kafka(rd_kafka_metadata(rk, 1, nullptr, &raw, 10000), "metadata");
  MetadataPtr md(raw);
  std::vector<DeleteTopicPtr> owned;
  std::vector<rd_kafka_DeleteTopic_t*> topics;
  for (int i = 0; i < md->topic_cnt; ++i) {
    const std::string name = md->topics[i].topic;
    if (!name.starts_with(prefix)) continue;
    owned.emplace_back(rd_kafka_DeleteTopic_new(name.c_str()));
    topics.push_back(owned.back().get());
  }
  if (topics.empty()) return;
  QueuePtr queue(rd_kafka_queue_new(rk));
  rd_kafka_DeleteTopics(rk, topics.data(), topics.size(), nullptr, queue.get());
  await_admin(queue.get(), "delete topics " + prefix + "*");
  note("deleted " + std::to_string(topics.size()) + " topics " + prefix + "*");
}

// Deletes these consumer groups; a group that is not there is not an error.
void delete_groups(rd_kafka_t* rk, const std::vector<std::string>& names) {
  if (names.empty()) return;
  std::vector<DeleteGroupPtr> owned;
  std::vector<rd_kafka_DeleteGroup_t*> groups;
  for (const auto& name : names) {
    owned.emplace_back(rd_kafka_DeleteGroup_new(name.c_str()));
    groups.push_back(owned.back().get());
  }
  QueuePtr queue(rd_kafka_queue_new(rk));
  rd_kafka_DeleteGroups(rk, groups.data(), groups.size(), nullptr, queue.get());
  await_admin(queue.get(), "delete groups");
}

// Unlinks every key matching `pattern`; returns how many.
std::int64_t unlink_matching(Redis& redis, const std::string& pattern) {
  const auto keys = keys_matching(redis, pattern);
  std::int64_t removed = 0;
  for (std::size_t i = 0; i < keys.size(); i += 1000) {
    std::vector<std::string> unlink{"UNLINK"};
    unlink.insert(unlink.end(), keys.begin() + static_cast<std::ptrdiff_t>(i),
                  keys.begin() + static_cast<std::ptrdiff_t>(std::min(keys.size(), i + 1000)));
    removed += redis.command(unlink)->integer;
  }
  return removed;
}

// Runs one part of the cleanup; a failure is reported and the other parts still run.
template <class Fn>
bool try_part(const std::string& what, Fn fn) {
  try {
    fn();
    return true;
  } catch (const std::exception& e) {
    note("cleanup: " + what + ": " + e.what());
    return false;
  }
}

// Removes what a run left: its topics, its consumer groups and its Redis keys. Returns 1 if any
// part failed, after trying all of them.
int cmd_cleanup(const Options& o) {
  const Phase ph(o);
  KafkaPtr admin(new_client(RD_KAFKA_PRODUCER, make_conf({{"bootstrap.servers", ph.bootstrap}})));
  bool ok = true;
  if (const auto prefix = o.str("topic-prefix", ""); !prefix.empty()) {
    ok &= try_part("topics", [&] { delete_topics(admin.get(), prefix); });
  }
  auto groups = split_commas(o.str("groups", ""));
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());  // Kafka refuses repeats
  ok &= try_part("groups", [&] { delete_groups(admin.get(), groups); });
  ok &= try_part("redis", [&] {
    Redis redis(ph.redis_url);
    for (const auto& pattern : split_commas(o.str("redis-match", ""))) {
      note("unlinked " + std::to_string(unlink_matching(redis, pattern)) + " keys " + pattern);
    }
  });
  return ok ? 0 : 1;
}

// The subcommand named `name`.
int dispatch(const std::string& name, const Options& o) {
  if (name == "kafka-limit") return cmd_kafka_limit(o);
  if (name == "ingest") return cmd_ingest(o);
  if (name == "burst") return cmd_burst(o);
  if (name == "rate") return cmd_rate(o);
  if (name == "restart-publish") return cmd_restart_publish(o);
  if (name == "restart-measure") return cmd_restart_measure(o);
  if (name == "report") return cmd_report(o);
  if (name == "compare") return cmd_compare(o);
  if (name == "medians") return cmd_medians(o);
  if (name == "cleanup") return cmd_cleanup(o);
  throw UsageError("unknown subcommand " + name);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) throw UsageError("usage: e2e_load SUBCOMMAND [--name value]... (see the top of bench/e2e_load.cpp)");
    return dispatch(argv[1], Options(argc, argv));
  } catch (const UsageError& e) {
    std::cerr << "e2e_load: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "e2e_load " << argv[1] << ": " << e.what() << "\n";
    return 1;
  }
}
