#include "broker/redis_settings_check.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "redis/connection.hpp"
#include "storage/redis_server_info.hpp"

namespace delayd::broker {

namespace {

std::string mib(std::uint64_t bytes) { return std::to_string((bytes + (1U << 20) - 1) >> 20) + " MiB"; }

void add_once(std::vector<std::string>& to, std::string sentence) {
  if (std::find(to.begin(), to.end(), sentence) == to.end()) to.push_back(std::move(sentence));
}

}  // namespace

RedisSettingsFindings judge_redis_settings(const std::vector<ServerInfo>& info, const std::string& redis,
                                           bool replicas_acknowledge) {
  RedisSettingsFindings out;
  const std::string servers = info.size() > 1 ? "a primary of redis " + redis : "redis " + redis;
  for (const auto& server : info) {
    if (!server.error.empty()) {
      add_once(out.unread, "redis " + redis + ": its eviction policy could not be read (INFO: " + server.error +
                               "); delayd expects maxmemory-policy noeviction, so that a full Redis refuses "
                               "writes rather than dropping waiting jobs");
      continue;
    }
    if (storage::parse_aof_enabled(server.text) == false && !replicas_acknowledge) {
      add_once(out.warnings, servers +
                                 " keeps no append-only file (appendonly no): a restart forgets what it was told since "
                                 "its last snapshot, so a job accepted since is lost and one delivered since is "
                                 "delivered again. Set appendonly yes (appendfsync everysec: at most its last second), "
                                 "or redis.wait_replicas for replicas that take over");
    }
    const auto policy = storage::parse_eviction_policy(server.text);
    if (!policy) {
      add_once(out.unread, "redis " + redis +
                               ": its eviction policy could not be read (INFO names no maxmemory_policy); "
                               "delayd expects maxmemory-policy noeviction");
      continue;
    }
    const std::string named = "maxmemory-policy " + policy->policy;
    switch (policy->eviction()) {
      case storage::Eviction::none:
        break;
      case storage::Eviction::any_key:
        if (policy->drops_waiting_jobs()) {
          if (out.refusal.empty()) {
            out.refusal = servers + " may drop any key once it holds its maxmemory (" + mib(policy->maxmemory) +
                          "): " + named +
                          " would take jobs waiting in it, undelivered and without a trace. Set maxmemory-policy "
                          "noeviction on it (a full Redis then refuses writes, an outage delayd rides out with "
                          "nothing lost), or give delayd a Redis of its own";
          }
        } else {
          add_once(out.warnings, servers + " has " + named +
                                     " and no maxmemory: should a limit be set, it would drop jobs waiting in it; "
                                     "set maxmemory-policy noeviction");
        }
        break;
      case storage::Eviction::settled_only:
        if (policy->maxmemory > 0) {
          add_once(out.warnings, servers + " drops keys with a time to live once it holds its maxmemory (" +
                                     mib(policy->maxmemory) + ", " + named +
                                     "): settled jobs' records may go before redis.job_retention_s ends (a "
                                     "lookup then finds none); waiting jobs have none and stay. noeviction keeps "
                                     "them");
        }
        break;
      case storage::Eviction::unknown:
        add_once(out.warnings, servers + " has " + named +
                                   ", a policy this delayd does not know: with noeviction nothing of delayd's is "
                                   "dropped");
        break;
    }
  }
  return out;
}

std::vector<ServerInfo> read_redis_settings(redis::RedisClient& redis) {
  std::vector<ServerInfo> answers;
  for (const auto& reply : redis.command_on_every_server({"INFO"})) {
    const auto view = reply.view();
    if (view.is_error() && redis::is_transient_error_reply(view.error())) {
      throw redis::RedisIoError("INFO: " + view.error());
    }
    if (view.is_string()) {
      answers.push_back({std::string(view.str()), ""});
    } else {
      answers.push_back({"", view.is_error() ? view.error() : "not a text reply"});
    }
  }
  return answers;
}

RedisSettingsWatch::RedisSettingsWatch(const RedisSettingsFindings& at_start)
    : problem_(at_start.refusal), said_(at_start.warnings) {}

void RedisSettingsWatch::note(const RedisSettingsFindings& now) {
  for (const auto& warning : now.warnings) {
    if (std::find(said_.begin(), said_.end(), warning) != said_.end()) continue;
    spdlog::warn("{}", warning);
    said_.push_back(warning);
  }
  if (now.refusal == problem_) return;
  if (!now.refusal.empty()) {
    spdlog::critical("{} (its settings changed while delayd runs; /healthz is degraded until they are safe)",
                     now.refusal);
  } else {
    spdlog::info("redis: no server may drop waiting jobs any more (maxmemory-policy changed)");
  }
  problem_ = now.refusal;
}

}  // namespace delayd::broker
