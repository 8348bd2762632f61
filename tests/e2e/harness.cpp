#include "harness.hpp"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/log_time.hpp"
#include "config/ingest_topics.hpp"
#include "support/free_port.hpp"
#include "support/redis_connect.hpp"
#include "support/test_env.hpp"

#ifndef DELAYD_BIN
#error "DELAYD_BIN must name the delayd executable"
#endif

namespace delayd::e2e {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

connectors::Properties with(connectors::Properties base, const connectors::Properties& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

World::World(const std::string& name) {
  bootstrap = testing::require_env("KAFKA_BOOTSTRAP");
  redis_url = testing::require_env("REDIS_URL");
  const std::string id = testing::unique_name("e2e-" + name);
  ingest_topic = id + ".ingest";
  dlq_topic = id + ".dlq";
  status_topic = id + ".status";
  ready_prefix = id + ".ready.";
  group = id;
  redis_prefix = id;
  log_path = "delayd-" + id + ".log";  // in the test's working directory (the build tree)
}

void World::create_ingest_topic(const std::string& topic, int partitions) {
  connectors::KafkaAdmin admin(testing::kafka_client_properties(bootstrap));
  admin.ensure_topics({topic}, partitions, 1);
  const int n = admin.partition_count(topic).value_or(partitions);
  admin.ensure_topics({config::delivery_log_topic(topic)}, n, 1);
  const testing::KafkaSecurity security = testing::kafka_security();
  if (grant_acls && !security.protocol.empty() && topic != ingest_topic) {  // ingest_topic's: delayd_acls()
    const std::string log = config::delivery_log_topic(topic);
    testing::set_acls(testing::kafka_client_properties(bootstrap), security.delayd_user,
                      {{testing::AclResource::topic, topic, "Read"},
                       {testing::AclResource::topic, topic, "Describe"},
                       {testing::AclResource::topic, log, "Read"},
                       {testing::AclResource::topic, log, "Write"},
                       {testing::AclResource::topic, log, "Describe"}});
  }
}

void World::create_topics(const std::vector<std::string>& businesses, int partitions) {
  create_ingest_topic(ingest_topic, partitions);
  connectors::KafkaAdmin admin(testing::kafka_client_properties(bootstrap));
  std::vector<std::string> topics{ingest_topic, dlq_topic, status_topic};
  for (const auto& b : businesses) topics.push_back(ready_topic(b));
  admin.ensure_topics(topics, partitions, 1);
  const testing::KafkaSecurity security = testing::kafka_security();
  if (grant_acls && !security.protocol.empty()) {
    testing::set_acls(testing::kafka_client_properties(bootstrap), security.delayd_user, delayd_acls(businesses));
  }
}

std::vector<testing::Acl> World::delayd_acls(const std::vector<std::string>& businesses) const {
  using testing::AclResource;
  std::vector<testing::Acl> acls{
      {AclResource::topic, ingest_topic, "Read"},
      {AclResource::topic, ingest_topic, "Describe"},
      {AclResource::topic, status_topic, "Read"},
      {AclResource::topic, status_topic, "Describe"},
      {AclResource::topic, dlq_topic, "Write"},
      {AclResource::group, group, "Read"},
      // The status topic is read in a group of its own (config/ingest_topics.hpp).
      {AclResource::group, group + "." + status_topic, "Read"},
      // exactly_once: the ingest topic's delivery log, and the shards' transactional ids.
      {AclResource::topic, config::delivery_log_topic(ingest_topic), "Read"},
      {AclResource::topic, config::delivery_log_topic(ingest_topic), "Write"},
      {AclResource::topic, config::delivery_log_topic(ingest_topic), "Describe"},
      {AclResource::transactional_id, group + ".", "Write"},
      {AclResource::transactional_id, group + ".", "Describe"},
  };
  for (const auto& b : businesses) acls.push_back({AclResource::topic, ready_topic(b), "Write"});
  return acls;
}

std::vector<std::pair<std::string, std::string>> World::environment() const {
  std::map<std::string, std::string> env{
      {"DELAYD_KAFKA_BOOTSTRAP", bootstrap},
      {"DELAYD_REDIS_URL", redis_url},
      {"DELAYD_KAFKA_INGEST_TOPIC", ingest_topic},
      {"DELAYD_KAFKA_DLQ_TOPIC", dlq_topic},
      {"DELAYD_KAFKA_STATUS_TOPIC", status_topic},
      {"DELAYD_KAFKA_READY_TOPIC_TEMPLATE", ready_prefix + "{business}"},
      {"DELAYD_KAFKA_GROUP_ID", group},
      {"DELAYD_REDIS_PREFIX", redis_prefix},
      {"DELAYD_KAFKA_CREATE_TOPICS", "false"},
      // The broker's minimum; a killed instance's partitions come back after this long.
      {"DELAYD_KAFKA_CONSUMER_PROPERTIES", "session.timeout.ms=6000,heartbeat.interval.ms=1000"},
      {"DELAYD_LOG_LEVEL", "info"},
  };
  for (const auto& [k, v] : testing::delayd_kafka_security_env()) env[k] = v;
  // A whole run in the other delivery mode: DELAYD_TEST_KAFKA_DELIVERY=at_least_once (the
  // scale and partition cases run in both; a case's own setting still wins).
  if (const char* mode = std::getenv("DELAYD_TEST_KAFKA_DELIVERY"); mode != nullptr && *mode != '\0') {
    env["DELAYD_KAFKA_DELIVERY"] = mode;
  }
  for (const auto& [k, v] : settings) env[k] = v;
  return {env.begin(), env.end()};
}

DelaydProcess::DelaydProcess(const World& world) : world_(world) {}

DelaydProcess::~DelaydProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

// The ingest topic's group, not the status topic's (each topic has a group of its own).
void DelaydProcess::start(std::chrono::milliseconds timeout) {
  start_until(": assigned " + world_.ingest_topic + "[", timeout);
}

namespace {

// Over TLS the stack's client key is root's and private (0600): a child run as another user
// (run_as()) could not read it and would exit at start-up. Each TLS file the environment names is
// copied beside `log_file`, owned by that user, and the child's environment pointed at the copy.
void readable_copies_of_tls_files(std::vector<std::pair<std::string, std::string>>& env, const std::string& log_file,
                                  uid_t uid, gid_t gid) {
  for (const char* name : {"DELAYD_REDIS_TLS_CA_FILE", "DELAYD_REDIS_TLS_CERT_FILE", "DELAYD_REDIS_TLS_KEY_FILE"}) {
    auto set = std::find_if(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
    const char* inherited = std::getenv(name);
    std::string value = set != env.end() ? set->second : inherited != nullptr ? inherited : "";
    if (value.empty()) continue;
    const std::string copy = log_file + "." + name;
    std::ifstream in(value, std::ios::binary);
    REQUIRE(in.good());
    {
      std::ofstream out(copy, std::ios::binary | std::ios::trunc);
      out << in.rdbuf();
      REQUIRE(out.good());
    }
    REQUIRE(::chmod(copy.c_str(), 0600) == 0);
    REQUIRE(::chown(copy.c_str(), uid, gid) == 0);
    if (set != env.end()) {
      set->second = copy;
    } else {
      env.emplace_back(name, copy);
    }
  }
}

}  // namespace

std::string DelaydProcess::launch() {
  REQUIRE(pid_ < 0);
  struct stat st {};
  const std::string log_file = log_path();
  log_offset_ = ::stat(log_file.c_str(), &st) == 0 ? static_cast<std::size_t>(st.st_size) : 0;
  auto env = world_.environment();
  for (const auto& [k, v] : env_) env.emplace_back(k, v);  // set after the world's: they win
  if (uid_) readable_copies_of_tls_files(env, log_file, *uid_, gid_);
  exit_status_.reset();
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  REQUIRE(pid_ >= 0);
  const char* binary = binary_.empty() ? DELAYD_BIN : binary_.c_str();
  const std::optional<uid_t> uid = uid_;
  const gid_t gid = gid_;
  if (pid_ == 0) {
    // Child: only async-signal-safe calls until exec. The log is opened before a change of user
    // (the descriptor stays writable), the parent-death signal set after it (a change of user
    // clears it).
    const int fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (uid && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(*uid) != 0)) ::_exit(126);
    if (die_with_test_) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the test died before prctl took effect
    }
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execl(binary, binary, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return log_file;
}

void DelaydProcess::start_until(const std::string& line_text, std::chrono::milliseconds timeout) {
  const std::string log_file = launch();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::ifstream log(log_file);
    log.seekg(static_cast<std::streamoff>(log_offset_));
    std::stringstream text;
    text << log.rdbuf();
    if (text.str().find(line_text) != std::string::npos) return;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      FAIL("delayd exited during start-up; its log:\n" << text.str());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      FAIL("delayd's log did not say \"" << line_text << "\" in time; its log:\n" << text.str());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::optional<int> DelaydProcess::run_to_exit(std::chrono::milliseconds timeout) {
  launch();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) != pid_) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

std::string DelaydProcess::log_since_start() const {
  std::ifstream log(log_path());
  log.seekg(static_cast<std::streamoff>(log_offset_));
  std::stringstream text;
  text << log.rdbuf();
  return text.str();
}

std::size_t groups_left(const World& w) { return groups_left(w.log_path); }

std::size_t groups_left(const std::string& log_path) { return count_in_log(log_path, "leaving consumer group"); }

std::size_t count_in_log(const std::string& log_path, std::string_view line) {
  std::ifstream log(log_path);
  std::stringstream read;
  read << log.rdbuf();
  const std::string text = read.str();
  std::size_t n = 0;
  for (auto at = text.find(line); at != std::string::npos; at = text.find(line, at + line.size())) ++n;
  return n;
}

std::size_t count_in_log_between(const std::string& log_path, std::string_view text, std::int64_t from_ms,
                                 std::int64_t to_ms) {
  std::ifstream log(log_path);
  std::size_t n = 0;
  std::string line;
  while (std::getline(log, line)) {
    if (line.find(text) == std::string::npos) continue;
    const auto at = base::log_line_time_ms(line);
    if (at && *at >= from_ms && *at <= to_ms) ++n;
  }
  return n;
}

std::optional<connectors::LibrdkafkaVersion> logged_librdkafka(const std::string& log_path) {
  std::ifstream log(log_path);
  std::string first;
  if (!std::getline(log, first)) return std::nullopt;
  const std::string_view tag = "librdkafka ";
  const auto at = first.rfind(tag);
  if (at == std::string::npos) return std::nullopt;
  connectors::LibrdkafkaVersion v;
  char dot1 = 0;
  char dot2 = 0;
  std::istringstream in(first.substr(at + tag.size()));
  if (!(in >> v.major >> dot1 >> v.minor >> dot2 >> v.patch) || dot1 != '.' || dot2 != '.') return std::nullopt;
  return v;
}

int DelaydProcess::stop(std::chrono::milliseconds timeout) {
  REQUIRE(pid_ > 0);
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) != pid_) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
      FAIL("delayd did not stop within the timeout after SIGTERM");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

void DelaydProcess::kill9() {
  REQUIRE(pid_ > 0);
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

bool DelaydProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return false;
  }
  return true;
}

Publisher::Publisher(const World& world)
    : world_(world),
      producer_(with(testing::kafka_client_properties(world.bootstrap), {{"linger.ms", "5"}}),
                [this](const connectors::DeliveryReport& r) { reports_.push_back(r); }) {}

connectors::OutRecord ingest_record(const Job& job) {
  connectors::OutRecord rec;
  rec.key = job.key;
  rec.value = job.value;
  if (job.deliver_at) rec.headers.push_back({"deliver-at", *job.deliver_at});
  if (job.delay_ms) rec.headers.push_back({"delay-ms", *job.delay_ms});
  rec.headers.push_back({"business", job.business});
  if (!job.job_id.empty()) rec.headers.push_back({"job-id", job.job_id});
  for (const auto& h : job.extra) rec.headers.push_back(h);
  return rec;
}

void Publisher::send(const Job& job) { send_raw(ingest_record(job)); }

void Publisher::send_raw(connectors::OutRecord rec) {
  rec.topic = world_.ingest_topic;
  producer_.produce(rec);
}

void Publisher::send_to(connectors::OutRecord rec) { producer_.produce(rec); }

void Publisher::send_cancel(const std::string& job_id) {
  connectors::OutRecord rec;
  rec.key = job_id;
  rec.headers = {{"op", "cancel"}, {"job-id", job_id}};
  send_raw(std::move(rec));
}

void Publisher::send_reschedule(const std::string& job_id, const connectors::Headers& when) {
  connectors::OutRecord rec;
  rec.key = job_id;
  rec.headers = {{"op", "reschedule"}, {"job-id", job_id}};
  for (const auto& h : when) rec.headers.push_back(h);
  send_raw(std::move(rec));
}

void Publisher::send_report(const std::string& job_id, const std::string& status,
                            const std::optional<std::string>& error, std::optional<std::int64_t> retry_after_ms,
                            std::optional<std::int64_t> attempt) {
  connectors::OutRecord rec;
  rec.topic = world_.status_topic;
  if (!job_id.empty()) {
    rec.key = job_id;
    rec.headers.push_back({"job-id", job_id});
  }
  if (!status.empty()) rec.headers.push_back({"status", status});
  if (error) rec.headers.push_back({"error", *error});
  if (retry_after_ms) rec.headers.push_back({"retry-after-ms", std::to_string(*retry_after_ms)});
  if (attempt) rec.headers.push_back({"attempt", std::to_string(*attempt)});
  producer_.produce(rec);
}

void Publisher::flush() {
  REQUIRE(producer_.flush(60000));
  for (const auto& r : reports_) {
    INFO(r.error);
    REQUIRE(r.ok);
  }
  reports_.clear();
}

Collector::Collector(const World& world, std::vector<std::string> topics)
    : consumer_(with(testing::kafka_client_properties(world.bootstrap),
                     // A short fetch wait: partitions whose offsets come after the first
                     // fetch left are not held back behind it (as delayd's own consumer).
                     {{"group.id", testing::unique_name("collector")},
                      {"auto.offset.reset", "earliest"},
                      {"fetch.wait.max.ms", "10"}}),
                {}) {
  consumer_.subscribe(topics);
}

bool Collector::collect_until(const std::function<bool(const std::vector<connectors::Record>&)>& done,
                              std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done(records_)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    auto batch = consumer_.poll_batch(1000, 100);
    const std::int64_t now = now_ms();
    for (auto& r : batch) {
      records_.push_back(std::move(r));
      received_ms_.push_back(now);
    }
  }
  return true;
}

