#include "chaos_support.hpp"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <librdkafka/rdkafka.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "support/redis_connect.hpp"
#include "support/test_env.hpp"

#ifndef DELAYD_SOURCE_DIR
#error "DELAYD_SOURCE_DIR must name the source tree (for scripts/stack.sh)"
#endif

namespace delayd::chaos {

bool start_delayd(DelaydProcess& delayd) {
  delayd.set_die_with_test(true);
  try {
    delayd.start(std::chrono::seconds(30));
    return true;
  } catch (...) {  // start() has recorded the failure (with delayd's log) already
    return false;
  }
}

void publish_spread(Sender& sender, Expected& expected, const std::string& prefix, int n, std::int64_t from,
                    std::int64_t spread, const std::vector<std::string>& businesses, std::int32_t partition) {
  for (int i = 0; i < n; ++i) {
    const std::int64_t at = from + spread * i / std::max(n, 1);
    const std::string id = prefix + std::to_string(i);
    Job j = e2e::job_at(id, at, "value of " + id, std::nullopt,
                        businesses[static_cast<std::size_t>(i) % businesses.size()]);
    expected[id] = at;
    sender.send(j, partition);
  }
}

// ---- Sender ----

Sender::Sender(const World& world, connectors::Properties extra)
    : world_(world),
      producer_(
          [&] {
            connectors::Properties p{{"bootstrap.servers", world.bootstrap}, {"linger.ms", "5"}};
            for (auto& kv : extra) p.push_back(std::move(kv));
            return p;
          }(),
          [this](const connectors::DeliveryReport& r) {
            if (!r.ok) {
              failed_.push_back(r);
            } else if (r.tag != 0) {
              tagged_.push_back(r);
            }
          }) {}

std::optional<connectors::DeliveryReport> Sender::delivered(std::uint64_t tag) const {
  for (const auto& r : tagged_) {
    if (r.tag == tag) return r;
  }
  return std::nullopt;
}

void Sender::send(const Job& job, std::int32_t partition) {
  connectors::OutRecord rec = e2e::ingest_record(job);
  rec.partition = partition;
  send_raw(std::move(rec));
}

void Sender::send_raw(connectors::OutRecord rec) {
  rec.topic = world_.ingest_topic;
  producer_.produce(rec, 30000);
}

void Sender::flush(std::chrono::milliseconds timeout) {
  const bool all = producer_.flush(static_cast<int>(timeout.count()));
  INFO(producer_.outstanding() << " records not acknowledged within " << timeout.count() << " ms");
  REQUIRE(all);
  if (!failed_.empty()) {
    INFO(failed_.size() << " records refused; the first: " << failed_.front().error);
    REQUIRE(failed_.empty());
  }
}

// ---- ReadyWatcher ----

ReadyWatcher::ReadyWatcher(const World& world, std::vector<std::string> topics, bool uncommitted)
    : consumer_({{"bootstrap.servers", world.bootstrap},
                 {"group.id", testing::unique_name("chaos-watcher")},
                 {"auto.offset.reset", "earliest"},
                 {"isolation.level", uncommitted ? "read_uncommitted" : "read_committed"},
                 // Ready topics that delayd creates while the case runs are found quickly.
                 {"topic.metadata.refresh.interval.ms", "1000"},
                 // The session of delayd's own consumers in these cases (harness.cpp), not the
                 // default 45 s: after a broker restart the group coordinator waits out the
                 // session of the member that lost contact before it assigns again, so with 45 s
                 // the watcher got its partitions back a minute after delayd had delivered
                 // everything, and chaos.kafka_restart counted the jobs it had not read as lost
                 // (a restart of 74 s under the sanitizer build, on a broker with ~2 900
                 // partitions by then).
                 {"session.timeout.ms", "6000"},
                 {"heartbeat.interval.ms", "1000"}},
                {}) {
  consumer_.subscribe(topics);
}

void ReadyWatcher::poll(std::chrono::milliseconds wait) {
  auto batch = consumer_.poll_batch(5000, static_cast<int>(wait.count()));
  const std::int64_t now = now_ms();
  for (auto& r : batch) {
    if (!positions_.emplace(r.topic, r.partition, r.offset).second) continue;
    if (const auto id = e2e::header(r, "job-id")) ++count_by_id_[*id];
    deliveries_.push_back({std::move(r), now});
  }
}

bool ReadyWatcher::poll_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    poll();
  }
  return true;
}

