// The shared parts of bench/e2e_load: the definitions of support.hpp's functions.
#include "support.hpp"

namespace e2e {

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
// be), batched for throughput: linger.ms 5 (librdkafka's default) unless a phase asks for
// another (`rate --producer-linger-ms`).
Settings producer_settings(const std::string& bootstrap, int linger_ms) {
  return {{"bootstrap.servers", bootstrap}, {"acks", "all"},
          {"enable.idempotence", "true"},   {"linger.ms", std::to_string(linger_ms)},
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

// Nearest-rank percentile p (0..100) of sorted samples.
std::int64_t percentile(const std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

// Lateness in ms of each delivery, sorted: by the record's timestamp (`&Delivery::timestamp`,
// the default) or by when the reader had it (`&Delivery::received`), minus its deliver-at.
std::vector<std::int64_t> lateness_of(const std::vector<Delivery>& deliveries, std::int64_t Delivery::*at) {
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

std::int64_t warm_up(const std::string& bootstrap, const std::string& tag, Producer& producer,
                     const std::string& ingest, const std::string& ready) {
  const std::string warm_tag = tag + ".warmup";
  ReadyCollector collector(bootstrap, ready, warm_tag, 1);
  const auto t0 = Clock::now();
  producer.send(ingest, job_id(warm_tag, 0), epoch_ms(), job_value());
  producer.flush(milliseconds(60000));
  if (!collector.finish(t0 + seconds(60))) throw std::runtime_error("the warm-up job was not ready within 60 s");
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
}

void read_until(rd_kafka_t* rk, const std::atomic<bool>& stop, std::string_view who,
                const std::function<void(const rd_kafka_message_t*)>& take, const std::function<void()>& between) {
  while (!stop.load()) {
    MessagePtr m(rd_kafka_consumer_poll(rk, 100));
    if (between) between();
    if (!m) continue;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) note(std::string(who) + ": " + rd_kafka_message_errstr(m.get()));
      continue;
    }
    take(m.get());
  }
}

ReadyRecord read_ready(const rd_kafka_message_t* m, std::string_view tag) {
  const auto due_text = header(m, "deliver-at");
  const auto due = due_text ? parse_int(*due_text) : std::nullopt;
  if (!due) throw std::runtime_error("a ready record without a numeric deliver-at header");
  ReadyRecord r{*due, std::nullopt};
  const auto id = header(m, "job-id");
  if (id && id->size() > tag.size() + 1 && id->starts_with(tag) && (*id)[tag.size()] == '-') {
    r.index = parse_int(id->substr(tag.size() + 1));
  }
  return r;
}

void write_per_minute(const std::filesystem::path& file, const std::vector<Delivery>& deliveries) {
  if (deliveries.empty()) return;
  std::int64_t origin = deliveries.front().deliver_at;
  for (const auto& d : deliveries) origin = std::min(origin, d.deliver_at);
  std::map<std::int64_t, std::vector<std::int64_t>> minutes;
  for (const auto& d : deliveries) minutes[(d.deliver_at - origin) / 60'000].push_back(d.timestamp - d.deliver_at);
  std::ofstream out(file);
  out << "# minute jobs p50_ms p99_ms max_ms (lateness by the record's timestamp, jobs by their due minute)\n";
  for (auto& [minute, late] : minutes) {
    std::sort(late.begin(), late.end());
    out << minute << ' ' << late.size() << ' ' << percentile(late, 50) << ' ' << percentile(late, 99) << ' '
        << late.back() << '\n';
  }
}

void emit_whole_life(const Phase& ph, const WholeLifeRun& run, const std::vector<Delivery>& deliveries,
                     const Json& cpu) {
  const auto late = lateness_of(deliveries);
  std::string cdf_file = lateness_stem(run.figure) + ".txt";
  std::replace(cdf_file.begin(), cdf_file.end(), '_', '-');
  Json lateness = lateness_json(late);
  lateness["figure"] = run.figure;
  lateness["cdf_file"] = cdf_file;
  lateness["target_rate"] = run.rate;
  lateness["achieved_rate"] = run.achieved;
  lateness["seconds"] = run.seconds;
  lateness["delay_ms"] = run.delay_ms;
  lateness["warmup_ms"] = run.warmup_ms;
  lateness["at_consumer"] = at_consumer_json(deliveries);
  emit(lateness);
  if (run.achieved < kRateKept * static_cast<double>(run.rate)) {
    note("rate " + std::to_string(run.rate) + ": the generator kept only " +
         std::to_string(static_cast<long>(run.achieved)) + "/s");
  }
  emit(cpu);
  write_cdf(ph.data_dir / cdf_file, late);
  if (run.seconds >= 120)
    write_per_minute(ph.data_dir / (cdf_file.substr(0, cdf_file.size() - 4) + "-per-minute.txt"), deliveries);
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

}  // namespace e2e
