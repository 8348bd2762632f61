// The reports of bench/e2e_load: a run's table and plot data, two runs compared, medians over
// rounds (main.cpp lists their options).
#include "commands.hpp"

namespace e2e {

namespace {

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
}  // namespace

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

}  // namespace e2e