void ReadyWatcher::poll_for(std::chrono::milliseconds how_long) {
  const auto deadline = std::chrono::steady_clock::now() + how_long;
  while (std::chrono::steady_clock::now() < deadline) poll(std::chrono::milliseconds(50));
}

std::size_t ReadyWatcher::seen_of(const Expected& expected) const {
  std::size_t n = 0;
  for (const auto& [id, count] : count_by_id_) n += expected.count(id);
  return n;
}

bool settle(ReadyWatcher& watcher, const Expected& expected, DelaydProcess& delayd, std::chrono::milliseconds timeout) {
  watcher.poll_until([&] { return watcher.all_seen(expected) || !delayd.running(); }, timeout);
  if (!watcher.all_seen(expected)) return false;
  watcher.poll_for(std::chrono::milliseconds(1500));
  return true;
}

// ---- Tally and the summary line ----

Tally tally(const Expected& expected, const ReadyWatcher& watcher) {
  Tally t;
  t.sent = expected.size();
  std::map<std::string, int> seen;
  for (const auto& d : watcher.deliveries()) {
    const auto id = e2e::header(d.record, "job-id");
    const auto it = id ? expected.find(*id) : expected.end();
    if (it == expected.end()) {
      ++t.unexpected;
      continue;
    }
    const bool first = ++seen[*id] == 1;
    // The ready record's deliver-at header is the due time delayd claims; the case's own figure
    // is what the producer asked for. Early against either is early.
    std::int64_t due = it->second;
    if (const auto h = e2e::header(d.record, "deliver-at")) {
      try {
        due = std::max<std::int64_t>(due, std::stoll(*h));
      } catch (...) {
      }
    }
    if (d.record.timestamp_ms < due || d.received_ms < due) {
      ++t.early;
      if (t.early_ids.size() < 5) {
        t.early_ids.push_back(*id + " (deliver-at " + std::to_string(due) + ", record time " +
                              std::to_string(d.record.timestamp_ms) + ", received " + std::to_string(d.received_ms) +
                              ")");
      }
    }
    if (first) t.max_late_ms = std::max(t.max_late_ms, d.record.timestamp_ms - it->second);
  }
  t.delivered = seen.size();
  for (const auto& [id, n] : seen) t.duplicates += static_cast<std::size_t>(n - 1);
  for (const auto& [id, at] : expected) {
    if (seen.count(id) == 0) {
      ++t.lost;
      if (t.lost_ids.size() < 5) t.lost_ids.push_back(id);
    }
  }
  return t;
}

CaseLine::CaseLine(std::string name, const Expected& expected, const ReadyWatcher& watcher,
                   std::function<std::string()> up)
    : name_(std::move(name)), expected_(expected), watcher_(watcher), up_(std::move(up)) {}

CaseLine::~CaseLine() {
  if (printed_) return;
  try {
    note("ended", "early (failed before the end)");
    print();
  } catch (...) {
  }
}

void CaseLine::note(const std::string& key, const std::string& value) {
  // ", " separates the fields of the line (scripts/chaos.sh splits on it).
  std::string v = value;
  for (std::size_t at = v.find(", "); at != std::string::npos; at = v.find(", ", at)) v.replace(at, 2, "; ");
  notes_.emplace_back(key, v);
}

Tally CaseLine::print() {
  const Tally t = tally(expected_, watcher_);
  std::string up = "no";
  try {
    up = up_();
  } catch (...) {
  }
  std::ostringstream line;
  // Named as ctest names the case: an at_least_once twin (tests/chaos/CMakeLists.txt) with its
  // suffix, and a run on another librdkafka with the one DELAYD_TEST_CASE_SUFFIX gives.
  const char* mode = std::getenv("DELAYD_TEST_KAFKA_DELIVERY");
  const bool twin = mode != nullptr && std::string_view(mode) == "at_least_once";
  const char* suffix = std::getenv("DELAYD_TEST_CASE_SUFFIX");
  line << "chaos: " << name_ << (twin ? ".at_least_once" : "") << (suffix != nullptr ? suffix : "") << ": sent "
       << t.sent << ", delivered " << t.delivered << ", lost " << t.lost << ", early " << t.early << ", duplicates "
       << t.duplicates << ", delayd up " << up;
  line << ", max late ms " << t.max_late_ms;
  for (const auto& [k, v] : notes_) line << ", " << k << " " << v;
  if (!printed_) std::cout << line.str() << std::endl;
  printed_ = true;
  return t;
}

