// RedisCluster (the slot router) against real Redis Cluster nodes that each test starts itself:
// redis-server --cluster-enabled yes on free loopback ports, in a temporary directory, joined
// with redis-cli --cluster create. The nodes die with the test process (PR_SET_PDEATHSIG) and
// are killed and removed by the fixture's destructor, also when a check fails.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redis/cluster.hpp"
#include "redis/url.hpp"
#include "storage/job_store.hpp"
#include "storage/lua_scripts.hpp"
#include "storage/script_libraries.hpp"
#include "support/free_port.hpp"
#include "support/lost_scripts.hpp"

using namespace delayd::storage;
using namespace delayd::redis;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
using Ids = std::vector<std::string>;

bool port_free(int port) { return delayd::testing::loopback_bind(port) == port; }

// A child process running argv, its output in `log`; it dies with this process.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
  }
  ::execvp(args[0], args.data());
  ::_exit(127);
}

// A Redis Cluster of `primaries` primaries with `replicas` replicas each, on 127.0.0.1.
class LocalCluster {
 public:
  LocalCluster(int primaries, int replicas) : replicas_(replicas) {
    char tmpl[] = "/tmp/delayd-cluster-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    const int n = primaries * (1 + replicas);
    std::mt19937 rng(static_cast<unsigned>(::getpid()) ^
                     static_cast<unsigned>(Clock::now().time_since_epoch().count()));
    for (int attempt = 0; attempt < 100 && ports_.empty(); ++attempt) {
      const int base = 20000 + static_cast<int>(rng() % 20000);  // bus ports (+10000) stay below 50000
      bool ok = true;
      for (int i = 0; i < n && ok; ++i) ok = port_free(base + i) && port_free(base + i + 10000);
      if (ok) {
        for (int i = 0; i < n; ++i) ports_.push_back(base + i);
      }
    }
    if (ports_.empty()) throw std::runtime_error("no free ports for a local cluster");
    for (int p : ports_) start(p);
    for (int p : ports_) wait_ping(p);
    std::string create = "redis-cli --cluster create";
    for (int p : ports_) create += " 127.0.0.1:" + std::to_string(p);
    create += " --cluster-replicas " + std::to_string(replicas) + " --cluster-yes";
    run(create);
    wait_healthy();
  }
  ~LocalCluster() {
    for (auto& [port, pid] : pids_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    std::error_code ec;
    if (!keep_) fs::remove_all(dir_, ec);
  }
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  RedisClusterOptions options() const {
    RedisClusterOptions o;
    for (int p : ports_) o.seeds.push_back({"127.0.0.1", p});
    return o;
  }
  // A shell command, output appended to the cluster's log; its exit status.
  int run(const std::string& cmd) const { return std::system((cmd + " >>" + dir_ + "/cli.log 2>&1").c_str()); }
  // The same in the background: its pid.
  pid_t run_async(const std::string& cmd) const { return spawn({"/bin/sh", "-c", cmd}, dir_ + "/cli.log"); }
  std::string node_id(int port) const {
    RedisConnection c(node_options(port));
    return std::string(c.command({"CLUSTER", "MYID"}).view().str());
  }
  void kill(int port) {
    ::kill(pids_.at(port), SIGKILL);
    ::waitpid(pids_.at(port), nullptr, 0);
    pids_.erase(port);
  }
  // Starts a killed node again with its nodes.conf: it rejoins, as a replica if it lost its slots.
  void restart(int port) {
    start(port);
    wait_ping(port);
  }
  // Every node answers cluster_state:ok and every replica's link to its primary is up.
  void wait_healthy() const {
    const auto deadline = Clock::now() + 30s;
    for (;;) {
      bool ok = true;
      for (const auto& [p, pid] : pids_) {
        try {
          RedisConnection c(node_options(p));
          const std::string info(c.command({"CLUSTER", "INFO"}).view().str());
          const std::string repl(c.command({"INFO", "replication"}).view().str());
          // A primary counts a replica for WAIT once it is online on its side (with diskless
          // sync that is after the replica's first ACK, a moment after the replica's link is up).
          std::size_t online = 0;
          for (auto at = repl.find("state=online"); at != std::string::npos; at = repl.find("state=online", at + 1))
            ++online;
          ok = ok && info.find("cluster_state:ok") != std::string::npos &&
               (repl.find("role:slave") == std::string::npos ? online >= static_cast<std::size_t>(replicas_)
                                                             : repl.find("master_link_status:up") != std::string::npos);
        } catch (const std::exception&) {
          ok = false;
        }
      }
      if (ok) return;
      if (Clock::now() > deadline) throw std::runtime_error("cluster not healthy after 30 s; see " + dir_);
      std::this_thread::sleep_for(100ms);
    }
  }
  const std::vector<int>& ports() const { return ports_; }
  void keep_on_failure() { keep_ = true; }

 private:
  static RedisOptions node_options(int port) {
    RedisOptions o;
    o.port = port;
    o.timeout_ms = 1000;
    return o;
  }
  void start(int port) {
    const std::string p = std::to_string(port);
    pids_[port] = spawn({"redis-server",
                         "--port",
                         p,
                         "--bind",
                         "127.0.0.1",
                         "--dir",
                         dir_,
                         "--cluster-enabled",
                         "yes",
                         "--cluster-config-file",
                         "nodes-" + p + ".conf",
                         "--cluster-node-timeout",
                         "1000",
                         "--save",
                         "",
                         "--appendonly",
                         "no",
                         "--repl-diskless-sync",
                         "yes",
                         "--repl-diskless-sync-delay",
                         "0",
                         "--protected-mode",
                         "no"},
                        dir_ + "/" + p + ".log");
  }
  static void wait_ping(int port) {
    const auto deadline = Clock::now() + 10s;
    for (;;) {
      try {
        RedisConnection c(node_options(port));
        if (c.command({"PING"}).view().is_string()) return;
      } catch (const RedisIoError&) {
      }
      if (Clock::now() > deadline)
        throw std::runtime_error("redis-server on " + std::to_string(port) + " did not start");
      std::this_thread::sleep_for(50ms);
    }
  }

  int replicas_ = 0;  // replicas per primary
  std::string dir_;
  std::vector<int> ports_;
  std::map<int, pid_t> pids_;
  bool keep_ = false;
};

NewJob job(const std::string& shard, const std::string& id, std::int64_t at) {
  NewJob j;
  j.job_id = id;
  j.deliver_at = at;
  j.business = "orders";
  j.shard = shard;
  j.key = "k-" + id;
  j.value = "v-" + id;
  return j;
}

// Shard names whose hash slot satisfies `want`, as many as asked.
template <class Pred>
std::vector<std::string> shards_where(std::size_t count, Pred want) {
  std::vector<std::string> out;
  for (int i = 0; out.size() < count && i < 1'000'000; ++i) {
    const std::string s = shard_id("ingest", i);
    if (want(redis_key_slot(s))) out.push_back(s);
  }
  return out;
}

// Repeats f until it stops throwing RedisIoError (the caller's retry-later, compressed).
template <class F>
auto retrying(F f, int* retries = nullptr) {
  const auto deadline = Clock::now() + 20s;
  for (;;) {
    try {
      return f();
    } catch (const RedisIoError&) {
      if (retries) ++*retries;
      if (Clock::now() > deadline) throw;
      std::this_thread::sleep_for(20ms);
    }
  }
}

}  // namespace

