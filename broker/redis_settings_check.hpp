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
// than none. Read once: a policy changed while delayd runs (CONFIG SET) is not seen until its
// next start; docs/operating/deploying.md says what to set.
// Threading: a pure function.
#pragma once

#include <string>
#include <vector>

namespace delayd::broker {

// What start-up does about the servers' settings.
struct RedisSettingsFindings {
  std::string refusal;                // the refusal's sentence; empty: start
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

}  // namespace delayd::broker
