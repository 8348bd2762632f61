// The scale phases of bench/e2e_load (bench/run-scale.sh): a fill of many waiting jobs due over
// a long span, read along the way (the accept rate, Redis's memory, delayd's RSS), and a watch of
// the ready topic across a restart of delayd with that backlog waiting (main.cpp lists their
// options).
#include <cmath>

#include "commands.hpp"

namespace e2e {

namespace {

// A job's delay in the fill: spread over [0, span) in a scattered order (a multiplicative hash
// of the index), as real producers' due times arrive, not ascending. Postcondition: 0 <= result
// < span.
std::int64_t scattered_delay(std::int64_t index, std::int64_t span_ms) {
  const auto mixed = static_cast<std::uint64_t>(index) * 0x9E3779B97F4A7C15ull;
  return static_cast<std::int64_t>((mixed >> 11) % static_cast<std::uint64_t>(span_ms));
}

// delayd's resident set in KiB (VmRSS of /proc/PID/status), or -1 when it cannot be read.
std::int64_t rss_kib(long pid) {
  if (pid <= 0) return -1;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (!line.starts_with("VmRSS:")) continue;
    std::istringstream fields(line.substr(6));  // "VmRSS:     12345 kB"
    std::int64_t kib = -1;
    fields >> kib;
    return kib;
  }
  return -1;
}

// The sum of `group`'s committed offsets on `topic`, asked without joining the group.
class CommittedProbe {
 public:
  CommittedProbe(const std::string& bootstrap, const std::string& group, std::string topic, int partitions)
      : rk_(new_client(RD_KAFKA_CONSUMER, make_conf(consumer_settings(bootstrap, group)))),
        topic_(std::move(topic)),
        partitions_(partitions) {}

  // The committed total, or the last one read when Kafka did not answer within 5 s.
  std::int64_t total() {
    ListPtr list(rd_kafka_topic_partition_list_new(partitions_));
    for (int p = 0; p < partitions_; ++p) rd_kafka_topic_partition_list_add(list.get(), topic_.c_str(), p);
    if (rd_kafka_committed(rk_.get(), list.get(), 5000) != RD_KAFKA_RESP_ERR_NO_ERROR) return last_;
    std::int64_t sum = 0;
    for (int i = 0; i < list->cnt; ++i) sum += std::max<std::int64_t>(list->elems[i].offset, 0);
    last_ = sum;
    return sum;
  }

 private:
  ConsumerPtr rk_;
  std::string topic_;
  int partitions_;
  std::int64_t last_ = 0;
};

// One reading of the fill: seconds from its start, jobs published and accepted (committed by
// delayd's group), Redis's used_memory in bytes, delayd's RSS in KiB, and the CPU ms so far of
// Redis and delayd (-1: not given in --cpu-pids).
struct FillSample {
  double t_s = 0;
  std::int64_t published = 0, accepted = 0, used_memory = 0, rss_kib = -1, redis_cpu_ms = -1, delayd_cpu_ms = -1;
};

// The pid named `name` in --cpu-pids, or 0.
long pid_named(const std::vector<std::pair<std::string, long>>& pids, const std::string& name) {
  for (const auto& [n, pid] : pids)
    if (n == name) return pid;
  return 0;
}

// The seconds at which `accepted` first reached `count`, interpolated between samples; nullopt
// when it never did.
std::optional<double> time_reaching(const std::vector<FillSample>& samples, std::int64_t count) {
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].accepted < count) continue;
    if (i == 0) return samples[0].t_s;
    const auto& a = samples[i - 1];
    const auto& b = samples[i];
    const double share = static_cast<double>(count - a.accepted) /
                         static_cast<double>(std::max<std::int64_t>(b.accepted - a.accepted, 1));
    return a.t_s + share * (b.t_s - a.t_s);
  }
  return std::nullopt;
}

// Jobs a second over accepted counts [from, to), from the samples; nullopt when not reached.
std::optional<double> rate_between(const std::vector<FillSample>& samples, std::int64_t from, std::int64_t to) {
  const auto a = time_reaching(samples, from), b = time_reaching(samples, to);
  if (!a || !b || *b <= *a) return std::nullopt;
  return static_cast<double>(to - from) / (*b - *a);
}

// The lateness figure `name` of the deliveries `ds` (by the record's timestamp), with their count.
Json lateness_figure(const std::string& name, const std::vector<Delivery>& ds) {
  const auto late = lateness_of(ds);
  Json j = lateness_json(late);
  j["figure"] = name;
  j["count"] = static_cast<std::int64_t>(ds.size());
  return j;
}

}  // namespace

