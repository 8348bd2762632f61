// Redis faults while jobs are due and arriving; delayd is expected to ride each of them out:
// every job delivered, none early, and the delayd started at the beginning never exits.
//
//   redis_restart_aof   redis-server stopped (SIGTERM: it fsyncs its AOF, as SHUTDOWN does) and
//                       started again on the same data dir; it replays its AOF and answers
//                       LOADING meanwhile. So that delayd surely meets LOADING (its reconnects
//                       back off, 0.1 s doubling), the case rewrites the AOF first and restarts
//                       Redis with a key-load-delay sized to make loading last about 4 s.
//                       The one instance is its groups' only member: past
//                       redis.leave_group_after_ms (3 s) it keeps its shards and says so, since
//                       nobody could take them ("groups left" 0).
//   redis_client_pause  CLIENT PAUSE 3000 ALL: Redis answers nobody for 3 s.
//   redis_debug_sleep   DEBUG SLEEP 3: the server is blocked for 3 s (connections stay open,
//                       commands time out). Needs enable-debug-command, which scripts/stack.sh
//                       turns on for loopback; a Redis started before that is restarted first.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "chaos_support.hpp"

using namespace delayd::chaos;
using namespace std::chrono_literals;

namespace {

// Jobs published a few at a time while a fault runs on another thread, due within 3 s of their
// publication; the rest after the fault, so that exactly n are sent.
void publish_during(Sender& pub, ReadyWatcher& ready, Expected& expected, const std::atomic<bool>& fault_done,
                    const std::string& prefix, int n) {
  int sent = 0;
  while (sent < n && !fault_done) {
    Expected batch;
    for (int i = 0; i < 10 && sent < n; ++i, ++sent) {
      const std::string id = prefix + std::to_string(sent);
      const std::int64_t at = now_ms() + (sent * 37) % 3000;
      expected[id] = at;
      pub.send(delayd::e2e::job_at(id, at, "value of " + id));
    }
    pub.poll();
    ready.poll(50ms);
  }
  while (sent < n) {
    const std::string id = prefix + std::to_string(sent++);
    const std::int64_t at = now_ms() + (sent * 37) % 3000;
    expected[id] = at;
    pub.send(delayd::e2e::job_at(id, at, "value of " + id));
  }
}

// BGREWRITEAOF, and waits until it is done: every key is then in the AOF's RDB base, which
// is what key-load-delay slows down when Redis loads it.
void rewrite_aof(delayd::redis::RedisConnection& redis) {
  const auto r = redis.command({"BGREWRITEAOF"});
  INFO("BGREWRITEAOF: " << (r.view().is_error() ? r.view().error() : std::string(r.view().str())));
  REQUIRE_FALSE(r.view().is_error());
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    const std::string info(redis.command({"INFO", "persistence"}).view().str());
    if (info.find("aof_rewrite_in_progress:0") != std::string::npos &&
        info.find("aof_rewrite_scheduled:0") != std::string::npos) {
      return;
    }
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(20ms);
  }
}

// A key-load-delay that makes loading `keys` keys take about `target_ms`. Redis sleeps
// usleep(delay) per key when delay > 0, and usleep(1) for one key in N when delay = -N;
// usleep costs some 75 us here whatever it is asked.
std::string key_load_delay(long long keys, std::int64_t target_ms) {
  constexpr double kSleepCostUs = 75;
  const double per_key_us = static_cast<double>(target_ms) * 1000.0 / static_cast<double>(std::max(keys, 1LL));
  if (per_key_us >= 2 * kSleepCostUs) return std::to_string(static_cast<long long>(per_key_us - kSleepCostUs));
  if (per_key_us >= kSleepCostUs) return "1";
  return std::to_string(-std::max(2LL, static_cast<long long>(kSleepCostUs / per_key_us)));
}

}  // namespace

constexpr long long kFillerKeys = 40000;

