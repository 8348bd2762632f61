// delayctl: the command-line companion of delayd. It talks to the same Kafka and Redis, with
// the same configuration (file, DELAYD_* variables, flags), and prints JSON.
//
//   delayctl send --business B (--deliver-at T | --delay-ms N) [--key K] [--job-id ID]
//                 [--header name=value]... [--value V]      publish a delayed message
//   delayctl get ID                                          the job as JSON (exit 1: no such job)
//   delayctl cancel ID [--timeout-ms N]                      publish a cancel, wait for the outcome
//   delayctl reschedule ID (--deliver-at T | --delay-ms N)   publish a reschedule, wait for the outcome
//   delayctl report ID running|finished|failed [--error E] [--retry-after-ms N]
//                                                            publish a consumer's report
//   delayctl stats                                           pending count, next due, counters
//   delayctl jobs [--state S] [--business B] [--due-from T] [--due-to T] [--id-prefix P]
//                 [--error E] [--limit N] [--cursor C] [--all]
//                                                            a page of jobs as GET /jobs gives it;
//                                                            --all: every job, one JSON per line
//   delayctl bulk --action cancel|run-now|retry [filter as for jobs] (--dry-run | --run) [--rate N]
//                                                            a dry run's count, or a bulk operation
//                                                            run here (progress on a terminal)
//   delayctl dlq list [--reason R] [--business B] [--since T] [--until T] [--limit N] [--cursor C] [--all]
//                                                            a page of the dead-letter topic as
//                                                            GET /dead-letters gives it;
//                                                            --all: every dead letter, one JSON per line
//   delayctl dlq redrive [filter as for dlq list] (--dry-run | --run) [--rate N]
//                                                            a dry run's count, or a redrive
//                                                            operation run here (as bulk)
//   delayctl scripts [--prune]                               delayd's function libraries in Redis;
//                                                            --prune: delete those of other builds
//   delayctl --version                                       version, commit and build type
//
// Exit status: 0 done; 1 the request was answered "no" (no such job, already delivered, ...);
// 2 bad usage or configuration; 3 the cancel or reschedule was published but delayd did not act
// on it in time; 4 Kafka or Redis could not be reached.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "admin/cancel_flow.hpp"
#include "admin/cron_query.hpp"
#include "admin/dead_letter_query.hpp"
#include "admin/dead_letter_topic.hpp"
#include "admin/job_json.hpp"
#include "admin/job_query.hpp"
#include "admin/operation_runner.hpp"
#include "broker/ownership.hpp"
#include "broker/wall_clock.hpp"
#include "config/config.hpp"
#include "config/redis_options.hpp"
#include "connectors/kafka_producer.hpp"
#include "connectors/topic_reader.hpp"
#include "contract/ingest_parse.hpp"
#include "contract/time_format.hpp"
#include "delayd/build_info.hpp"
#include "storage/job_browse.hpp"
#include "storage/job_store.hpp"
#include "storage/operation_store.hpp"
#include "storage/script_libraries.hpp"

