#include "admin/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "admin/metric_catalog.hpp"
#include "delayd/build_info.hpp"

namespace delayd::admin {

namespace pm = prometheus;

namespace {

using Hist = broker::DurationHistogram;

// FireCounters total -> outcome label of delayd_delivery_attempts_total.
constexpr std::pair<std::uint64_t broker::FireCounters::*, std::string_view> kAttemptOutcomes[] = {
    {&broker::FireCounters::delivered, "delivered"},
    {&broker::FireCounters::retried, "retried"},
    {&broker::FireCounters::retried_outage, "retried_outage"},
    {&broker::FireCounters::failed, "failed"},
    {&broker::FireCounters::set_aside, "set_aside"},
    {&broker::FireCounters::dropped_stale, "dropped_stale"},
    {&broker::FireCounters::fenced, "fenced"},
    {&broker::FireCounters::redelivered, "redelivered"}};

// IngestCounters total -> status label of delayd_reports_total.
constexpr std::pair<std::uint64_t broker::IngestCounters::*, std::string_view> kReportOutcomes[] = {
    {&broker::IngestCounters::reports_running, "running"},
    {&broker::IngestCounters::reports_finished, "finished"},
    {&broker::IngestCounters::reports_failed, "failed"},
    {&broker::IngestCounters::reports_ignored, "ignored"},
    {&broker::IngestCounters::reports_unknown, "unknown"}};

// What the process metrics read from /proc; zeros where /proc cannot be read.
struct ProcessSample {
  double cpu_seconds = 0;
  double resident_bytes = 0;
  double virtual_bytes = 0;
  double start_time_seconds = 0;
  double open_fds = 0;
  double max_fds = 0;
  double threads = 0;
};

ProcessSample sample_process() {
  ProcessSample p;
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  if (paren != std::string::npos) {
    std::istringstream in(text.substr(paren + 1));
    std::vector<std::string> f;  // f[0] is field 3 (state) of proc(5)
    for (std::string t; in >> t;) f.push_back(t);
    if (f.size() > 21) {
      const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
      const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
      p.cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / tick;
      p.threads = std::stod(f[17]);
      p.virtual_bytes = std::stod(f[20]);
      p.resident_bytes = std::stod(f[21]) * page;
      std::ifstream sys("/proc/stat");
      for (std::string line; std::getline(sys, line);) {
        if (line.rfind("btime ", 0) == 0) p.start_time_seconds = std::stod(line.substr(6)) + std::stod(f[19]) / tick;
      }
    }
  }
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
    ++p.open_fds;
  }
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) p.max_fds = static_cast<double>(lim.rlim_cur);
  return p;
}

}  // namespace

struct Metrics::Impl {
  pm::Registry registry;

  // Each family is registered from its row of the metric table (admin/metric_catalog.cpp).
  static const MetricDef& def(Metric id, MetricType type) {
    const MetricDef& d = metric_def(id);
    if (d.type != type) throw std::logic_error("metric " + std::string(d.name) + " is registered with another type");
    return d;
  }
  pm::Family<pm::Counter>& counters(Metric id) {
    const MetricDef& d = def(id, MetricType::counter);
    return pm::BuildCounter().Name(std::string(d.name)).Help(std::string(d.help)).Register(registry);
  }
  pm::Family<pm::Gauge>& gauges(Metric id) {
    const MetricDef& d = def(id, MetricType::gauge);
    return pm::BuildGauge().Name(std::string(d.name)).Help(std::string(d.help)).Register(registry);
  }
  pm::Histogram& histogram(Metric id) {
    const MetricDef& d = def(id, MetricType::histogram);
    return pm::BuildHistogram()
        .Name(std::string(d.name))
        .Help(std::string(d.help))
        .Register(registry)
        .Add({}, pm::Histogram::BucketBoundaries(Hist::kBoundsSeconds.begin(), Hist::kBoundsSeconds.end()));
  }