// Ten million waiting, say: n jobs of the corpus (or the 200-byte value), each due `lead-ms`
// plus a scattered delay under `span-ms` after its publish (so none is overdue when sent), published no more than
// `backlog` ahead of what delayd's group has committed (so that the generator's cost is spread over the whole fill and
// the rate of each million is delayd's, not the generator's). A reading every `sample-ms` goes to
// <data-dir>/fill-series.txt. Figures: fill_jobs_per_s (overall), fill_rate_along (the first and the last million's
// rate and their ratio; a tenth of n when n is under ten million), redis_bytes_per_pending_job, delayd_rss (at the end
// and the highest, KiB), fill_cpu, and the lateness of the jobs that fell due during the fill (fill_due_lateness_ms;
// none early).
int cmd_fill(const Options& o) {
  const Phase ph(o);
  load_corpus(o.str("values", ""));
  const std::string ingest = o.required("ingest-topic"), ready = o.required("ready-topic"), group = o.required("group");
  const std::int64_t n = o.required_num("n"), span_ms = o.num("span-ms", 86'400'000),
                     lead_ms = o.num("lead-ms", 10'000);
  const std::int64_t backlog = o.num("backlog", 200'000), sample_ms = o.num("sample-ms", 1000);
  const long rss_pid = static_cast<long>(o.num("rss-pid", 0));
  if (n < 10 || span_ms < 1 || backlog < 1000 || sample_ms < 10)
    throw UsageError("fill: --n >= 10, --span-ms >= 1, --backlog >= 1000, --sample-ms >= 10");
  Producer producer(ph.bootstrap);
  create_topic(producer.handle(), ready);
  const int partitions = partition_count(producer.handle(), ingest, Clock::now() + seconds(60));
  CommittedProbe committed(ph.bootstrap, group, ingest, partitions);
  const std::int64_t accepted0 = committed.total();
  ReadyCollector collector(ph.bootstrap, ready, ph.tag, n);
  Redis redis(ph.redis_url);
  const std::int64_t mem0 = redis.used_memory();

  std::vector<FillSample> samples;
  const CpuWindow cpu(o);
  const auto t0 = Clock::now();
  auto next_sample = t0;
  std::int64_t sent = 0, accepted = 0, rss_max = -1;
  const auto pids = cpu_pids(o);
  const long redis_pid = pid_named(pids, "redis"), delayd_pid = pid_named(pids, "delayd");
  auto cpu_of = [](long pid) { return pid > 0 ? cpu_ms(pid).value_or(-1) : -1; };
  auto take_sample = [&] {
    accepted = committed.total() - accepted0;
    FillSample s{seconds_between(t0, Clock::now()),
                 sent,
                 accepted,
                 redis.used_memory(),
                 rss_kib(rss_pid),
                 cpu_of(redis_pid),
                 cpu_of(delayd_pid)};
    rss_max = std::max(rss_max, s.rss_kib);
    samples.push_back(s);
    next_sample += milliseconds(sample_ms);
  };
  take_sample();
  const auto deadline = t0 + seconds(600) + milliseconds(n / 2);  // 2 000 jobs/s at least
  while (accepted < n) {
    if (Clock::now() > deadline)
      throw std::runtime_error("fill: delayd accepted only " + std::to_string(accepted) + " of " + std::to_string(n) +
                               " in time");
    const std::int64_t room = std::min(n, accepted + backlog) - sent;
    const std::int64_t chunk = std::min<std::int64_t>(room, 10'000);
    if (chunk > 0) {
      const std::int64_t now = epoch_ms();
      publish_all(producer, ingest, ph.tag, sent, sent + chunk,
                  [&](std::int64_t i) { return now + lead_ms + scattered_delay(i, span_ms); });
      sent += chunk;
    }
    producer.poll(0);
    if (Clock::now() >= next_sample) {
      take_sample();
      if (samples.size() % 10 == 0)
        note("fill: " + std::to_string(accepted) + " of " + std::to_string(n) + " accepted");
    } else if (chunk <= 0) {
      std::this_thread::sleep_for(milliseconds(20));
      accepted = committed.total() - accepted0;
    }
  }
  producer.flush(milliseconds(300'000));
  take_sample();
  const double fill_s = samples.back().t_s;
  const Json fill_cpu = cpu.figure("fill", n);
  collector.finish(Clock::now());  // stops reading: the rest are due later

  std::ofstream series(ph.data_dir / "fill-series.txt");
  series << "# t_s published accepted redis_used_memory_bytes delayd_rss_kib redis_cpu_ms delayd_cpu_ms\n";
  for (const auto& s : samples) {
    series << s.t_s << ' ' << s.published << ' ' << s.accepted << ' ' << s.used_memory << ' ' << s.rss_kib << ' '
           << s.redis_cpu_ms << ' ' << s.delayd_cpu_ms << '\n';
  }

  const std::int64_t part = std::min<std::int64_t>(1'000'000, n / 10);
  const auto first = rate_between(samples, 0, part), last = rate_between(samples, n - part, n);
  emit({{"figure", "fill_jobs_per_s"},
        {"value", static_cast<double>(n) / fill_s},
        {"unit", "jobs/s"},
        {"n", n},
        {"seconds", fill_s},
        {"span_ms", span_ms}});
  emit({{"figure", "fill_rate_along"},
        {"value", first && last ? Json(*last / *first) : Json(nullptr)},
        {"unit", "last / first"},
        {"part", part},
        {"first_jobs_per_s", first ? Json(*first) : Json(nullptr)},
        {"last_jobs_per_s", last ? Json(*last) : Json(nullptr)}});
  const std::int64_t fired = collector.seen();
  const std::int64_t pending = n - fired;
  emit({{"figure", "redis_bytes_per_pending_job"},
        {"value", static_cast<double>(samples.back().used_memory - mem0) /
                      static_cast<double>(std::max<std::int64_t>(pending, 1))},
        {"unit", "B"},
        {"n", pending},
        {"used_memory_before", mem0},
        {"used_memory_after", samples.back().used_memory}});
  emit({{"figure", "delayd_rss"},
        {"value", samples.back().rss_kib},
        {"unit", "KiB"},
        {"max_kib", rss_max},
        {"waiting", pending}});
  emit(fill_cpu);
  Json due = lateness_figure("fill_due_lateness_ms", collector.deliveries());
  due["early"] = collector.early();
  due["duplicates"] = collector.duplicates();
  due["out_of_order"] = collector.out_of_order();
  emit(due);
  if (collector.early() > 0) {
    note("fill: " + std::to_string(collector.early()) + " jobs fired early");
    return kPipelineBroken;
  }
  return 0;
}

// The ready topic across a restart: reads it from its start for `seconds`, then of the jobs of
// `tag` (indexes below n) reports the first record written at or after `start-ms` (epoch ms: when
// delayd was started again), the first on time (lateness at most `on-time-ms`, 10) among the jobs
// due after the start, the lateness of the jobs due after the start and of those overdue at it,
// and every job's early and duplicate counts since the fill.
int cmd_watch(const Options& o) {
  const Phase ph(o);
  const std::string ready = o.required("ready-topic");
  const std::int64_t n = o.required_num("n"), start_ms = o.required_num("start-ms");
  const std::int64_t secs = o.num("seconds", 30), on_time_ms = o.num("on-time-ms", 10);
  ReadyCollector collector(ph.bootstrap, ready, ph.tag, n);
  collector.finish(Clock::now() + seconds(secs));
  std::vector<Delivery> after, overdue;
  std::optional<std::int64_t> first_fire, first_on_time;
  for (const auto& d : collector.deliveries()) {
    if (d.timestamp >= start_ms) first_fire = std::min(first_fire.value_or(d.timestamp), d.timestamp);
    if (d.deliver_at >= start_ms) {
      after.push_back(d);
      if (d.timestamp - d.deliver_at <= on_time_ms)
        first_on_time = std::min(first_on_time.value_or(d.timestamp), d.timestamp);
    } else if (d.timestamp >= start_ms) {
      overdue.push_back(d);
    }
  }
  auto since_start = [&](const std::optional<std::int64_t>& t) { return t ? Json(*t - start_ms) : Json(nullptr); };
  emit({{"figure", "restart_first_fire_ms"}, {"value", since_start(first_fire)}, {"unit", "ms after start"}});
  emit({{"figure", "restart_first_on_time_fire_ms"},
        {"value", since_start(first_on_time)},
        {"unit", "ms after start"},
        {"on_time_ms", on_time_ms}});
  emit(lateness_figure("restart_due_after_lateness_ms", after));
  emit(lateness_figure("restart_overdue_lateness_ms", overdue));
  emit({{"figure", "watch_check"},
        {"delivered", collector.seen()},
        {"duplicates", collector.duplicates()},
        {"early", collector.early()},
        {"out_of_order", collector.out_of_order()},
        {"ok", collector.early() == 0}});
  return collector.early() == 0 ? 0 : kPipelineBroken;
}

}  // namespace e2e