namespace {

using delayd::config::Config;
using nlohmann::json;

struct SendArgs {
  std::string business;
  std::optional<std::string> deliver_at;
  std::optional<std::int64_t> delay_ms;
  std::optional<std::string> key;
  std::optional<std::string> job_id;
  std::optional<std::string> value;
  std::vector<std::string> headers;
};

// Publishes one record to the ingest topic and waits for Kafka's acknowledgement.
delayd::connectors::DeliveryReport publish(const Config& config, delayd::connectors::OutRecord rec) {
  std::optional<delayd::connectors::DeliveryReport> report;
  delayd::connectors::KafkaProducer producer(
      delayd::config::kafka_properties(config, delayd::config::KafkaClient::producer),
      [&](const delayd::connectors::DeliveryReport& r) { report = r; });
  producer.produce(rec);
  producer.flush(static_cast<int>(config.kafka.message_timeout_ms) + 5000);
  if (!report) throw delayd::connectors::KafkaError("no delivery report for the record");
  if (!report->ok) throw delayd::connectors::KafkaError(report->error);
  return *report;
}

int cmd_send(const Config& config, const SendArgs& a) {
  using namespace delayd::contract;
  using namespace delayd::admin;
  delayd::connectors::OutRecord rec;
  rec.topic = config.kafka.ingest_topic;
  rec.key = a.key;
  rec.value = a.value.value_or("");
  if (a.deliver_at.has_value() == a.delay_ms.has_value()) {
    std::cerr << "delayctl send: give exactly one of --deliver-at and --delay-ms\n";
    return 2;
  }
  if (a.deliver_at) {
    if (!parse_timestamp_ms(*a.deliver_at)) {
      std::cerr << "delayctl send: --deliver-at '" << *a.deliver_at
                << "' is neither epoch milliseconds nor an RFC 3339 timestamp\n";
      return 2;
    }
    rec.headers.push_back({std::string(kHeaderDeliverAt), *a.deliver_at});
  } else {
    rec.headers.push_back({std::string(kHeaderDelayMs), std::to_string(*a.delay_ms)});
  }
  rec.headers.push_back({std::string(kHeaderBusiness), a.business});
  if (a.job_id) rec.headers.push_back({std::string(kHeaderJobId), *a.job_id});
  for (const auto& h : a.headers) {
    const auto eq = h.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "delayctl send: --header '" << h << "' is not name=value\n";
      return 2;
    }
    rec.headers.push_back({h.substr(0, eq), h.substr(eq + 1)});
  }
  const auto report = publish(config, rec);
  delayd::connectors::Record as_read;
  as_read.topic = report.topic;
  as_read.partition = report.partition;
  as_read.offset = report.offset;
  as_read.timestamp_ms = report.timestamp_ms;  // the derived id includes the record's timestamp
  json out{{"job_id", a.job_id ? *a.job_id : derived_job_id(as_read)},
           {"topic", report.topic},
           {"partition", report.partition},
           {"offset", report.offset}};
  std::cout << to_text(out) << "\n";
  return 0;
}

int cmd_get(delayd::storage::JobStore& store, const std::string& id) {
  auto fields = store.get(id);
  if (!fields) {
    std::cerr << "delayctl get: no job " << id << "\n";
    return 1;
  }
  std::cout << delayd::admin::to_text(delayd::admin::job_to_json(id, *fields)) << "\n";
  return 0;
}

// A request's parameters (GET /jobs's, GET /dead-letters's, a filter), from the flags given: the
// library reads and checks them as it does the HTTP request's (admin/job_query.hpp,
// admin/dead_letter_query.hpp).
using Params = std::map<std::string, std::string, std::less<>>;

// A flag --<name> (underscores as dashes) for each parameter, that sets it in `params`.
void add_param_flags(CLI::App* cmd, Params& params, std::initializer_list<const char*> names, const std::string& help) {
  for (const char* name : names) {
    std::string flag = std::string("--") + name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    cmd->add_option_function<std::string>(
        flag, [&params, name](const std::string& v) { params[name] = v; }, help + name);
  }
}