TEST_CASE("cluster: key slots follow the spec's CRC16 and hash tags", "[cluster]") {
  CHECK(redis_key_slot("123456789") == (0x31C3 % 16384));
  CHECK(redis_key_slot("foo") == 12182);
  CHECK(redis_key_slot("bar") == 5061);
  CHECK(redis_key_slot("{user1000}.following") == redis_key_slot("user1000"));
  CHECK(redis_key_slot("{user1000}.following") == redis_key_slot("{user1000}.followers"));
  CHECK(redis_key_slot("foo{}{bar}") == redis_key_slot("foo{}{bar}"));
  CHECK(redis_key_slot("foo{}{bar}") != redis_key_slot("bar"));  // an empty tag: the whole key
  CHECK(redis_key_slot("foo{{bar}}zap") == redis_key_slot("{bar"));
  CHECK(redis_key_slot("foo{bar}{zap}") == redis_key_slot("bar"));
  const KeySchema keys("p");
  CHECK(redis_key_slot(keys.job("t:3", "a")) == redis_key_slot(keys.pending("t:3")));
  CHECK(redis_key_slot(keys.delay_records("t:3")) == redis_key_slot(keys.pending("t:3")));
  CHECK(redis_key_slot(keys.stats("t:3")) == redis_key_slot("t:3"));
}