  pm::Counter& accepted = counters(Metric::jobs_accepted).Add({});
  pm::Counter& delivered = counters(Metric::jobs_delivered).Add({});
  pm::Counter& cancelled = counters(Metric::jobs_cancelled).Add({});
  pm::Counter& failed = counters(Metric::jobs_failed).Add({});
  pm::Counter& duplicates = counters(Metric::jobs_duplicate).Add({});
  pm::Family<pm::Counter>& dead_lettered = counters(Metric::jobs_dead_lettered);
  pm::Counter& dead_letter_retries = counters(Metric::dead_letter_retries).Add({});
  pm::Counter& produced = counters(Metric::records_produced).Add({});
  pm::Family<pm::Counter>& attempts = counters(Metric::delivery_attempts);
  pm::Counter& rebalances = counters(Metric::rebalances).Add({});
  pm::Family<pm::Counter>& reports = counters(Metric::reports);
  pm::Counter& rescheduled = counters(Metric::jobs_rescheduled).Add({});
  pm::Counter& upserted = counters(Metric::jobs_upserted).Add({});
  pm::Counter& dropped = counters(Metric::jobs_dropped).Add({});
  pm::Counter& repeated = counters(Metric::jobs_repeated).Add({});
  pm::Counter& skipped = counters(Metric::occurrences_skipped).Add({});
  pm::Counter& recovered = counters(Metric::jobs_recovered).Add({});
  pm::Counter& txn_committed = counters(Metric::transactions).Add({{"outcome", "committed"}});
  pm::Counter& txn_aborted = counters(Metric::transactions).Add({{"outcome", "aborted"}});
  pm::Counter& txn_rebuilt = counters(Metric::transactions).Add({{"outcome", "rebuilt"}});
  pm::Counter& purged = counters(Metric::records_purged).Add({});
  pm::Counter& compressed = counters(Metric::payloads_compressed).Add({});
  pm::Counter& compressed_encoded = counters(Metric::payload_bytes).Add({{"form", "encoded"}});
  pm::Counter& compressed_stored = counters(Metric::payload_bytes).Add({{"form", "stored"}});
  pm::Counter& retaken = counters(Metric::shards_retaken).Add({});
  pm::Counter& group_leaves = counters(Metric::group_leaves).Add({});
  pm::Counter& spans_exported = counters(Metric::trace_spans_exported).Add({});
  pm::Counter& spans_queue_full = counters(Metric::trace_spans_dropped).Add({{"reason", "queue_full"}});
  pm::Counter& spans_export_failed = counters(Metric::trace_spans_dropped).Add({{"reason", "export_failed"}});
  pm::Family<pm::Gauge>& jobs = gauges(Metric::jobs);
  std::map<std::string, pm::Gauge*> jobs_by_label;
  pm::Family<pm::Gauge>& lag = gauges(Metric::ingest_lag_records);
  std::map<std::string, pm::Gauge*> lag_by_partition;
  pm::Histogram& lateness = histogram(Metric::lateness_seconds);
  pm::Histogram& redis_request = histogram(Metric::redis_request_seconds);
  pm::Histogram& kafka_produce = histogram(Metric::kafka_produce_seconds);
  pm::Histogram& txn_commit = histogram(Metric::transaction_commit_seconds);
  pm::Gauge& held = gauges(Metric::jobs_held).Add({});
  pm::Gauge& wheel_timers = gauges(Metric::wheel_timers).Add({});
  pm::Gauge& in_flight = gauges(Metric::jobs_in_flight).Add({});
  pm::Gauge& shards_owned = gauges(Metric::shards_owned).Add({});
  pm::Family<pm::Gauge>& partitions = gauges(Metric::partitions_owned);
  std::map<std::string, pm::Gauge*> partitions_by_topic;
  pm::Gauge& topics_missing = gauges(Metric::ready_topics_missing).Add({});
  pm::Gauge& dictionary = gauges(Metric::compression_dictionary).Add({});
  pm::Family<pm::Gauge>& next_due_family = gauges(Metric::next_due_seconds);
  pm::Gauge* next_due = nullptr;
  pm::Gauge& max_turn = gauges(Metric::loop_max_turn_seconds).Add({});
  pm::Family<pm::Gauge>& clock_offset_family = gauges(Metric::clock_offset_seconds);
  pm::Gauge* clock_offset = nullptr;
  pm::Family<pm::Gauge>& clock_synchronized_family = gauges(Metric::clock_synchronized);
  pm::Gauge* clock_synchronized = nullptr;
  pm::Family<pm::Gauge>& clock_max_error_family = gauges(Metric::clock_max_error_seconds);
  pm::Gauge* clock_max_error = nullptr;
  pm::Gauge& redis_may_drop = gauges(Metric::redis_may_drop_waiting_jobs).Add({});
  pm::Family<pm::Gauge>& outage = gauges(Metric::outage);
  pm::Family<pm::Gauge>& pending = gauges(Metric::jobs_pending);
  std::map<std::string, pm::Gauge*> pending_by_shard;
  pm::Family<pm::Counter>& http_closed = counters(Metric::admin_connections_closed);
  pm::Counter& http_accepted = counters(Metric::admin_connections_accepted).Add({});
  pm::Gauge& http_open = gauges(Metric::admin_connections_open).Add({});
  pm::Family<pm::Counter>& admin_actions = counters(Metric::admin_actions);
  HttpServerCounters http_last;