std::string up_word(DelaydProcess& delayd) {
  if (delayd.running()) return "yes";
  if (const auto st = delayd.exit_status()) {
    return *st >= 0 ? "no (exited with status " + std::to_string(*st) + ")"
                    : "no (killed by signal " + std::to_string(-*st) + ")";
  }
  return "no";
}

bool ShardsLost::none_expected() const {
  return librdkafka.has_value() && !connectors::commits_lose_assignment(*librdkafka);
}

ShardsLost note_shards_lost(CaseLine& line, const std::string& log_path) {
  ShardsLost lost;
  lost.count = e2e::count_in_log(log_path, "lost (the group took it away without a revoke)");
  lost.librdkafka = e2e::logged_librdkafka(log_path);
  line.note("shards lost by the others", std::to_string(lost.count));
  const auto& v = lost.librdkafka;
  line.note("librdkafka",
            v ? std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) : "?");
  return lost;
}

std::string log_tail(const World& world, std::size_t lines) {
  std::ifstream in(world.log_path);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += l + "\n";
  return out;
}

void check_outcome(const Tally& t, const World& world, bool expect_up, const std::string& up) {
  {
    std::string ids;
    for (const auto& id : t.lost_ids) ids += " " + id;
    INFO("lost " << t.lost << " of " << t.sent << "; the first:" << ids);
    CHECK(t.lost == 0);
  }
  {
    std::string ids;
    for (const auto& id : t.early_ids) ids += "\n  " + id;
    INFO("early: " << ids);
    CHECK(t.early == 0);
  }
  if (expect_up) {
    INFO("delayd up: " << up);
    CHECK(up == "yes");
  }
  if (t.lost != 0 || t.early != 0 || (expect_up && up != "yes")) {
    WARN("delayd log (" << world.log_path << "), last lines:\n" << log_tail(world));
  }
}

// ---- the stack ----

