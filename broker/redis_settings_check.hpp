// The Redis settings check: delayd refuses to start against a Redis that may drop the jobs waiting
// in it once it is full, instead of losing them without a trace later, and warns of one that
// forgets them at a restart.
//
// At start-up (broker/service.cpp), before any group is joined, every server that holds data
// (each primary of a Cluster) is asked INFO, and its maxmemory-policy classed
// (storage/redis_server_info.hpp):
//   a limit set and allkeys-*     refused: one sentence that says what to set, exit status 2 (a
//                                 deployment mistake, as the version interlock's refusals)
//   a limit set and volatile-*    a warning: settled jobs' records may go before their retention
//   no limit and allkeys-*        a warning: a limit set later would make it drop waiting jobs
//   a policy this build does not know   a warning
//   noeviction, or no limit with volatile-*   nothing said
// and its persistence: appendonly no is a warning (a restart forgets every job accepted or settled
// since the last snapshot), unless redis.wait_replicas asks replicas to acknowledge each batch
// (a deployment that keeps its jobs on replicas has chosen so).
// A server that does not answer INFO (an ACL without it, a proxy) is said once (info) and start-up
// goes on: delayd cannot see its policy, and a check that held delayd down for it would be worse
// than none.
//
// While delayd runs. A policy can change under a running instance (CONFIG SET, a failover to a
// replica configured otherwise), so the server watch (server_watch.hpp, a thread of its own) reads INFO again every
// redis.settings_check_interval_ms (60 s by default; 0: at start only) and hands the verdict to a
// RedisSettingsWatch. It cannot refuse to start any more, and stopping would not keep a job (the
// evicting server holds them all): a server that may now drop waiting jobs is a problem /healthz
// names (degraded, like a skewed clock: a restart would not mend it), the gauge
// delayd_redis_may_drop_waiting_jobs is 1 and the alert DelaydRedisMayDropJobs fires, and the log
// says it once at its start (critical) and once at its end. A warning not said before (at start or
// since) is logged once; what cannot be read is not said again; a Redis that does not answer
// skips the reading (the loop's own calls say that outage).
// Threading: judge_redis_settings() is a pure function; read_redis_settings() blocks on its client;
// a RedisSettingsWatch has one owner thread (the server watch's).
#pragma once

#include <string>
#include <vector>

#include "redis/client.hpp"

namespace delayd::broker {

// What start-up does about the servers' settings.
struct RedisSettingsFindings {
  // What makes a server unsafe (a limit with allkeys-*): one sentence naming it, the limit, the
  // policy and what to set; empty: none is. At start the refusal, at run time the problem.
  std::string refusal;
  std::vector<std::string> warnings;  // each said once, as a warning
  std::vector<std::string> unread;    // servers whose policy could not be read, said as info
};

// One server's answer to INFO (RedisClient::command_on_every_server()).
struct ServerInfo {
  std::string text;   // the reply's text
  std::string error;  // why there is no text (an error reply); empty when there is
};

// From each server's answer; `redis` names the servers in the sentences (redis.url, its password
// masked); `replicas_acknowledge`: redis.wait_replicas > 0. Identical sentences once.
RedisSettingsFindings judge_redis_settings(const std::vector<ServerInfo>& info, const std::string& redis,
                                           bool replicas_acknowledge);

// Asks every server that holds data INFO (RedisClient::command_on_every_server()): one answer a
// server, its text or why there is none. Throws redis::RedisIoError when Redis does not answer,
// or answers with a transient error (LOADING, ...): "not now".
std::vector<ServerInfo> read_redis_settings(redis::RedisClient& redis);

// What a running instance says of its servers' settings (the essay above, "While delayd runs").
// Invariants: problem() is the last verdict's refusal (empty: none); each warning is logged at most
// once over the instance's life.
class RedisSettingsWatch {
 public:
  // Starts from start-up's verdict, already logged: its warnings are not said again.
  explicit RedisSettingsWatch(const RedisSettingsFindings& at_start);

  // Notes a new verdict: logs the problem's start (critical) or end (info), and new warnings.
  void note(const RedisSettingsFindings& now);
  // What /healthz says; empty when no server may drop waiting jobs.
  const std::string& problem() const { return problem_; }

 private:
  std::string problem_;
  std::vector<std::string> said_;  // the warnings logged so far
};

}  // namespace delayd::broker