  pm::Gauge& ready = gauges(Metric::ready).Add({});
  // Always 1; its labels say which build answers (cmake/BuildInfo.cmake).
  pm::Gauge& build_info =
      gauges(Metric::build_info)
          .Add({{"version", build::kVersion}, {"revision", build::kRevision}, {"build_type", build::kBuildType}});

  pm::Counter& cpu = counters(Metric::process_cpu_seconds).Add({});
  pm::Gauge& resident = gauges(Metric::process_resident_memory_bytes).Add({});
  pm::Gauge& virtual_mem = gauges(Metric::process_virtual_memory_bytes).Add({});
  pm::Gauge& start_time = gauges(Metric::process_start_time_seconds).Add({});
  pm::Gauge& open_fds = gauges(Metric::process_open_fds).Add({});
  pm::Gauge& max_fds = gauges(Metric::process_max_fds).Add({});
  pm::Gauge& threads = gauges(Metric::process_threads).Add({});
  double cpu_last = 0;

  broker::LoopSnapshot last;  // what the metrics were last brought up to
  std::map<std::string, pm::Counter*> dead_by_reason;
  std::map<std::string, pm::Gauge*> outage_by_dependency;

  // The series of `family` with label `key`=`value`, added if new and fewer than
  // kMaxLabelValues series are known in `known`; nullptr beyond the cap.
  template <class T>
  static T* labelled(pm::Family<T>& family, std::map<std::string, T*>& known, const std::string& key,
                     const std::string& value) {
    if (const auto it = known.find(value); it != known.end()) return it->second;
    if (known.size() >= kMaxLabelValues) return nullptr;
    return known.emplace(value, &family.Add({{key, value}})).first->second;
  }

  // Moves `c` by what the ingest path's total `field` gained between `last` and `now`.
  void advance(pm::Counter& c, std::uint64_t broker::IngestCounters::*field, const broker::LoopSnapshot& now) const {
    advance_by(c, last.counters.ingest.*field, now.counters.ingest.*field);
  }
  // Moves `c` by what the fire path's total `field` gained between `last` and `now`.
  void advance(pm::Counter& c, std::uint64_t broker::FireCounters::*field, const broker::LoopSnapshot& now) const {
    advance_by(c, last.counters.fire.*field, now.counters.fire.*field);
  }
  static void advance_by(pm::Counter& c, std::uint64_t before, std::uint64_t after) {
    c.Increment(static_cast<double>(after >= before ? after - before : after));
  }
  static void advance(pm::Histogram& h, const Hist& before, const Hist& after) {
    const bool restarted = after.count < before.count;
    std::vector<double> increments(after.counts.size());
    for (std::size_t i = 0; i < increments.size(); ++i) {
      increments[i] = static_cast<double>(restarted ? after.counts[i] : after.counts[i] - before.counts[i]);
    }
    const double sum = restarted ? after.sum_seconds : after.sum_seconds - before.sum_seconds;
    if (restarted || after.count != before.count) h.ObserveMultiple(increments, sum);
  }
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) { impl_->build_info.Set(1); }
Metrics::~Metrics() = default;