bool Collector::wait_assigned(std::chrono::milliseconds timeout) {
  return collect_until([this](const auto&) { return !consumer_.assignment().empty(); }, timeout);
}

std::optional<std::string> header(const connectors::Record& r, const std::string& name) {
  const auto* v = connectors::find_header(r.headers, name);
  if (v == nullptr || !v->has_value()) return std::nullopt;
  return **v;
}

std::vector<std::string> values_of(const std::vector<connectors::Record>& recs, const std::string& id) {
  std::vector<std::string> out;
  for (const auto& r : recs) {
    if (header(r, "job-id") == id) out.push_back(r.value.value_or(""));
  }
  std::sort(out.begin(), out.end());
  return out;
}

using connectors::Record;

std::vector<const Record*> of(const std::vector<Record>& recs, const std::string& topic, const std::string& id) {
  std::vector<const Record*> out;
  for (const auto& r : recs) {
    if (r.topic == topic && header(r, "job-id") == id) out.push_back(&r);
  }
  return out;
}

std::int64_t number(const std::optional<std::string>& text) { return text ? std::stoll(*text) : -1; }

std::vector<std::int64_t> numbers(const std::vector<const Record*>& recs, const std::string& name) {
  std::vector<std::int64_t> out;
  for (const auto* r : recs) out.push_back(number(header(*r, name)));
  return out;
}