TEST_CASE("cluster: urls name the seeds", "[cluster]") {
  const RedisTarget t = parse_redis_target("redis-cluster://:pw@127.0.0.1:17001,[::1]:17002,h3");
  REQUIRE(t.is_cluster());
  CHECK(t.cluster_seeds ==
        std::vector<std::pair<std::string, int>>{{"127.0.0.1", 17001}, {"::1", 17002}, {"h3", 6379}});
  CHECK(t.options.password == "pw");
  CHECK(t.options.host == "127.0.0.1");
  CHECK(parse_redis_url("redis-cluster://a:1,b:2/0").port == 1);
  CHECK_FALSE(parse_redis_target("redis://a:1").is_cluster());
  for (const char* bad : {"redis-cluster://", "redis-cluster://a:1,", "redis-cluster://,a:1", "redis-cluster://a:1/2",
                          "redis://a:1,b:2", "redis-cluster://a:x"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_redis_target(bad), std::invalid_argument);
  }
  CHECK(mask_redis_url("redis-cluster://u:secret@a:1,b:2") == "redis-cluster://u:***@a:1,b:2");
}

TEST_CASE("cluster: commands go to their slot's primary, cross-slot ones are refused, scripts load everywhere",
          "[cluster]") {
  LocalCluster lc(3, 0);
  RedisCluster redis(lc.options());
  REQUIRE(redis.primaries().size() == 3);

  // Every key lands on its slot's primary: each node holds exactly the keys of its slots.
  std::vector<Command> sets;
  for (int i = 0; i < 60; ++i) sets.push_back({"SET", "route:" + std::to_string(i), std::to_string(i)});
  for (const auto& r : redis.pipeline(sets)) CHECK(r.view().str() == "OK");
  for (int i = 0; i < 60; ++i) {
    const std::string key = "route:" + std::to_string(i);
    const auto owner = redis.slot_owner(redis_key_slot(key));
    REQUIRE(owner);
    CHECK(redis.command_on(*owner, {"GET", key}).view().str() == std::to_string(i));
  }
  std::vector<Command> gets;
  for (int i = 59; i >= 0; --i) gets.push_back({"GET", "route:" + std::to_string(i)});
  const auto got = redis.pipeline(gets);
  for (int i = 0; i < 60; ++i) CHECK(got[static_cast<std::size_t>(i)].view().str() == std::to_string(59 - i));
  CHECK(redis.stats().moved == 0);

  // Keys of one tag share a slot; keys of two are refused before they are sent.
  CHECK(redis.command({"DEL", "{a}x", "{a}y"}).view().integer() == 0);
  const auto cross = redis.command({"DEL", "{a}x", "{b}y"});
  REQUIRE(cross.view().is_error());
  CHECK(cross.view().error().starts_with("CROSSSLOT"));
  const auto cross_eval = redis.command({"EVAL", "return 1", "2", "{a}x", "{b}y"});
  CHECK(cross_eval.view().error().starts_with("CROSSSLOT"));
  CHECK(redis.command({"EVAL", "return KEYS[1]", "1", "{b}y"}).view().str() == "{b}y");
  CHECK(redis.stats().cross_slot == 2);

  // SCRIPT LOAD reaches every primary, so EVALSHA works on any slot.
  const std::string sha(redis.command({"SCRIPT", "LOAD", "return 'cl'"}).view().str());
  for (const auto& node : redis.primaries()) {
    CHECK(redis.command_on(node, {"SCRIPT", "EXISTS", sha}).view()[0].integer() == 1);
  }
  for (const char* k : {"a", "b", "c", "d", "e"}) CHECK(redis.command({"EVALSHA", sha, "1", k}).view().str() == "cl");

  // A JobStore round through the router, with shards on every primary.
  const KeySchema keys("tcl");
  JobStore store(redis, keys, 3600);
  std::set<std::string> owners;
  std::vector<NewJob> jobs;
  Ids shards;
  for (int p = 0; p < 6; ++p) {
    const std::string shard = shard_id("ingest", p);
    shards.push_back(shard);
    owners.insert(redis.slot_owner(redis_key_slot(shard))->to_string());
    for (int j = 0; j < 20; ++j) jobs.push_back(job(shard, "j" + std::to_string(p) + "-" + std::to_string(j), 100 + j));
  }
  CHECK(owners.size() >= 2);
  for (const auto& o : store.accept(jobs, 1)) CHECK(o.created());
  for (const auto& shard : shards) {
    const auto pending = store.pending_between(shard, std::nullopt, 1000, 0);
    REQUIRE(pending.size() == 20);
    Ids ids;
    for (const auto& e : pending) ids.push_back(e.job_id);
    for (const auto& c : store.claim(shard, ids, 200)) CHECK(c.kind == Claim::Kind::deliver);
    for (const auto& t : store.mark_ready(shard, ids, 201)) CHECK(t.changed);
    CHECK(store.pending_between(shard, std::nullopt, 1000, 0).empty());
  }
  CHECK(store.get("j3-7")->at("state") == "ready");
  CHECK(store.stats().pending == 0);

  // Flushed scripts come back through JobStore's NOSCRIPT path, on every primary.
  delayd::testing::lose_scripts(redis);
  CHECK(store.accept(std::vector<NewJob>{job(shards[0], "after-flush", 5)}, 1)[0].created());
  redis.wait_replicas(0, 10);  // no replicas asked for: nothing to wait for

  // Posted accepts through the router (run at collect, in order), across every primary; a post
  // that meets lost scripts is an I/O error, after which the scripts are back.
  std::vector<NewJob> first, second;
  for (const auto& shard : shards) {
    first.push_back(job(shard, "posted-" + shard, 300));
    second.push_back(job(shard, "posted-" + shard, 400));  // the same ids: the first post wins
  }
  auto p1 = store.accept_post(first, 1);
  auto p2 = store.accept_post(second, 1);
  for (const auto& o : store.accept_collect(p1)) CHECK(o.created());
  for (const auto& o : store.accept_collect(p2)) {
    CHECK(o.kind == AcceptKind::existed);
    CHECK(o.deliver_at == 300);
  }
  delayd::testing::lose_scripts(redis);
  auto lost = store.accept_post(std::vector<NewJob>{job(shards[1], "posted-after-flush", 5)}, 1);
  CHECK_THROWS_AS(store.accept_collect(lost), RedisIoError);
  auto again = store.accept_post(std::vector<NewJob>{job(shards[1], "posted-after-flush", 5)}, 1);
  CHECK(store.accept_collect(again)[0].created());
}