// The flag that set a field a request refused: "filter.due_from" is --due-from, rate_per_s --rate.
std::string flag_of(const std::string& field) {
  std::string flag = field.starts_with("filter.") ? field.substr(7) : field;
  if (flag == "rate_per_s") return "rate";
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

// How a bulk operation or a redrive is asked for.
struct RunArgs {
  bool dry_run = false;
  bool run = false;
  std::optional<std::int64_t> rate;
};

void add_run_flags(CLI::App* cmd, RunArgs& args, const std::string& what) {
  cmd->add_flag("--dry-run", args.dry_run, "count the " + what + " it would act on, change nothing");
  cmd->add_flag("--run", args.run, "act on them, as an operation (resumable)");
  cmd->add_option("--rate", args.rate,
                  what + " per second at most (default " + std::to_string(delayd::admin::kDefaultRate) + ")");
}

// Runs operation `id` on a runner of delayctl's own until it ends (if delayctl dies, an instance
// with the admin endpoint on takes it over: admin/operation_runner.hpp), with a progress bar on a
// terminal (`expected`: about how many items it has); then prints it as GET /operations/{id}
// does. The exit status: 0 done, 1 it ended otherwise.
int run_operation(const Config& config, delayd::storage::OperationStore& ops, const std::string& id,
                  std::int64_t expected) {
  using namespace delayd::admin;
  OperationRunner runner(config, delayd::broker::Ownership::member_name(), {}, id);
  runner.wake();
  const bool tty = ::isatty(2) == 1;
  std::map<std::string, std::string> fields;
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    fields = ops.load(id).value_or(std::map<std::string, std::string>{});
    const std::int64_t done = fields.count("matched") ? std::stoll(fields["matched"]) : 0;
    if (tty) {
      const std::int64_t total = std::max<std::int64_t>(expected, done);
      const int width = 40, filled = total > 0 ? static_cast<int>(done * width / total) : width;
      std::cerr << "\r[" << std::string(static_cast<std::size_t>(filled), '#')
                << std::string(static_cast<std::size_t>(width - filled), ' ') << "] " << done << "/" << total
                << std::flush;
    }
    const std::string status = fields.count("status") ? fields["status"] : "";
    if (status != "running" && status != "stopping") break;
  }
  if (tty) std::cerr << "\n";
  std::cout << to_text(operation_to_json(id, fields)) << "\n";
  return fields["status"] == "done" ? 0 : 1;
}