TEST_CASE("redis_restart_aof", "[chaos]") {
  World w("chaos-redis-restart");
  w.create_topics({"orders"});
  ServerGuard guard("redis");
  std::string delay;
  {
    auto redis = redis_for(w, 10000);
    // The delay applies to every key the AOF loads, the case's own writes after the rewrite too
    // (some 30 000 commands): on a Redis of a few keys it would be tens of milliseconds a key and
    // the loading minutes long. Filler keys of the world's make it 100 us a key or less.
    const long long have = redis.command({"DBSIZE"}).view().integer();
    for (long long i = have; i < kFillerKeys; i += 1000) {
      std::vector<std::string> mset{"MSET"};
      for (long long k = i; k < std::min(i + 1000, kFillerKeys); ++k) {
        mset.push_back(w.redis_prefix + ":filler:" + std::to_string(k));
        mset.push_back("x");
      }
      redis.command(mset);
    }
    rewrite_aof(redis);
    delay = key_load_delay(redis.command({"DBSIZE"}).view().integer(), 4000);
  }
  ReadyWatcher ready(w, {w.ready_topic("orders")});
  Expected expected;
  DelaydProcess delayd(w);
  CaseLine line("redis_restart_aof", expected, ready, [&] { return up_word(delayd); });
  REQUIRE(start_delayd(delayd));
  std::int64_t gap_ms = 0;

  Sender pub(w);
  publish_spread(pub, expected, "before-", 2700, now_ms() + 500, 6000);
  pub.flush();
  ready.poll_until([&] { return ready.seen_of(expected) >= 200 || !delayd.running(); }, 30s);

  {
    RedisPinger pinger(w);
    std::atomic<bool> done{false};
    ScriptResult restart;
    std::jthread fault([&] {
      // SIGTERM (Redis fsyncs its AOF, as SHUTDOWN does), then start on the same data dir; it
      // replays the AOF, slowed down so that it answers LOADING for about 4 s.
      restart = run_stack_script({"restart", "redis"}, {{"DELAYD_REDIS_EXTRA_ARGS", "--key-load-delay " + delay}});
      done = true;
    });
    publish_during(pub, ready, expected, done, "during-", 300);
    while (!done) ready.poll(50ms);
    fault.join();
    pinger.stop();
    line.note("LOADING for ms", pinger.saw_loading() ? std::to_string(pinger.loading_ms()) : "none seen");
    line.note("redis not answering ms", std::to_string(pinger.longest_gap_ms()));
    gap_ms = pinger.longest_gap_ms();
    INFO("scripts/stack.sh restart redis:\n" << restart.output);
    REQUIRE(restart.status == 0);
    redis_for(w).command({"CONFIG", "SET", "key-load-delay", "0"});
  }
  pub.flush();

  settle(ready, expected, delayd, 45s);
  const std::string up = up_word(delayd);
  const std::size_t left = delayd::e2e::groups_left(w.log_path);
  const std::size_t kept = delayd::e2e::count_in_log(w.log_path, "has no other member that could take");
  line.note("groups left", std::to_string(left));
  line.note("groups kept alone", std::to_string(kept));
  const Tally t = line.print();
  check_outcome(t, w, true, up);
  CHECK(left == 0);
  // Redis out for longer than redis.leave_group_after_ms (3 s) and a margin: the keeping said.
  if (gap_ms >= 3500) CHECK(kept > 0);
  if (delayd.running()) delayd.stop();
  auto redis = redis_for(w);
  for (long long i = 0; i < kFillerKeys; i += 1000) {
    std::vector<std::string> unlink{"UNLINK"};
    for (long long k = i; k < std::min(i + 1000, kFillerKeys); ++k)
      unlink.push_back(w.redis_prefix + ":filler:" + std::to_string(k));
    redis.command(unlink);
  }
}

TEST_CASE("redis_client_pause", "[chaos]") {
  World w("chaos-redis-pause");
  w.create_topics({"orders"});
  ReadyWatcher ready(w, {w.ready_topic("orders")});
  Expected expected;
  DelaydProcess delayd(w);
  CaseLine line("redis_client_pause", expected, ready, [&] { return up_word(delayd); });
  REQUIRE(start_delayd(delayd));

  Sender pub(w);
  publish_spread(pub, expected, "before-", 1500, now_ms() + 500, 6000);
  pub.flush();
  ready.poll_until([&] { return ready.seen_of(expected) >= 100 || !delayd.running(); }, 30s);

  const RedisPause pause(w, 3000ms);
  // The pause ends by itself after 3 s; jobs keep arriving meanwhile.
  std::atomic<bool> over{false};
  const std::int64_t pause_end = now_ms() + 3000;
  std::jthread clock([&] {
    while (now_ms() < pause_end) std::this_thread::sleep_for(10ms);
    over = true;
  });
  publish_during(pub, ready, expected, over, "during-", 500);
  clock.join();
  pub.flush();

  settle(ready, expected, delayd, 30s);
  const std::string up = up_word(delayd);
  const Tally t = line.print();
  check_outcome(t, w, true, up);
  if (delayd.running()) delayd.stop();
}

TEST_CASE("redis_debug_sleep", "[chaos]") {
  World w("chaos-redis-sleep");
  w.create_topics({"orders"});
  ServerGuard guard("redis");
  {
    auto redis = redis_for(w);
    const auto r = redis.command({"DEBUG", "SLEEP", "0"});
    if (r.view().is_error()) {
      // A Redis started before scripts/stack.sh allowed DEBUG: restart it with the current flags.
      UNSCOPED_INFO("DEBUG refused (" << r.view().error() << "); restarting redis with enable-debug-command");
      restart_server("redis");
      auto again = redis_for(w);
      REQUIRE(again.command({"DEBUG", "SLEEP", "0"}).view().str() == "OK");
    }
  }
  ReadyWatcher ready(w, {w.ready_topic("orders")});
  Expected expected;
  DelaydProcess delayd(w);
  CaseLine line("redis_debug_sleep", expected, ready, [&] { return up_word(delayd); });
  REQUIRE(start_delayd(delayd));

  Sender pub(w);
  publish_spread(pub, expected, "before-", 1500, now_ms() + 500, 6000);
  pub.flush();
  ready.poll_until([&] { return ready.seen_of(expected) >= 100 || !delayd.running(); }, 30s);

  std::atomic<bool> done{false};
  std::string sleep_reply;
  std::jthread fault([&] {
    try {
      auto redis = redis_for(w, 10000);
      sleep_reply = std::string(redis.command({"DEBUG", "SLEEP", "3"}).view().str());
    } catch (const std::exception& e) {
      sleep_reply = e.what();
    }
    done = true;
  });
  publish_during(pub, ready, expected, done, "during-", 500);
  fault.join();
  line.note("DEBUG SLEEP answered", sleep_reply);
  pub.flush();

  settle(ready, expected, delayd, 30s);
  const std::string up = up_word(delayd);
  const Tally t = line.print();
  check_outcome(t, w, true, up);
  CHECK(sleep_reply == "OK");
  if (delayd.running()) delayd.stop();
}
