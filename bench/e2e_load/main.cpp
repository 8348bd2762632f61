// e2e_load: the load generator and measurer behind bench/run-e2e.sh (and run-scale.sh, run-scaleout.sh,
// run-compression.sh). It drives delayd only
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
//                            [--producer-linger-ms 5]   (the publishing producer's linger.ms)
//   e2e_load lives           --ingest-topic T --ready-topic R --status-topic S --rate R --seconds D
//                            --delay-ms MS [--figure lateness_lives_per_s] [--cpu-pids name:pid,...]
//                            (whole lives of every kind, reported on S: lives.cpp)
//   e2e_load restart-publish --ingest-topic T --ready-topic R --group G --far N --overdue M
//                            [--far-ms 3600000] [--margin-ms 10000]
//   e2e_load restart-measure --ready-topic R --overdue M --start-ms S --log FILE
//   e2e_load fill            --ingest-topic T --ready-topic R --group G --n N [--span-ms 86400000]
//                            [--lead-ms 10000] [--backlog 200000] [--sample-ms 1000] [--rss-pid PID]
//                            [--values FILE] [--cpu-pids name:pid,...]   (bench/run-scale.sh)
//   e2e_load watch           --ready-topic R --n N --start-ms S [--seconds 30] [--on-time-ms 10]
//   e2e_load report          --in RAW.jsonl --out e2e.jsonl   (with each phase's "<phase>_cpu",
//                            the cores' ceiling beside its machine limit: cmd_report)
//   e2e_load compare         --before e2e.jsonl --after e2e.jsonl [--peer e2e.jsonl]
//   e2e_load medians         --dir D --rounds N   (D/round<k>/{off,on}/e2e.jsonl: run-trace-cost.sh)
//   e2e_load cleanup         [--topic-prefix P] [--redis-match GLOB,...] [--groups G,...]
// Common options: --bootstrap host:port, --redis-url redis://host:port, --tag (job-id prefix,
// default "e2e"), --data-dir (where the raw data for the plots goes, default ".").
//
// Threading: a ready topic is read on a thread of its own (ReadyCollector); everything else,
#include <algorithm>

#include "commands.hpp"

namespace e2e {
namespace {

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
  if (name == "lives") return cmd_lives(o);
  if (name == "restart-publish") return cmd_restart_publish(o);
  if (name == "restart-measure") return cmd_restart_measure(o);
  if (name == "fill") return cmd_fill(o);
  if (name == "watch") return cmd_watch(o);
  if (name == "report") return cmd_report(o);
  if (name == "compare") return cmd_compare(o);
  if (name == "medians") return cmd_medians(o);
  if (name == "cleanup") return cmd_cleanup(o);
  throw UsageError("unknown subcommand " + name);
}

}  // namespace
}  // namespace e2e

int main(int argc, char** argv) {
  try {
    if (argc < 2)
      throw e2e::UsageError("usage: e2e_load SUBCOMMAND [--name value]... (see the top of bench/e2e_load/main.cpp)");
    return e2e::dispatch(argv[1], e2e::Options(argc, argv));
  } catch (const e2e::UsageError& e) {
    std::cerr << "e2e_load: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "e2e_load " << argv[1] << ": " << e.what() << "\n";
    return 1;
  }
}