// A JSON value on one line (--all's output), invalid UTF-8 replaced.
std::string one_line(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int cmd_jobs(delayd::storage::JobStore& store, const Params& args, bool all) {
  using namespace delayd::admin;
  auto parsed = parse_list_request(args);
  if (auto* bad = std::get_if<BadRequest>(&parsed)) {
    std::cerr << "delayctl jobs: --" << flag_of(bad->field) << ": " << bad->reason << "\n";
    return 2;
  }
  const ListRequest& request = std::get<ListRequest>(parsed);
  const std::int64_t now = delayd::broker::system_now_ms();
  delayd::storage::WalkCursor cursor = request.cursor.value_or(delayd::storage::WalkCursor{now, 0, {}, {}});
  while (true) {
    const delayd::storage::WalkPage page =
        delayd::storage::walk_jobs(store, request.filter, cursor, request.limit, now);
    const nlohmann::json j = page_json(request.filter, page);
    if (!all) {
      std::cout << to_text(j) << "\n";
      return 0;
    }
    for (const auto& job : j["jobs"]) std::cout << one_line(job) << "\n";
    if (!page.next) return 0;
    cursor = *page.next;
  }
}

// The same request POST /jobs/bulk takes, read by the same code (admin/job_query.hpp). A run
// creates the operation in Redis and runs it on a runner of its own: if delayctl dies, an
// instance with the admin endpoint on takes it over (admin/operation_runner.hpp).
int cmd_bulk(const Config& config, delayd::redis::RedisClient& redis, delayd::storage::JobStore& store,
             const Params& filter, const std::string& action, const RunArgs& args) {
  using namespace delayd::admin;
  if (args.dry_run == args.run) {
    std::cerr << "delayctl bulk: give --dry-run or --run\n";
    return 2;
  }
  nlohmann::json body{{"action", action}, {"filter", nlohmann::json::object()}, {"dry_run", args.dry_run}};
  for (const auto& [k, v] : filter) body["filter"][k] = v;
  if (args.rate) body["rate_per_s"] = *args.rate;
  auto parsed = parse_bulk_request(body.dump());
  if (auto* bad = std::get_if<BadRequest>(&parsed)) {
    std::cerr << "delayctl bulk: --" << flag_of(bad->field) << ": " << bad->reason << "\n";
    return 2;
  }
  BulkRequest request = std::get<BulkRequest>(std::move(parsed));
  request.access = "admin";
  const std::int64_t now = delayd::broker::system_now_ms();
  const delayd::storage::JobCount count =
      delayd::storage::count_jobs(store, request.filter, now, std::chrono::seconds(10));
  if (args.dry_run) {
    std::cout << to_text({{"dry_run", true},
                          {"action", action_name(request.action)},
                          {"matched", count.matched},
                          {"complete", count.complete}})
              << "\n";
    return 0;
  }
  delayd::storage::OperationStore ops(redis, store.keys());
  const std::string id = create_operation(ops, request, now);
  std::cerr << "delayctl bulk: operation " << id << ", about " << count.matched << " jobs\n";
  return run_operation(config, ops, id, count.matched);
}

// The next instants of a cron expression, as GET /cron/next gives them (admin/cron_query.hpp):
// one line each, "<RFC 3339 in the zone>  <epoch ms>".
int cmd_cron_next(const Params& params) {
  using namespace delayd::admin;
  auto parsed = parse_cron_next(params, delayd::broker::system_now_ms());
  if (auto* bad = std::get_if<BadRequest>(&parsed)) {
    std::cerr << "delayctl cron next: " << (bad->field == "expr" ? "the expression" : "--" + flag_of(bad->field))
              << ": " << bad->reason << "\n";
    return 2;
  }
  const nlohmann::json answer = cron_next_json(std::get<CronNextRequest>(parsed));
  for (const auto& n : answer["next"]) {
    std::cout << n["at"].get<std::string>() << "  " << n["epoch_ms"].get<std::int64_t>() << "\n";
  }
  if (!answer["complete"].get<bool>()) std::cout << "(no more instants)\n";
  return 0;
}

int cmd_dlq_list(const Config& config, const Params& params, bool all) {
  using namespace delayd::admin;
  auto parsed = parse_dead_letter_request(params);
  if (auto* bad = std::get_if<BadRequest>(&parsed)) {
    std::cerr << "delayctl dlq list: --" << flag_of(bad->field) << ": " << bad->reason << "\n";
    return 2;
  }
  const DeadLetterListRequest& request = std::get<DeadLetterListRequest>(parsed);
  delayd::connectors::TopicReader reader(
      delayd::config::kafka_properties(config, delayd::config::KafkaClient::consumer));
  DeadLetterTopic source(reader, config.kafka.dlq_topic);
  std::optional<DeadLetterCursor> cursor = request.cursor;
  while (true) {
    const DeadLetterPage page = walk_dead_letters(source, request.filter, cursor, request.limit);
    if (!all) {
      std::cout << to_text(dead_letter_page_json(request.filter, page)) << "\n";
      return 0;
    }
    for (const auto& rec : page.records) std::cout << one_line(to_json(summarize(rec))) << "\n";
    if (!page.next) return 0;
    cursor = page.next;
  }
}

// The same request POST /dead-letters/redrive takes, read by the same code
// (admin/dead_letter_query.hpp); a run is an operation run here, as cmd_bulk's.
int cmd_dlq_redrive(const Config& config, delayd::redis::RedisClient& redis, delayd::storage::JobStore& store,
                    const Params& filter, const RunArgs& args) {
  using namespace delayd::admin;
  if (args.dry_run == args.run) {
    std::cerr << "delayctl dlq redrive: give --dry-run or --run\n";
    return 2;
  }
  nlohmann::json body{{"filter", nlohmann::json::object()}, {"dry_run", args.dry_run}};
  for (const auto& [k, v] : filter) body["filter"][k] = v;
  if (args.rate) body["rate_per_s"] = *args.rate;
  auto parsed = parse_redrive_request(body.dump());
  if (auto* bad = std::get_if<BadRequest>(&parsed)) {
    std::cerr << "delayctl dlq redrive: --" << flag_of(bad->field) << ": " << bad->reason << "\n";
    return 2;
  }
  RedriveRequest request = std::get<RedriveRequest>(std::move(parsed));
  request.access = "admin";
  delayd::connectors::TopicReader reader(
      delayd::config::kafka_properties(config, delayd::config::KafkaClient::consumer));
  DeadLetterTopic source(reader, config.kafka.dlq_topic);
  const RedriveCount count = count_redrivable(source, request.filter, config.admin.max_redrives,
                                              config.kafka.ingest_topic, std::chrono::seconds(10));
  if (args.dry_run) {
    std::cout << to_text(to_json(count)) << "\n";
    return 0;
  }
  delayd::storage::OperationStore ops(redis, store.keys());
  const std::string id = create_redrive_operation(ops, request, delayd::broker::system_now_ms());
  std::cerr << "delayctl dlq redrive: operation " << id << ", about " << count.matched << " dead letters\n";
  return run_operation(config, ops, id, count.matched);
}

int cmd_cancel(const Config& config, delayd::storage::JobStore& store, const std::string& id, int timeout_ms) {
  using namespace delayd::admin;
  const CancelOutcome o = cancel_and_wait(
      [&]() -> std::string {
        auto f = store.get(id);
        if (!f) return "missing";
        return f->count("state") ? f->at("state") : "unknown";
      },
      [&] { publish(config, delayd::contract::cancel_record(config.kafka.ingest_topic, id)); },
      std::chrono::milliseconds(timeout_ms));
  if (o.verdict == CancelVerdict::no_job) {
    std::cerr << "delayctl cancel: no job " << id << "\n";
    return 1;
  }
  const bool cancelled = o.verdict == CancelVerdict::cancelled;
  std::cout << to_text(json{{"job_id", id}, {"cancelled", cancelled}, {"state", o.state}}) << "\n";
  if (o.verdict == CancelVerdict::pending) {
    std::cerr << "delayctl cancel: the cancel is published but delayd has not acted on it within " << timeout_ms
              << " ms (is delayd running?); if it arrives while the job is in flight, it has no effect\n";
    return 3;
  }
  return cancelled ? 0 : 1;
}

struct ReportArgs {
  std::string job_id;
  std::string status;
  std::string error;
  std::optional<std::int64_t> retry_after_ms;
  std::optional<int> attempt;
};

// Publishes a consumer's report to the status topic, as any consumer would.
int cmd_report(const Config& config, const ReportArgs& a) {
  using namespace delayd::contract;
  if (config.kafka.status_topic.empty()) {
    std::cerr << "delayctl report: kafka.status_topic is empty (reports are off)\n";
    return 2;
  }
  delayd::connectors::OutRecord rec;
  rec.topic = config.kafka.status_topic;
  rec.key = a.job_id;
  rec.headers = {{std::string(kHeaderJobId), a.job_id}, {std::string(kHeaderStatus), a.status}};
  if (!a.error.empty()) rec.headers.push_back({std::string(kHeaderError), a.error});
  if (a.retry_after_ms) rec.headers.push_back({std::string(kHeaderRetryAfter), std::to_string(*a.retry_after_ms)});
  if (a.attempt) rec.headers.push_back({std::string(kHeaderAttempt), std::to_string(*a.attempt)});
  publish(config, rec);
  std::cout << delayd::admin::to_text(json{{"job_id", a.job_id}, {"status", a.status}, {"published", true}}) << "\n";
  return 0;
}

struct RescheduleArgs {
  std::string job_id;
  std::optional<std::string> deliver_at;
  std::optional<std::int64_t> delay_ms;
};

// Publishes a reschedule to the ingest topic (keyed like the job) and waits until Redis shows
// the new time, or the job leaves delay.
int cmd_reschedule(const Config& config, delayd::storage::JobStore& store, const RescheduleArgs& a, int timeout_ms) {
  using namespace delayd::contract;
  using namespace delayd::admin;
  auto fields = store.get(a.job_id);
  if (!fields) {
    std::cerr << "delayctl reschedule: no job " << a.job_id << "\n";
    return 1;
  }
  delayd::connectors::OutRecord rec;
  rec.topic = config.kafka.ingest_topic;
  rec.key = a.job_id;
  rec.headers = {{std::string(kHeaderOp), "reschedule"}, {std::string(kHeaderJobId), a.job_id}};
  if (a.deliver_at) rec.headers.push_back({std::string(kHeaderDeliverAt), *a.deliver_at});
  if (a.delay_ms) rec.headers.push_back({std::string(kHeaderDelayMs), std::to_string(*a.delay_ms)});
  const auto sent = publish(config, rec);
  // The time delayd will read from the record, so that delayctl knows what to wait for.
  delayd::connectors::Record as_read;
  as_read.headers = rec.headers;
  as_read.timestamp_ms = sent.timestamp_ms;
  const auto parsed = parse_ingest(as_read, IngestRules{});
  const auto* r = std::get_if<RescheduleJob>(&parsed);
  if (r == nullptr) {
    std::cerr << "delayctl reschedule: " << std::get<Invalid>(parsed).reason << "\n";
    return 2;
  }
  const std::string want = std::to_string(r->deliver_at_ms);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    fields = store.get(a.job_id);
    const std::string state = fields && fields->count("state") ? fields->at("state") : "missing";
    const std::string at = fields && fields->count("deliver_at") ? fields->at("deliver_at") : "";
    const bool done = state == "delay" && at == want;
    if (done || state != "delay" || std::chrono::steady_clock::now() >= deadline) {
      const auto at_ms = at.empty() ? json(nullptr) : json(std::stoll(at));
      std::cout << to_text(json{{"job_id", a.job_id}, {"rescheduled", done}, {"state", state}, {"deliver_at", at_ms}})
                << "\n";
      if (done) return 0;
      if (state == "delay") {
        std::cerr << "delayctl reschedule: published, but delayd has not moved the job within " << timeout_ms
                  << " ms (is delayd running? a job already being delivered is not moved)\n";
        return 3;
      }
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// delayd's function libraries (storage/script_libraries.hpp), after deleting those of other
// builds with `prune`. Where the scripts run as EVAL scripts (no functions, or the ACL denies
// FUNCTION) there are none to list.
int cmd_scripts(delayd::redis::RedisClient& redis, const delayd::storage::JobStore& store, bool prune) {
  json out;
  if (store.script_calls() != delayd::storage::ScriptCalls::functions) {
    out["scripts"] = "eval";
    out["libraries"] = json::array();
    std::cout << delayd::admin::to_text(out) << "\n";
    return 0;
  }
  out["scripts"] = "functions";
  if (prune) out["deleted"] = delayd::storage::prune_script_libraries(redis);
  out["libraries"] = json::array();
  for (const auto& lib : delayd::storage::script_libraries(redis)) {
    out["libraries"].push_back({{"name", lib.name}, {"this_build", lib.this_build}});
  }
  std::cout << delayd::admin::to_text(out) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed Redis connection is an error return, not a kill
  CLI::App app{"delayctl: publish, inspect and cancel delayed jobs of delayd"};
  app.require_subcommand(1);
  // The same identity as delayd's (cmake/BuildInfo.cmake), but the allocator: only delayd links jemalloc.
  app.set_version_flag("--version",
                       std::string("delayctl ") + delayd::build::kVersion + " (" + delayd::build::kRevision + ", " +
                           delayd::build::kBuildType + ")",
                       "print the version, the commit and the build type, and exit");
  delayd::config::ConfigFlags flags;
  delayd::config::add_config_flags(app, flags);

  SendArgs send;
  auto* send_cmd = app.add_subcommand("send", "publish a delayed message to the ingest topic");
  send_cmd->add_option("--business,-b", send.business, "business name (selects the ready topic)")->required();
  auto* at_opt = send_cmd->add_option("--deliver-at", send.deliver_at, "epoch ms or RFC 3339 time");
  auto* delay_opt = send_cmd->add_option("--delay-ms", send.delay_ms, "delay after the record's timestamp");
  at_opt->excludes(delay_opt);
  send_cmd->add_option("--key,-k", send.key, "record key");
  send_cmd->add_option("--job-id", send.job_id, "idempotency key (default: derived from the record's position)");
  send_cmd->add_option("--header,-H", send.headers, "extra header name=value (repeatable)");
  send_cmd->add_option("--value,-v,value", send.value, "record value");

  std::string job_id;
  auto* get_cmd = app.add_subcommand("get", "print a job as JSON");
  get_cmd->add_option("job-id", job_id, "the job's id")->required();

  int timeout_ms = 10000;
  auto* cancel_cmd = app.add_subcommand("cancel", "cancel a pending job and wait for the outcome");
  cancel_cmd->add_option("job-id", job_id, "the job's id")->required();
  cancel_cmd->add_option("--timeout-ms", timeout_ms, "how long to wait for delayd to act")->check(CLI::PositiveNumber);

  auto* stats_cmd = app.add_subcommand("stats", "pending jobs, next due time, counts per business and state");

  Params jobs_args;
  bool jobs_all = false;
  auto* jobs_cmd = app.add_subcommand("jobs", "a page of jobs, filtered, as GET /jobs gives it");
  add_param_flags(jobs_cmd, jobs_args,
                  {"state", "business", "due_from", "due_to", "id_prefix", "error", "limit", "cursor"}, "GET /jobs's ");
  jobs_cmd->add_flag("--all", jobs_all, "every job of the walk, one JSON object per line");

  Params bulk_filter;
  std::string bulk_action;
  RunArgs bulk_args;
  auto* bulk_cmd = app.add_subcommand("bulk", "an action on every job of a filter: a dry run, or a bulk operation");
  bulk_cmd->add_option("--action", bulk_action, "cancel, run-now or retry")->required();
  add_param_flags(bulk_cmd, bulk_filter, {"state", "business", "due_from", "due_to", "id_prefix", "error"}, "filter: ");
  add_run_flags(bulk_cmd, bulk_args, "jobs");

  auto* dlq_cmd = app.add_subcommand("dlq", "the dead-letter topic: list it, redrive it");
  dlq_cmd->require_subcommand(1);
  Params dlq_list_args;
  bool dlq_all = false;
  auto* dlq_list_cmd =
      dlq_cmd->add_subcommand("list", "a page of dead letters, filtered, as GET /dead-letters gives it");
  add_param_flags(dlq_list_cmd, dlq_list_args, {"reason", "business", "since", "until", "limit", "cursor"},
                  "GET /dead-letters's ");
  dlq_list_cmd->add_flag("--all", dlq_all, "every dead letter of the walk, one JSON object per line");
  Params dlq_filter;
  RunArgs dlq_args;
  auto* dlq_redrive_cmd =
      dlq_cmd->add_subcommand("redrive", "publish the dead letters of a filter back to the ingest topic");
  add_param_flags(dlq_redrive_cmd, dlq_filter, {"reason", "business", "since", "until"}, "filter: ");
  add_run_flags(dlq_redrive_cmd, dlq_args, "dead letters");

  auto* cron_cmd = app.add_subcommand("cron", "calendar schedules: check an expression before publishing it");
  cron_cmd->require_subcommand(1);
  Params cron_args;
  auto* cron_next_cmd = cron_cmd->add_subcommand("next", "the next instants of a cron expression in a time zone");
  cron_next_cmd
      ->add_option_function<std::string>(
          "expr", [&](const std::string& v) { cron_args["expr"] = v; }, "the cron expression, quoted")
      ->required();
  add_param_flags(cron_next_cmd, cron_args, {"tz", "from", "count"}, "GET /cron/next's ");

  ReportArgs report;
  auto* report_cmd = app.add_subcommand("report", "report on a delivered job, as a consumer does (status topic)");
  report_cmd->add_option("job-id", report.job_id, "the job's id")->required();
  report_cmd->add_option("status", report.status, "running, finished or failed")
      ->required()
      ->check(CLI::IsMember({"running", "finished", "failed"}));
  report_cmd->add_option("--error", report.error, "why it failed (at most 1000 bytes are kept)");
  report_cmd->add_option("--retry-after-ms", report.retry_after_ms, "for failed: retry this long after the report")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{86'400'000}));
  report_cmd->add_option("--attempt", report.attempt, "the delivery reported on (the ready record's attempt header)")
      ->check(CLI::PositiveNumber);

  RescheduleArgs resched;
  auto* resched_cmd = app.add_subcommand("reschedule", "move a pending job to a new time and wait for the outcome");
  resched_cmd->add_option("job-id", resched.job_id, "the job's id")->required();
  auto* r_at = resched_cmd->add_option("--deliver-at", resched.deliver_at, "epoch ms or RFC 3339 time");
  auto* r_delay = resched_cmd->add_option("--delay-ms", resched.delay_ms, "from now");
  r_at->excludes(r_delay);
  resched_cmd->add_option("--timeout-ms", timeout_ms, "how long to wait for delayd to act")->check(CLI::PositiveNumber);

  bool prune_scripts = false;
  auto* scripts_cmd = app.add_subcommand("scripts", "delayd's function libraries in Redis, one per build");
  scripts_cmd->add_flag("--prune", prune_scripts,
                        "delete the libraries of other builds (an instance that still calls one loads it again)");

  CLI11_PARSE(app, argc, argv);

  Config config;
  try {
    config = delayd::config::load_config(flags, delayd::config::process_environment());
  } catch (const delayd::config::ConfigError& e) {
    std::cerr << "delayctl: " << e.what() << "\n";
    return 2;
  }
  if (delayd::config::print_config_if_asked(flags, config, std::cout)) return 0;

  try {
    if (*send_cmd) return cmd_send(config, send);
    if (*cron_next_cmd) return cmd_cron_next(cron_args);
    if (*report_cmd) return cmd_report(config, report);
    if (*dlq_list_cmd) return cmd_dlq_list(config, dlq_list_args, dlq_all);
    const auto redis = delayd::config::make_redis_client(config);
    delayd::storage::JobStore store(*redis, delayd::storage::KeySchema(config.redis.prefix),
                                    config.redis.job_retention_s, delayd::config::script_calls(config));
    if (*get_cmd) return cmd_get(store, job_id);
    if (*jobs_cmd) return cmd_jobs(store, jobs_args, jobs_all);
    if (*bulk_cmd) return cmd_bulk(config, *redis, store, bulk_filter, bulk_action, bulk_args);
    if (*dlq_redrive_cmd) return cmd_dlq_redrive(config, *redis, store, dlq_filter, dlq_args);
    if (*cancel_cmd) return cmd_cancel(config, store, job_id, timeout_ms);
    if (*resched_cmd) {
      if (!resched.deliver_at && !resched.delay_ms) {
        std::cerr << "delayctl reschedule: give --deliver-at or --delay-ms\n";
        return 2;
      }
      return cmd_reschedule(config, store, resched, timeout_ms);
    }
    if (*scripts_cmd) return cmd_scripts(*redis, store, prune_scripts);
    if (*stats_cmd) {
      std::cout << delayd::admin::to_text(delayd::admin::stats_to_json(store.stats())) << "\n";
      return 0;
    }
  } catch (const delayd::redis::RedisIoError& e) {
    std::cerr << "delayctl: " << e.what() << "\n";
    return 4;
  } catch (const delayd::redis::RedisCommandError& e) {
    // Refused for good: AUTH or SELECT refused, or a redis-cluster:// url naming a server that
    // is not in cluster mode.
    std::cerr << "delayctl: " << e.what() << "\n";
    return 4;
  } catch (const delayd::connectors::KafkaError& e) {
    std::cerr << "delayctl: kafka: " << e.what() << "\n";
    return 4;
  }
  return 2;
}
