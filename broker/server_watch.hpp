// ServerWatch: the slow looks at the servers and the host, on a thread of their own.
//
// Two of delayd's checks ask servers what cannot change by the millisecond: once a minute
// (duty::kClockCheck) this host's clock is compared with Redis's (TIME, clock_skew.hpp) and the
// kernel's word on it is read (ntp_adjtime, host_clock.hpp); every
// redis.settings_check_interval_ms every Redis server's settings are read again (INFO on each
// primary, redis_settings_check.hpp). Each is a round trip or more: on the scheduling loop, a
// Cluster of many primaries made the firing thread wait for as many INFO replies a minute, and a
// primary that did not answer held it for up to redis.timeout_ms. So they run here, on the
// thread "watch", over a Redis connection of their own, and the loop only reads their verdicts
// (findings(), a copy under a lock) into its snapshot: /healthz, the gauges and the log say
// what they said before, from another thread.
//
// What a look does, and when:
//   clock      at once, then every `Periods::clock`: the kernel's reading (HostClock logs its
//              changes), then Redis's TIME between two readings of this host's clock (ClockSkew
//              logs a difference beyond its bound, and its end)
//   settings   every `Periods::settings` from one period after start (start-up has just judged
//              them; none: never): the verdict handed to RedisSettingsWatch, which logs what
//              changed
// Errors: a Redis that does not answer, or answers "not now", skips the look until its next
// period, quietly (the loop's own calls say that outage); anything else a look throws is logged
// once as a warning (again only when its message changes) and skipped alike. Nothing leaves the
// thread; no look ends delayd.
// Invariants: findings() is what the last finished round of looks left (ClockSkew's problem and
// offset, HostClock's last reading, RedisSettingsWatch's problem); before the first round, the
// start-up verdict's problem and nothing else. `rounds` counts finished rounds and only grows.
// Threading: constructed and destroyed by its owner (the scheduling loop); findings() from any
// thread; the looks run on the watch's thread only, which owns ClockSkew, HostClock and
// RedisSettingsWatch. The destructor stops and joins it (it may wait for one Redis call, at
// most redis.timeout_ms).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "broker/clock_skew.hpp"
#include "broker/host_clock.hpp"
#include "broker/redis_settings_check.hpp"

namespace delayd::broker {

// What the watch has found so far (ServerWatch::findings()).
struct ServerFindings {
  std::string clock_problem;                // ClockSkew::problem(): empty when the clocks agree
  std::optional<double> clock_offset_s;     // this host's clock less Redis's, seconds; nullopt before an answer
  std::optional<HostClockSync> host_clock;  // the kernel's last reading; nullopt where it does not answer
  std::string redis_settings_problem;       // RedisSettingsWatch::problem(): empty when no server may drop jobs
  std::uint64_t rounds = 0;                 // rounds of looks finished (a look skipped counts as done)
};

class ServerWatch {
 public:
  // The looks, each called on the watch's thread only.
  struct Looks {
    std::function<std::optional<HostClockSync>()> host_clock;    // read_host_clock_sync()
    std::function<std::optional<std::int64_t>()> redis_time_us;  // redis::server_time_us(); may throw
    std::function<std::int64_t()> now_us;                        // this host's wall clock, epoch microseconds
    std::function<RedisSettingsFindings()> redis_settings;       // the servers' settings judged; may throw
  };
  struct Periods {
    std::chrono::milliseconds clock;                    // > 0 (duty::kClockCheck)
    std::optional<std::chrono::milliseconds> settings;  // > 0; nullopt: never
  };

  // Starts the thread; its first round (the clock's look) runs at once. `at_start`: start-up's
  // verdict on the settings, already logged (its warnings are not said again).
  ServerWatch(Looks looks, Periods periods, const RedisSettingsFindings& at_start);
  ~ServerWatch();
  ServerWatch(const ServerWatch&) = delete;
  ServerWatch& operator=(const ServerWatch&) = delete;

  // A copy of what the last finished round left. Never blocks on a look.
  ServerFindings findings() const;

 private:
  using Clock = std::chrono::steady_clock;

  void run();
  // One look at the clocks; one at the settings (each catches what its calls throw).
  void look_at_clock();
  void look_at_settings();
  // Logs a look's failure that is not Redis being out of reach, once per distinct message.
  void failed(const char* look, const std::string& what);

  Looks looks_;
  Periods periods_;
  // The watch thread's own (no lock: only it touches them after construction).
  ClockSkew clock_skew_;
  HostClock host_clock_;
  RedisSettingsWatch settings_watch_;
  std::string last_failure_;  // the last failure logged, "" after a look that worked

  mutable std::mutex mutex_;  // guards published_ and stop_
  std::condition_variable wake_;
  ServerFindings published_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace delayd::broker