void Metrics::update(const broker::LoopSnapshot& s) {
  Impl& m = *impl_;
  using broker::FireCounters;
  using broker::IngestCounters;
  m.advance(m.accepted, &IngestCounters::accepted, s);
  m.advance(m.delivered, &FireCounters::delivered, s);
  m.advance(m.cancelled, &IngestCounters::cancelled, s);
  m.advance(m.failed, &FireCounters::failed, s);
  m.advance(m.duplicates, &IngestCounters::duplicates, s);
  m.advance(m.dead_letter_retries, &IngestCounters::dead_letter_retries, s);
  m.advance(m.produced, &FireCounters::produced, s);
  for (const auto& [field, outcome] : kAttemptOutcomes) {
    m.advance(m.attempts.Add({{"outcome", std::string(outcome)}}), field, s);
  }
  for (const auto& [field, status] : kReportOutcomes) {
    m.advance(m.reports.Add({{"status", std::string(status)}}), field, s);
  }
  m.advance(m.rescheduled, &IngestCounters::rescheduled, s);
  m.advance(m.upserted, &IngestCounters::upserted, s);
  m.advance(m.dropped, &IngestCounters::dropped, s);
  m.advance(m.repeated, &FireCounters::repeated, s);
  m.advance(m.skipped, &FireCounters::skipped, s);
  m.advance(m.recovered, &FireCounters::recovered, s);
  Impl::advance_by(m.txn_committed, m.last.delivery.transactions_committed, s.delivery.transactions_committed);
  Impl::advance_by(m.txn_aborted, m.last.delivery.transactions_aborted, s.delivery.transactions_aborted);
  Impl::advance_by(m.txn_rebuilt, m.last.delivery.transactions_rebuilt, s.delivery.transactions_rebuilt);
  Impl::advance_by(m.purged, m.last.delivery.purged, s.delivery.purged);
  Impl::advance_by(m.compressed, m.last.compression.payloads, s.compression.payloads);
  Impl::advance_by(m.compressed_encoded, m.last.compression.encoded_bytes, s.compression.encoded_bytes);
  Impl::advance_by(m.compressed_stored, m.last.compression.stored_bytes, s.compression.stored_bytes);
  Impl::advance_by(m.retaken, m.last.delivery.retaken, s.delivery.retaken);
  Impl::advance_by(m.group_leaves, m.last.delivery.groups_left, s.delivery.groups_left);
  // Dead letters by reason, once any reason has counted; until then the ingest total as "any".
  const broker::DeadLetterCounts dead_before = m.last.counters.dead_lettered_by();
  const broker::DeadLetterCounts dead_now = s.counters.dead_lettered_by();
  bool by_reason = false;
  for (const broker::DeadLetterReason reason : broker::kDeadLetterReasons) {
    if (dead_now[reason] == 0) continue;
    by_reason = true;
    pm::Counter* c = m.labelled(m.dead_lettered, m.dead_by_reason, "reason", std::string(broker::to_string(reason)));
    if (c) Impl::advance_by(*c, dead_before[reason], dead_now[reason]);
  }
  if (!by_reason) m.advance(m.dead_lettered.Add({{"reason", "any"}}), &IngestCounters::dead_lettered, s);
  Impl::advance_by(m.rebalances, m.last.rebalances, s.rebalances);
  Impl::advance_by(m.spans_exported, m.last.traces.exported, s.traces.exported);
  Impl::advance_by(m.spans_queue_full, m.last.traces.dropped_full, s.traces.dropped_full);
  Impl::advance_by(m.spans_export_failed, m.last.traces.dropped_failed, s.traces.dropped_failed);
  Impl::advance(m.lateness, m.last.lateness, s.lateness);
  Impl::advance(m.redis_request, m.last.redis_request, s.redis_request);
  Impl::advance(m.kafka_produce, m.last.kafka_produce, s.kafka_produce);
  Impl::advance(m.txn_commit, m.last.delivery.commit, s.delivery.commit);

  m.held.Set(static_cast<double>(s.held));
  m.wheel_timers.Set(static_cast<double>(s.in_wheel));
  m.in_flight.Set(static_cast<double>(s.in_flight));
  m.shards_owned.Set(static_cast<double>(s.shards.size()));
  m.topics_missing.Set(static_cast<double>(s.missing_topics.size()));
  m.dictionary.Set(static_cast<double>(s.compression.dictionary));
  m.max_turn.Set(std::chrono::duration<double>(s.max_turn).count());
  m.redis_may_drop.Set(s.redis_settings_problem.empty() ? 0.0 : 1.0);
  if (s.clock_offset_s) {
    if (!m.clock_offset) m.clock_offset = &m.clock_offset_family.Add({});
    m.clock_offset->Set(*s.clock_offset_s);
  }
  if (s.clock_synchronized) {
    if (!m.clock_synchronized) m.clock_synchronized = &m.clock_synchronized_family.Add({});
    m.clock_synchronized->Set(*s.clock_synchronized ? 1.0 : 0.0);
  }
  if (s.clock_max_error_s) {
    if (!m.clock_max_error) m.clock_max_error = &m.clock_max_error_family.Add({});
    m.clock_max_error->Set(*s.clock_max_error_s);
  }
  if (s.next_due) {
    if (!m.next_due) m.next_due = &m.next_due_family.Add({});
    const auto now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    m.next_due->Set(static_cast<double>(*s.next_due - now_ms) / 1000.0);
  } else if (m.next_due) {
    m.next_due_family.Remove(m.next_due);
    m.next_due = nullptr;
  }
  for (auto it = m.lag_by_partition.begin(); it != m.lag_by_partition.end();) {
    if (s.ingest_lag.count(it->first)) {
      ++it;
    } else {  // no longer assigned here
      m.lag.Remove(it->second);
      it = m.lag_by_partition.erase(it);
    }
  }
  for (const auto& [partition, n] : s.ingest_lag) {
    if (pm::Gauge* g = m.labelled(m.lag, m.lag_by_partition, "partition", partition)) g->Set(static_cast<double>(n));
  }
  for (const auto& [dependency, on] : s.outages) {
    if (pm::Gauge* g = m.labelled(m.outage, m.outage_by_dependency, "dependency", dependency)) g->Set(on ? 1 : 0);
  }
  // Every topic read has a series (0 when none is assigned), so that an idle instance shows.
  for (const auto& [topic, n] : s.partitions) {
    if (pm::Gauge* g = m.labelled(m.partitions, m.partitions_by_topic, "topic", topic)) g->Set(static_cast<double>(n));
  }
  m.last = s;
}