TEST_CASE("cluster: delayd's libraries are loaded, listed and pruned on every primary", "[cluster][scripts]") {
  LocalCluster lc(3, 0);
  RedisCluster redis(lc.options());
  const auto primaries = redis.primaries();
  REQUIRE(primaries.size() == 3);
  const std::string ours = delayd::storage::lua::library_name();
  const auto has = [&](const RedisNodeAddress& node, const std::string& name) {
    const auto r = redis.command_on(node, {"FUNCTION", "LIST", "LIBRARYNAME", name});
    return r.view().is_array() && r.view().size() == 1;
  };
  const KeySchema keys("tlib");
  { JobStore first(redis, keys, 3600); }
  for (const auto& node : primaries) CHECK(has(node, ours));

  // A primary that lacks the library (one added to the cluster, one whose functions were
  // flushed) gets it when a store is made, before any call: the others' answers do not hide it.
  REQUIRE(redis.command_on(primaries.back(), {"FUNCTION", "DELETE", ours}).view().str() == "OK");
  REQUIRE_FALSE(has(primaries.back(), ours));
  { JobStore second(redis, keys, 3600); }
  CHECK(has(primaries.back(), ours));

  // Another build's library that only the last primary holds is listed, and pruned there.
  const std::string older = "delayd_00000000000000ee";
  const std::string text =
      "#!lua name=" + older + "\nredis.register_function('" + older + "_x', function() return 1 end)\n";
  REQUIRE_FALSE(redis.command_on(primaries.back(), {"FUNCTION", "LOAD", text}).view().is_error());
  const auto listed = delayd::storage::script_libraries(redis);
  REQUIRE(listed.size() == 2);  // each once, however many primaries hold it
  CHECK(listed[0].name == older);
  CHECK_FALSE(listed[0].this_build);
  CHECK(listed[1].name == ours);
  CHECK(listed[1].this_build);
  CHECK(delayd::storage::prune_script_libraries(redis) == std::vector<std::string>{older});
  CHECK_FALSE(has(primaries.back(), older));
  for (const auto& node : primaries) CHECK(has(node, ours));
  CHECK(delayd::storage::script_libraries(redis).size() == 1);
}

