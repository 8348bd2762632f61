// The load phases of bench/e2e_load against a running delayd: the Kafka limit, durable ingest,
// the burst (fire capacity), the whole-life rate and the restart (main.cpp lists their options).
#include "base/log_time.hpp"
#include "commands.hpp"

namespace e2e {

namespace {

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

// The moment (epoch ms) of the first log line of `log` that says "assigned", waiting for it
// until `deadline` (base/log_time.hpp reads the time each line starts with).
std::optional<std::int64_t> assignment_time(const std::string& log, Clock::time_point deadline) {
  for (;;) {
    std::ifstream in(log);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find("assigned") == std::string::npos) continue;
      if (const auto at = delayd::base::log_line_time_ms(line)) return at;
    }
    if (Clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(100));
  }
}

}  // namespace

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
  lateness["out_of_order"] = collector.out_of_order();
  lateness["at_consumer"] = at_consumer_json(ds);
  emit(lateness);
  write_buckets(ph.data_dir / "burst-buckets.txt", ds, first_due);
  write_cdf(ph.data_dir / "lateness-burst.txt", late);
  return check("burst", collector);
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
  Producer producer(ph.bootstrap, static_cast<int>(o.num("producer-linger-ms", 5)));
  create_topic(producer.handle(), ready);
  const std::int64_t warmup_ms = warm_up(ph.bootstrap, ph.tag, producer, ingest, ready);
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

  emit_whole_life(ph, {figure, rate, secs, delay_ms, warmup_ms, achieved}, collector.deliveries(), rate_cpu);
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

}  // namespace e2e