bool react_until(Collector& c, std::size_t& handled, const std::function<void(const Record&)>& on_new,
                 const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  return c.collect_until(
      [&](const std::vector<Record>& recs) {
        while (handled < recs.size()) on_new(recs[handled++]);
        return done();
      },
      timeout);
}

void linger(Collector& c, std::chrono::milliseconds span) {
  c.collect_until([](const std::vector<Record>&) { return false; }, span);
}

int events(const std::vector<std::string>& history, const std::string& event, std::optional<std::int64_t> attempt) {
  int n = 0;
  for (const auto& line : history) {
    const auto sp = line.find(' ');
    if (sp == std::string::npos || line.compare(sp + 1, event.size() + 1, event + " ") != 0) continue;
    const std::string rest = line.substr(sp + 1 + event.size() + 1);
    if (!attempt || rest.substr(0, rest.find(' ')) == std::to_string(*attempt)) ++n;
  }
  return n;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::string log_text(const World& w) {
  std::ifstream log(w.log_path);
  std::stringstream text;
  text << log.rdbuf();
  return text.str();
}

JobReader::JobReader(const World& world)
    : world_(world),
      redis_(testing::connect_redis(world.redis_url)),
      store_(*redis_, storage::KeySchema(world.redis_prefix), 0) {}

std::vector<std::string> JobReader::fields(const std::vector<std::string>& job_ids, const std::string& name) {
  std::vector<std::string> out;
  for (auto& job : store_.get_many(job_ids)) {
    out.push_back(job && job->count(name) != 0 ? job->at(name) : "<none>");
  }
  return out;
}

std::optional<std::string> JobReader::field(const std::string& job_id, const std::string& name) {
  const std::string got = fields({job_id}, name).front();
  if (got == "<none>") return std::nullopt;
  return got;
}

std::string JobReader::raw_get(const std::string& key) {
  const auto reply = redis_->command({"GET", key});
  return reply.view().is_string() ? std::string(reply.view().str()) : std::string();
}

std::vector<std::string> JobReader::history(const std::string& job_id) {
  const auto shard = field(job_id, "shard");
  if (!shard) return {};
  const auto reply =
      redis_->command({"LRANGE", world_.redis_prefix + ":{" + *shard + "}:history:" + job_id, "0", "-1"});
  std::vector<std::string> out;
  const redis::ReplyView list = reply.view();
  for (std::size_t i = 0; i < list.size(); ++i) out.emplace_back(list[i].str());
  return out;
}

std::uint16_t free_port() { return testing::free_port(); }

std::string http_request(std::uint16_t port, const std::string& method, const std::string& path,
                         const std::string& headers, const std::string& body) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port}, ec);
  if (ec) return "";
  const std::string req =
      method + " " + path + " HTTP/1.0\r\n" + headers +
      (body.empty() ? ""
                    : "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n") +
      "\r\n" + body;
  boost::asio::write(socket, boost::asio::buffer(req), ec);
  std::string out;
  char buf[4096];
  while (!ec) {
    const std::size_t n = socket.read_some(boost::asio::buffer(buf), ec);
    out.append(buf, n);
  }
  return out;
}

std::string http_get(std::uint16_t port, const std::string& path) { return http_request(port, "GET", path, ""); }

std::string http_get_until_ok(std::uint16_t port, const std::string& path, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string got = http_get(port, path);
  while (got.find(" 200 ") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    got = http_get(port, path);
  }
  return got;
}

std::int64_t percentile(const std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace delayd::e2e