void Metrics::set_pending(const std::map<std::string, std::int64_t>& by_shard) {
  Impl& m = *impl_;
  for (auto it = m.pending_by_shard.begin(); it != m.pending_by_shard.end();) {
    if (by_shard.count(it->first)) {
      ++it;
    } else {
      m.pending.Remove(it->second);
      it = m.pending_by_shard.erase(it);
    }
  }
  for (const auto& [shard, n] : by_shard) {
    auto it = m.pending_by_shard.find(shard);
    if (it == m.pending_by_shard.end()) {
      if (m.pending_by_shard.size() >= kMaxLabelValues) continue;
      it = m.pending_by_shard.emplace(shard, &m.pending.Add({{"shard", shard}})).first;
    }
    it->second->Set(static_cast<double>(n));
  }
}

void Metrics::set_job_counts(const std::map<std::string, std::map<std::string, std::int64_t>>& by_business_state) {
  Impl& m = *impl_;
  for (const auto& [business, states] : by_business_state) {
    for (const auto& [state, n] : states) {
      const std::string key = business + "|" + state;
      auto it = m.jobs_by_label.find(key);
      if (it == m.jobs_by_label.end()) {
        if (m.jobs_by_label.size() >= kMaxLabelValues) continue;
        it = m.jobs_by_label.emplace(key, &m.jobs.Add({{"business", business}, {"state", state}})).first;
      }
      it->second->Set(static_cast<double>(n));
    }
  }
}

void Metrics::count_admin_action(std::string_view action, std::string_view outcome) {
  impl_->admin_actions.Add({{"action", std::string(action)}, {"outcome", std::string(outcome)}}).Increment();
}

void Metrics::set_ready(bool ready) { impl_->ready.Set(ready ? 1 : 0); }

void Metrics::set_http(const HttpServerCounters& c, std::size_t open_connections) {
  Impl& m = *impl_;
  Impl::advance_by(m.http_accepted, m.http_last.accepted, c.accepted);
  Impl::advance_by(m.http_closed.Add({{"reason", "evicted"}}), m.http_last.evicted, c.evicted);
  Impl::advance_by(m.http_closed.Add({{"reason", "refused"}}), m.http_last.refused, c.refused);
  Impl::advance_by(m.http_closed.Add({{"reason", "timeout"}}), m.http_last.timed_out, c.timed_out);
  Impl::advance_by(m.http_closed.Add({{"reason", "too_large"}}), m.http_last.too_large, c.too_large);
  Impl::advance_by(m.http_closed.Add({{"reason", "bad_request"}}), m.http_last.bad, c.bad);
  m.http_open.Set(static_cast<double>(open_connections));
  m.http_last = c;
}

std::string Metrics::render() {
  Impl& m = *impl_;
  const ProcessSample p = sample_process();
  if (p.cpu_seconds > m.cpu_last) m.cpu.Increment(p.cpu_seconds - m.cpu_last);
  m.cpu_last = std::max(m.cpu_last, p.cpu_seconds);
  m.resident.Set(p.resident_bytes);
  m.virtual_mem.Set(p.virtual_bytes);
  m.start_time.Set(p.start_time_seconds);
  m.open_fds.Set(p.open_fds);
  m.max_fds.Set(p.max_fds);
  m.threads.Set(p.threads);
  return pm::TextSerializer().Serialize(m.registry.Collect());
}

}  // namespace delayd::admin