TEST_CASE("cluster: a migrating slot is followed with ASK, a moved one with MOVED", "[cluster]") {
  LocalCluster lc(3, 0);
  RedisCluster redis(lc.options());
  const KeySchema keys("task");
  JobStore store(redis, keys, 3600);
  const std::string shard = shard_id("ingest", 0);
  const int slot = redis_key_slot(shard);
  const RedisNodeAddress from = *redis.slot_owner(slot);
  RedisNodeAddress to;
  for (const auto& n : redis.primaries()) {
    if (!(n == from)) to = n;
  }
  std::vector<NewJob> jobs;
  for (int j = 0; j < 10; ++j) jobs.push_back(job(shard, "a" + std::to_string(j), 100));
  store.accept(jobs, 1);

  // Half-way through a migration: the shard's hash of delay records (every job's record here)
  // is on the target already.
  const std::string from_id = lc.node_id(from.port), to_id = lc.node_id(to.port);
  const std::string s = std::to_string(slot);
  REQUIRE(redis.command_on(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", from_id}).view().str() == "OK");
  REQUIRE(redis.command_on(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", to_id}).view().str() == "OK");
  const std::string moved_key = keys.delay_records(shard);
  REQUIRE(redis.command_on(from, {"MIGRATE", to.host, std::to_string(to.port), moved_key, "0", "5000"}).view().str() ==
          "OK");

  // A single key that moved: ASK, followed (ASKING + the command on the target), map unchanged.
  const auto moved_record = redis.command({"HGET", moved_key, "a0"});
  REQUIRE(moved_record.view().is_string());
  CHECK(moved_record.view().str().starts_with("delay"));
  CHECK(redis.stats().asked == 1);
  CHECK(*redis.slot_owner(slot) == from);
  // A key that did not move is still served by the source.
  CHECK(redis.command({"ZCARD", keys.pending(shard)}).view().integer() > 0);
  // A script over keys of which some moved: TRYAGAIN, which the caller sees as transient.
  CHECK_THROWS_AS(store.claim(shard, Ids{"a0", "a1"}, 200), RedisIoError);

  // The rest moves, the slot is handed over: the next call meets MOVED, follows it and
  // reads the map again.
  for (;;) {
    const auto r = redis.command_on(from, {"CLUSTER", "GETKEYSINSLOT", s, "100"});
    if (r.view().size() == 0) break;
    Command migrate{"MIGRATE", to.host, std::to_string(to.port), "", "0", "5000", "KEYS"};
    for (std::size_t i = 0; i < r.view().size(); ++i) migrate.emplace_back(r.view()[i].str());
    REQUIRE(redis.command_on(from, migrate).view().str() == "OK");
  }
  for (int port : lc.ports()) {
    RedisOptions o;
    o.port = port;
    RedisConnection(o).command({"CLUSTER", "SETSLOT", s, "NODE", to_id});
  }
  const auto refreshes = redis.stats().refreshes;
  const auto claims = store.claim(shard, Ids{"a0", "a1", "a2"}, 200);
  for (const auto& c : claims) CHECK(c.kind == Claim::Kind::deliver);
  CHECK(redis.stats().moved >= 1);
  CHECK(redis.stats().refreshes > refreshes);
  CHECK(*redis.slot_owner(slot) == to);
  CHECK(store.pending_between(shard, std::nullopt, 1000, 0).size() == 10);
}

TEST_CASE("cluster: redis-cli --cluster reshard while JobStore calls run", "[cluster]") {
  LocalCluster lc(3, 0);
  RedisCluster redis(lc.options());
  const KeySchema keys("tmv");
  JobStore store(redis, keys, 3600);
  // The node with slot 0 gives away its first 400 slots; the shards live in them.
  const RedisNodeAddress from = *redis.slot_owner(0);
  RedisNodeAddress to;
  for (const auto& n : redis.primaries()) {
    if (!(n == from)) to = n;
  }
  const Ids shards = shards_where(4, [](int slot) { return slot < 400; });
  REQUIRE(shards.size() == 4);

  std::set<std::string> accepted, marked;
  int round = 0;
  int retries = 0;
  auto one_round = [&] {
    std::vector<NewJob> jobs;
    for (const auto& shard : shards) {
      for (int j = 0; j < 25; ++j)
        jobs.push_back(job(shard, "r" + std::to_string(round) + "-" + std::to_string(j), 100));
    }
    retrying([&] { return store.accept(jobs, 1); }, &retries);
    for (const auto& j : jobs) accepted.insert(j.shard + "/" + j.job_id);
    // Finish the previous round's jobs of every shard.
    for (const auto& shard : shards) {
      const auto pending = retrying([&] { return store.pending_between(shard, std::nullopt, 1000, 0); }, &retries);
      Ids ids;
      for (const auto& e : pending) {
        if (!e.job_id.starts_with("r" + std::to_string(round) + "-")) ids.push_back(e.job_id);
      }
      if (ids.empty()) continue;
      retrying([&] { return store.claim(shard, ids, 200); }, &retries);
      retrying([&] { return store.mark_ready(shard, ids, 201); }, &retries);
      for (const auto& id : ids) marked.insert(shard + "/" + id);
    }
    ++round;
  };
  for (int i = 0; i < 5; ++i) one_round();

  const pid_t reshard =
      lc.run_async("redis-cli --cluster reshard " + from.to_string() + " --cluster-from " + lc.node_id(from.port) +
                   " --cluster-to " + lc.node_id(to.port) + " --cluster-slots 400 --cluster-yes --cluster-pipeline 5");
  int status = -1;
  const auto deadline = Clock::now() + 30s;
  while (::waitpid(reshard, &status, WNOHANG) == 0 && Clock::now() < deadline) one_round();
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  for (int i = 0; i < 5; ++i) one_round();

  INFO("rounds " << round << ", retries " << retries << ", moved " << redis.stats().moved << ", asked "
                 << redis.stats().asked);
  for (const auto& shard : shards) CHECK(*redis.slot_owner(redis_key_slot(shard)) == to);
  CHECK(redis.stats().moved >= 1);
  // Nothing lost: every job accepted is either finished or still pending.
  std::size_t pending = 0;
  for (const auto& shard : shards) pending += store.pending_between(shard, std::nullopt, 1000, 0).size();
  CHECK(pending + marked.size() == accepted.size());
  for (const auto& shard : shards) {
    const auto pending_ids = store.pending_between(shard, std::nullopt, 1000, 0);
    for (const auto& e : pending_ids) CHECK(store.get(e.job_id)->at("state") == "delay");
  }
  const std::string a_marked = *marked.begin();
  CHECK(store.get(a_marked.substr(a_marked.find('/') + 1))->at("state") == "ready");
}

TEST_CASE("cluster: a primary fails over while jobs flow, and with wait_replicas = 1 nothing acknowledged is lost",
          "[cluster]") {
  LocalCluster lc(3, 1);
  RedisCluster redis(lc.options());
  const KeySchema keys("tfo");
  JobStore store(redis, keys, 3600);
  Ids shards;
  for (int p = 0; p < 6; ++p) shards.push_back(shard_id("ingest", p));
  const std::string victim_shard = shards.front();
  const RedisNodeAddress victim = *redis.slot_owner(redis_key_slot(victim_shard));

  // WAIT's own timeout: long enough that a busy machine (the sanitizer pass) does not time out a
  // healthy replica's acknowledgement, which the check before the kill would count as a failure.
  constexpr int kWaitMs = 2000;
  std::vector<std::string> acknowledged;  // accepted and WAITed for: must survive
  int batch_no = 0;
  int failed_batches = 0;
  std::vector<std::string> failures;  // each failed attempt's error, for the report
  std::optional<Clock::time_point> killed_at;
  bool restarted = false;
  // One ingest chunk: accept, then WAIT, as IngestPath does; on RedisIoError the same chunk again.
  // The killed primary is started again 3 s after it died (from this thread: its children die
  // with the thread that started them): it rejoins as the new primary's replica, so WAIT 1 can
  // succeed there again.
  auto chunk = [&] {
    std::vector<NewJob> jobs;
    for (const auto& shard : shards) {
      for (int j = 0; j < 10; ++j)
        jobs.push_back(job(shard, "f" + std::to_string(batch_no) + "-" + std::to_string(j), 100));
    }
    const auto deadline = Clock::now() + 40s;
    for (;;) {
      if (killed_at && !restarted && Clock::now() - *killed_at > 3s) {
        lc.restart(victim.port);
        restarted = true;
      }
      try {
        store.accept(jobs, 1);
        redis.wait_replicas(1, kWaitMs);
        break;
      } catch (const RedisIoError& e) {
        ++failed_batches;
        failures.push_back(e.what());
        if (Clock::now() > deadline) throw;
        std::this_thread::sleep_for(50ms);
      }
    }
    for (const auto& j : jobs) acknowledged.push_back(j.job_id + "@" + j.shard);
    ++batch_no;
  };
  for (int i = 0; i < 10; ++i) chunk();
  INFO("before the kill: " << (failures.empty() ? std::string("no failure") : failures.front()));
  CHECK(failed_batches == 0);

  lc.kill(victim.port);
  killed_at = Clock::now();
  for (int i = 0; i < 10; ++i) chunk();
  const auto recovered_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - *killed_at).count();

  INFO("chunks " << batch_no << ", failed attempts " << failed_batches << ", recovered after " << recovered_ms
                 << " ms");
  CHECK(failed_batches > 0);
  const auto new_owner = redis.slot_owner(redis_key_slot(victim_shard));
  REQUIRE(new_owner);
  CHECK_FALSE(*new_owner == victim);
  // Reads resume, and every acknowledged job is there.
  std::size_t pending = 0;
  for (const auto& shard : shards) pending += store.pending_between(shard, std::nullopt, 1000, 0).size();
  CHECK(pending == acknowledged.size());
  std::size_t missing = 0;
  for (const auto& a : acknowledged) {
    const std::string id = a.substr(0, a.find('@'));
    const std::string shard = a.substr(a.find('@') + 1);
    const auto r = redis.command({"HEXISTS", keys.delay_records(shard), id});  // a delay job's record
    if (r.view().integer() != 1) ++missing;
  }
  CHECK(missing == 0);
}