ScriptResult run_stack_script(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  const std::string script = std::string(DELAYD_SOURCE_DIR) + "/scripts/stack.sh";
  std::vector<std::string> argv_s{"bash", script};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The environment is built before fork: the child of a threaded process may only make
  // async-signal-safe calls until exec.
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (env.count(entry.substr(0, entry.find('='))) == 0) env_s.push_back(entry);
  }
  for (const auto& [k, v] : env) env_s.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {-1, "pipe failed"};
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return {-1, "fork failed"};
  }
  if (pid == 0) {
    // The servers started from here must not inherit this test's sockets and files.
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::close_range(3, ~0U, 0);
    ::execve("/bin/bash", argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  ScriptResult r;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      r.output.append(buf, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

void require_stack_is_ours() {
  static bool checked = false;
  if (checked) return;
  const std::string bootstrap = testing::require_env("KAFKA_BOOTSTRAP");
  const std::string redis_url = testing::require_env("REDIS_URL");
  const auto r = run_stack_script({"env"});
  INFO("scripts/stack.sh env (DELAYD_STACK_DIR="
       << (std::getenv("DELAYD_STACK_DIR") ? std::getenv("DELAYD_STACK_DIR") : "<unset>") << ") printed:\n"
       << r.output);
  REQUIRE(r.status == 0);
  // Never restart servers that belong to someone else: the script must name the tests' servers.
  REQUIRE_THAT(r.output, Catch::Contains("KAFKA_BOOTSTRAP=" + bootstrap + "\n") &&
                             Catch::Contains("REDIS_URL=" + redis_url + "\n"));
  checked = true;
}

void restart_server(const std::string& server, const std::map<std::string, std::string>& env) {
  require_stack_is_ours();
  const auto r = run_stack_script({"restart", server}, env);
  INFO("scripts/stack.sh restart " << server << " printed:\n" << r.output);
  REQUIRE(r.status == 0);
}

bool server_up(const std::string& server) {
  const auto r = run_stack_script({"status"});
  return r.output.find("stack: " + server + " up") != std::string::npos;
}

ServerGuard::ServerGuard(std::string server) : server_(std::move(server)) { require_stack_is_ours(); }

ServerGuard::~ServerGuard() {
  try {
    if (server_up(server_)) return;
    std::cerr << "chaos: " << server_ << " is down at the end of the case; restarting it\n";
    const auto r = run_stack_script({"restart", server_});
    if (r.status != 0) std::cerr << "chaos: could not bring " << server_ << " back:\n" << r.output;
  } catch (...) {
  }
}

void create_topic_with_config(const World& world, const std::string& topic,
                              const std::map<std::string, std::string>& config, int partitions) {
  char err[512] = "";
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  REQUIRE(rd_kafka_conf_set(conf, "bootstrap.servers", world.bootstrap.c_str(), err, sizeof err) == RD_KAFKA_CONF_OK);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  INFO("rd_kafka_new: " << err);
  REQUIRE(rk != nullptr);
  rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(topic.c_str(), partitions, 1, err, sizeof err);
  std::string outcome;
  if (nt == nullptr) {
    outcome = err;
  } else {
    for (const auto& [k, v] : config) rd_kafka_NewTopic_set_config(nt, k.c_str(), v.c_str());
    rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, nullptr, q);
    rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30000);
    if (ev == nullptr) {
      outcome = "no answer within 30 s";
    } else if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      outcome = rd_kafka_event_error_string(ev);
    } else {
      std::size_t n = 0;
      const auto** results = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
      if (n == 1 && rd_kafka_topic_result_error(results[0]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        outcome = rd_kafka_err2str(rd_kafka_topic_result_error(results[0]));
      }
    }
    if (ev != nullptr) rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
  }
  rd_kafka_destroy(rk);
  INFO("creating " << topic << ": " << outcome);
  REQUIRE(outcome.empty());
  connectors::KafkaAdmin admin({{"bootstrap.servers", world.bootstrap}});
  admin.ensure_topics({topic}, partitions, 1);  // exists now: this only waits for its leaders
}

redis::RedisConnection redis_for(const World& world, int timeout_ms) {
  auto opts = testing::redis_options(world.redis_url);
  opts.timeout_ms = timeout_ms;
  return redis::RedisConnection(opts);
}

RedisPause::RedisPause(const World& world, std::chrono::milliseconds how_long) : world_(world) {
  REQUIRE(redis_for(world).command({"CLIENT", "PAUSE", std::to_string(how_long.count()), "ALL"}).view().str() == "OK");
}

RedisPause::~RedisPause() {
  try {
    redis_for(world_).command({"CLIENT", "UNPAUSE"});
  } catch (...) {
  }
}

RedisPinger::RedisPinger(const World& world) {
  const auto opts = testing::redis_options(world.redis_url);
  host_ = opts.host;
  port_ = opts.port;
  thread_ = std::thread([this] {
    std::int64_t last_ok = now_ms();
    while (!stop_) {
      bool ok = false;
      const timeval tv{0, 200000};
      if (redisContext* c = redisConnectWithTimeout(host_.c_str(), port_, tv)) {
        if (c->err == 0) {
          redisSetTimeout(c, tv);
          if (auto* r = static_cast<redisReply*>(redisCommand(c, "PING"))) {
            if (r->type == REDIS_REPLY_ERROR && std::string(r->str, r->len).rfind("LOADING", 0) == 0) {
              const std::int64_t now = now_ms();
              if (first_loading_ms_ == 0) first_loading_ms_ = now;
              last_loading_ms_ = now;
            }
            ok = r->type == REDIS_REPLY_STATUS;
            freeReplyObject(r);
          }
        }
        redisFree(c);
      }
      const std::int64_t now = now_ms();
      if (ok) {
        last_ok = now;
      } else {
        longest_gap_ms_ = std::max<std::int64_t>(longest_gap_ms_, now - last_ok);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
}

RedisPinger::~RedisPinger() { stop(); }

void RedisPinger::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

namespace {

const nlohmann::json* find_key(const nlohmann::json& j, const std::string& key) {
  if (j.is_object()) {
    if (const auto it = j.find(key); it != j.end()) return &*it;
    for (const auto& [k, v] : j.items()) {
      if (const auto* hit = find_key(v, key)) return hit;
    }
  }
  return nullptr;
}

}  // namespace

std::string max_turn_ms(std::uint16_t admin_port) {
  const std::string response = e2e::http_get(admin_port, "/stats");
  const auto body = response.find("\r\n\r\n");
  if (body == std::string::npos) return "n/a";
  const auto j = nlohmann::json::parse(response.substr(body + 4), nullptr, false);
  if (j.is_discarded()) return "n/a";
  const auto* v = find_key(j, "max_turn_ms");
  return v == nullptr || v->is_null() ? "n/a" : v->dump();
}

}  // namespace delayd::chaos
