#include "storage/job_store.hpp"

#include <algorithm>
#include <cassert>
#include <map>
#include <optional>

#include "storage/job_record.hpp"
#include "storage/job_store_replies.hpp"
#include "storage/lua_scripts.hpp"
#include "storage/payload_compression.hpp"

namespace delayd::storage {

using reply_parse::parse_claim;
using reply_parse::parse_i64;
using reply_parse::parse_transition;
using reply_parse::put_repeat_rule;
using reply_parse::score_of;

JobStore::JobStore(redis::RedisClient& redis, KeySchema keys, std::int64_t retention_s, ScriptCalls calls)
    : redis_(redis),
      keys_(std::move(keys)),
      retention_s_(retention_s),
      dictionaries_(PayloadDictionaries::of(keys_.prefix())),
      calls_(calls) {
  load_scripts(true);
}

namespace {

// Whether a FUNCTION LOAD's error says that this Redis or this user cannot have functions (a Redis
// before 7 does not know the command; an ACL may deny it), rather than that the library is wrong.
bool functions_unavailable(std::string_view error) {
  return error.starts_with("ERR unknown command") || error.starts_with("ERR unknown subcommand") ||
         error.starts_with("NOPERM");
}

}  // namespace

bool JobStore::library_loaded() {
  try {
    // Each primary of a cluster has its own libraries: loaded means loaded on every one. An error
    // (no FUNCTION before Redis 7, an ACL that denies FUNCTION LIST): the LOAD decides.
    const auto replies = redis_.command_on_every_server({"FUNCTION", "LIST", "LIBRARYNAME", lua::library_name()});
    return std::all_of(replies.begin(), replies.end(), [](const redis::RedisReply& r) {
      const redis::ReplyView v = r.view();
      return v.is_array() && v.size() > 0;
    });
  } catch (const redis::RedisIoError&) {
    return false;  // the LOAD meets the same fault and reports it
  }
}

void JobStore::load_scripts(bool starting) {
  if (calls_ == ScriptCalls::functions) {
    // A library of this name holds this very text (library_name() is its hash), so one that is
    // there already will do, and is not compiled again. At start, ask first: Redis refuses a LOAD
    // of a library it has, and counts the refusal as a failed call and an error (INFO
    // commandstats, errorstats), which a dashboard of Redis's errors would show at every start of
    // every instance. (In a cluster the load goes to every primary, and is asked for when any
    // lacks it; one that loses it later, or joins, answers a call "Function not found", and the
    // load below, without asking, mends it.)
    // Not when called again for such an answer: Redis has just said it lacks the library.
    if (starting && library_loaded()) return;
    // Without REPLACE: "already exists" is this very text, loaded by another store meanwhile.
    std::optional<redis::RedisReply> r;
    try {
      r.emplace(redis_.command({"FUNCTION", "LOAD", lua::library_source()}));
    } catch (const redis::RedisIoError& e) {
      // A replica (READONLY: a primary demoted by a failover) loads no library, where it did load
      // scripts: the store is made all the same, and its first call, answered "Function not
      // found" (or READONLY), loads it again then (eval_groups()).
      if (starting && std::string_view(e.what()).find("READONLY") != std::string_view::npos) return;
      throw;
    }
    const redis::ReplyView v = r->view();
    if (!v.is_error() || v.error().find("already exists") != std::string::npos) return;
    if (!functions_unavailable(v.error())) throw redis::RedisCommandError("redis: FUNCTION LOAD: " + v.error());
    calls_ = ScriptCalls::eval;  // and for good: SCRIPT LOAD below, EVALSHA from now on
  }
  std::vector<redis::Command> cmds;
  for (const lua::ScriptInfo& s : lua::kScripts) cmds.push_back({"SCRIPT", "LOAD", lua::source(s)});
  auto replies = redis_.pipeline(cmds);
  shas_.clear();
  for (auto& r : replies) {
    if (r.view().is_error()) throw redis::RedisCommandError("redis: SCRIPT LOAD: " + r.view().error());
    shas_.emplace_back(r.view().str());
  }
}

redis::Command JobStore::script_call(Script script, std::size_t keys) const {
  const lua::ScriptInfo& info = lua::info(script);
  if (calls_ == ScriptCalls::functions) return {"FCALL", lua::function_name(info), std::to_string(keys)};
  return {"EVALSHA", shas_[static_cast<size_t>(script)], std::to_string(keys)};
}

namespace {

// The commands of the groups `which`, in order, as one pipeline.
std::vector<redis::Command> flat_groups(const std::vector<std::vector<redis::Command>>& groups,
                                        const std::vector<size_t>& which) {
  std::vector<redis::Command> cmds;
  for (size_t g : which) cmds.insert(cmds.end(), groups[g].begin(), groups[g].end());
  return cmds;
}

// How many commands each group holds (and so how many replies it gets).
std::vector<size_t> sizes_of(const std::vector<std::vector<redis::Command>>& groups) {
  std::vector<size_t> sizes;
  sizes.reserve(groups.size());
  for (const auto& g : groups) sizes.push_back(g.size());
  return sizes;
}

// Splits a pipeline's replies, from replies[first] on, into the groups `which` sent, in order,
// into out[g]; group g has sizes[g] replies.
void split_replies(const std::vector<size_t>& sizes, std::vector<redis::RedisReply>& replies, size_t first,
                   const std::vector<size_t>& which, std::vector<std::vector<redis::RedisReply>>& out) {
  size_t at = first;
  for (size_t g : which) {
    out[g].clear();
    for (size_t c = 0; c < sizes[g]; ++c) out[g].push_back(std::move(replies[at++]));
  }
}

// The groups whose script call Redis answered NOSCRIPT or "Function not found" (it lost its
// scripts or delayd's library: that call did not run).
std::vector<size_t> lost_groups(const std::vector<std::vector<redis::RedisReply>>& out) {
  std::vector<size_t> lost;
  for (size_t g = 0; g < out.size(); ++g) {
    const redis::ReplyView r = out[g].front().view();
    if (!r.is_error()) continue;
    const std::string e = r.error();
    if (e.starts_with("NOSCRIPT") || e.starts_with("ERR Function not found")) lost.push_back(g);
  }
  return lost;
}

std::vector<size_t> all_groups(size_t n) {
  std::vector<size_t> all(n);
  for (size_t g = 0; g < n; ++g) all[g] = g;
  return all;
}

}  // namespace

std::vector<std::vector<redis::RedisReply>> JobStore::eval_groups(
    const std::vector<std::vector<redis::Command>>& groups) {
  const std::vector<size_t> all = all_groups(groups.size());
  std::vector<std::vector<redis::RedisReply>> out(groups.size());
  const std::vector<size_t> sizes = sizes_of(groups);
  auto replies = redis_.pipeline(flat_groups(groups, all));
  split_replies(sizes, replies, 0, all, out);
  const std::vector<size_t> lost = lost_groups(out);
  if (lost.empty()) return out;
  load_scripts();  // the same texts: the same SHA1s and library, so the groups are sent again as they were
  auto again = redis_.pipeline(flat_groups(groups, lost));
  split_replies(sizes, again, 0, lost, out);
  return out;
}

JobStore::Replies JobStore::run(Script script, std::string_view shard, const std::vector<redis::Command>& per_job,
                                std::int64_t now_ms, std::int64_t extra, bool read_records) {
  const ShardJobs one{shard, &per_job};
  return std::move(run_shards(script, std::span<const ShardJobs>(&one, 1), now_ms, extra, read_records).front());
}

std::vector<JobStore::Replies> JobStore::run_shards(Script script, std::span<const ShardJobs> shards,
                                                    std::int64_t now_ms, std::int64_t extra, bool read_records) {
  Calls calls = build_calls(script, shards, now_ms, extra, read_records);
  auto replies = eval_groups(calls.groups);
  return replies_of(calls, replies);
}

JobStore::Calls JobStore::build_calls(Script script, std::span<const ShardJobs> shards, std::int64_t now_ms,
                                      std::int64_t extra, bool read_records) const {
  const lua::ScriptInfo& info = lua::info(script);
  for (const ShardJobs& s : shards) {
    for (const redis::Command& args : *s.per_job) {
      if (args.size() != info.stride) {
        throw std::logic_error("script " + std::string(info.name) + ": " + std::to_string(args.size()) +
                               " arguments for a job, not " + std::to_string(info.stride));
      }
    }
  }
  // One call's commands: the script, then (read_records) one HMGET of its jobs' records from the
  // shard's hash of delay records, where a claimed job's record is (claim.lua) (a command per
  // call, not per job: Redis spends its time on the jobs, not on dispatch).
  auto build = [&](std::string_view shard, const std::string& fence, const std::vector<redis::Command>& per_job,
                   size_t from, size_t to, std::vector<redis::Command>& out) {
    // The kShardKeys keys of a batch script, in lua_scripts.hpp's order (five: the assert below
    // fails if lua_scripts.hpp adds one), then the jobs' records.
    static_assert(lua::kShardKeys == 5 && lua::kFixedArgs == 4);
    redis::Command c = script_call(script, info.keys + (to - from));
    c.insert(c.end(), {keys_.pending(shard), keys_.stats(shard), keys_.quarantine(shard), keys_.in_flight(shard),
                       keys_.owner(shard)});
    for (size_t i = from; i < to; ++i) c.push_back(keys_.job(shard, per_job[i].front()));
    c.insert(c.end(), {std::to_string(now_ms), std::to_string(retention_s_), std::to_string(extra), fence});
    for (size_t i = from; i < to; ++i) c.insert(c.end(), per_job[i].begin(), per_job[i].end());
    out.push_back(std::move(c));
    if (read_records) {
      redis::Command read{"HMGET", keys_.delay_records(shard)};
      for (size_t i = from; i < to; ++i) read.push_back(per_job[i].front());
      out.push_back(std::move(read));
    }
  };
  // Every shard's calls, kJobsPerCall jobs each, in one pipeline: group g belongs to shard
  // owner[g]. A fence refused for one shard throws before anything is sent.
  Calls calls;
  calls.read_records = read_records;
  for (size_t s = 0; s < shards.size(); ++s) {
    calls.shards.emplace_back(shards[s].shard);
    const std::string fence = fence_arg(script, shards[s].shard);
    const std::vector<redis::Command>& per_job = *shards[s].per_job;
    for (size_t from = 0; from < per_job.size(); from += kJobsPerCall) {
      calls.groups.emplace_back();
      build(shards[s].shard, fence, per_job, from, std::min(per_job.size(), from + kJobsPerCall), calls.groups.back());
      calls.owner.push_back(s);
    }
  }
  return calls;
}

std::vector<JobStore::Replies> JobStore::replies_of(const Calls& calls,
                                                    std::vector<std::vector<redis::RedisReply>>& replies) const {
  std::vector<Replies> out(calls.shards.size());
  for (size_t g = 0; g < calls.owner.size(); ++g) {
    out[calls.owner[g]].calls.push_back(std::move(replies[g][0]));
    if (calls.read_records) out[calls.owner[g]].reads.push_back(std::move(replies[g][1]));
  }
  // A refusal or a script error of any call throws, as a single shard's run() would: the
  // callers treat the whole request as not done (each script is idempotent when sent again).
  for (size_t s = 0; s < calls.shards.size(); ++s) {
    for (auto& r : out[s].calls) {
      if (!r.view().is_error()) continue;
      const std::string error = r.view().error();
      if (error.rfind("FENCED", 0) == 0) throw ShardFenced(calls.shards[s], error.substr(7));
      throw redis::RedisCommandError("redis: script: " + error);
    }
  }
  return out;
}

std::string JobStore::fence_arg(Script script, std::string_view shard) const {
  if (!member_ || !lua::info(script).fenced) return {};
  const auto it = fences_.find(shard);
  if (it == fences_.end()) throw ShardFenced(std::string(shard), "this broker holds no fence for it");
  return std::to_string(it->second);
}

void JobStore::enable_fencing(std::string member) { member_ = std::move(member); }

std::int64_t JobStore::take_shard(std::string_view shard, std::int64_t now_ms) {
  static_assert(lua::info(Script::take_shard).keys == 2 && lua::info(Script::take_shard).args == 2);
  redis::Command cmd = script_call(Script::take_shard, lua::info(Script::take_shard).keys);
  cmd.insert(cmd.end(), {keys_.owner(shard), keys_.wake(shard), member_.value_or("-"), std::to_string(now_ms)});
  redis::RedisReply reply = std::move(eval_groups({{cmd}}).front().front());
  if (!reply.view().is_integer()) {
    throw redis::RedisCommandError("redis: taking shard " + std::string(shard) + ": " +
                                   (reply.view().is_error() ? reply.view().error() : std::string("unexpected reply")));
  }
  const std::int64_t epoch = reply.view().integer();
  fences_.insert_or_assign(std::string(shard), epoch);
  return epoch;
}

void JobStore::drop_shard(std::string_view shard) {
  if (auto it = fences_.find(shard); it != fences_.end()) fences_.erase(it);
}

void JobStore::adopt_fence(std::string_view shard, std::optional<std::int64_t> epoch) {
  if (!epoch) {
    drop_shard(shard);
    return;
  }
  fences_.insert_or_assign(std::string(shard), *epoch);
}

std::optional<std::int64_t> JobStore::fence(std::string_view shard) const {
  const auto it = fences_.find(shard);
  if (it == fences_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> JobStore::lost_shards() {
  std::vector<std::string> shards;
  std::vector<redis::Command> cmds;
  for (const auto& [shard, epoch] : fences_) {
    shards.push_back(shard);
    cmds.push_back({"GET", keys_.owner(shard)});
  }
  if (cmds.empty()) return {};
  const auto replies = redis_.pipeline(cmds);
  std::vector<std::string> lost;
  for (size_t i = 0; i < shards.size(); ++i) {
    const redis::ReplyView r = replies[i].view();
    const std::string_view v = r.is_string() ? r.str() : std::string_view{};
    const auto epoch = parse_i64(v.substr(0, v.find(' ')));
    if (!epoch || *epoch != fences_.find(shards[i])->second) lost.push_back(shards[i]);
  }
  return lost;
}

redis::Command JobStore::registration(std::string_view shard) const {
  return {"SADD", keys_.shards(), std::string(shard)};
}

void JobStore::registered(std::string_view shard, const redis::RedisReply& reply) {
  if (reply.view().is_error()) throw redis::RedisCommandError("redis: " + reply.view().error());
  registered_shards_.emplace(shard);
}

JobStore::Layout JobStore::claim_layout(int layout, const std::string& version) {
  const auto replies = redis_.pipeline({{"GET", keys_.layout()}, {"SCARD", keys_.shards()}});
  Layout was;
  const redis::ReplyView v = replies[0].view();
  if (v.is_error()) throw redis::RedisCommandError("redis: " + v.error());
  if (v.is_string()) {
    const std::string_view text = v.str();
    const auto space = text.find(' ');
    was.layout = static_cast<int>(parse_i64(text.substr(0, space)).value_or(0));
    if (space != std::string_view::npos) was.version = std::string(text.substr(space + 1));
  } else if (replies[1].view().is_integer() && replies[1].view().integer() > 0) {
    was.layout = 1;  // shards written by a delayd that kept no layout: 0.3 or older
  }
  if (was.layout <= layout) {
    const redis::RedisReply set = redis_.command({"SET", keys_.layout(), std::to_string(layout) + " " + version});
    if (set.view().is_error()) throw redis::RedisCommandError("redis: " + set.view().error());
  }
  return was;
}

void JobStore::register_shard(std::string_view shard) {
  if (registered_shards_.count(std::string(shard)) != 0) return;
  registered(shard, redis_.command(registration(shard)));
}

JobStore::Calls JobStore::accept_calls(std::span<const NewJob> jobs, std::int64_t now_ms,
                                       std::vector<std::vector<size_t>>& index, DictionaryUse& used) const {
  std::map<std::string_view, std::vector<size_t>> by_shard;
  for (size_t i = 0; i < jobs.size(); ++i) by_shard[jobs[i].shard].push_back(i);
  // Every shard's calls in one round trip: a batch read from many partitions costs one wait for
  // Redis, not one per shard.
  std::vector<std::vector<redis::Command>> per_shard;
  std::vector<ShardJobs> shards;
  per_shard.reserve(by_shard.size());
  shards.reserve(by_shard.size());
  index.clear();
  used = {};
  std::shared_ptr<const CompressionDictionary> dictionary =
      compress_above_ > 0 && use_dictionary_ ? dictionaries_->current() : nullptr;
  for (const auto& [shard, idx] : by_shard) {
    std::vector<redis::Command>& per_job = per_shard.emplace_back();
    per_job.reserve(idx.size());
    for (size_t i : idx) {
      const NewJob& j = jobs[i];
      const std::string at = std::to_string(j.deliver_at);
      std::map<std::string, std::string, std::less<>> fields;
      if (j.repeat.repeats()) put_repeat_rule(j.repeat, fields);
      if (j.max_lateness.count() > 0) fields["ml"] = std::to_string(j.max_lateness.count());
      if (j.redrive_count > 0) fields["rv"] = std::to_string(j.redrive_count);
      const std::string version = j.version ? std::to_string(*j.version) : std::string();
      if (j.version) fields["vo"] = version;
      std::string payload = encode_payload({j.key, j.value, j.headers});
      if (!dictionary && use_dictionary_ && compress_above_ > 0 && payload.size() > compress_above_) {
        dictionary = dictionaries_->offer(payload);  // the one that completes the samples trains it
      }
      if (std::optional<std::string> z = compress_payload(payload, compress_above_, dictionary.get())) {
        dictionaries_->count(payload.size(), z->size());
        payload = std::move(*z);
        fields[std::string(kCompressedField)] = kCompressedValue;
        if (dictionary) {
          used.dictionary = dictionary;
          used.shards.emplace(shard);
        }
      }
      const std::string line = format_header_line(JobState::delay, j.deliver_at, 0, j.business, fields);
      per_job.push_back({j.job_id, at, j.business, version, line + "\n" + payload});
    }
    shards.push_back({shard, &per_job});
    index.push_back(idx);
  }
  return build_calls(Script::accept, shards, now_ms);
}

std::vector<std::int64_t> JobStore::asked_times(std::span<const NewJob> jobs) {
  std::vector<std::int64_t> at;
  at.reserve(jobs.size());
  for (const NewJob& j : jobs) at.push_back(j.deliver_at);
  return at;
}

std::vector<AcceptOutcome> JobStore::accept_outcomes(const std::vector<std::int64_t>& asked,
                                                     const std::vector<std::vector<size_t>>& index,
                                                     const std::vector<Replies>& replies) {
  std::vector<AcceptOutcome> out(asked.size());
  for (size_t s = 0; s < index.size(); ++s) {
    const std::vector<size_t>& idx = index[s];
    for (size_t k = 0; k < idx.size(); ++k) {
      const redis::ReplyView r = replies[s][k];
      AcceptOutcome& o = out[idx[k]];
      if (r.is_integer()) {  // created the plain way (accept.lua): in state delay, at the time asked
        o.kind = AcceptKind::created;
        o.state = JobState::delay;
        o.deliver_at = asked[idx[k]];
        continue;
      }
      const auto code = r[0].integer();
      o.kind = code >= 0 && code <= static_cast<long long>(AcceptKind::again) ? static_cast<AcceptKind>(code)
                                                                              : AcceptKind::existed;
      o.state = parse_job_state(r[1].str()).value_or(JobState::corrupt);
      if (auto at = parse_i64(r[2].str())) {
        o.deliver_at = *at;
      } else {
        o.state = JobState::corrupt;
      }
    }
  }
  return out;
}

std::vector<AcceptOutcome> JobStore::accept(std::span<const NewJob> jobs, std::int64_t now_ms) {
  std::vector<std::vector<size_t>> index;
  DictionaryUse used;
  Calls calls = accept_calls(jobs, now_ms, index, used);
  for (const std::string& shard : calls.shards) register_shard(shard);
  std::vector<std::string> dictionary_shards;
  bool dictionary_prefix = false;
  if (auto writes = dictionary_writes(used, dictionary_shards, dictionary_prefix); !writes.empty()) {
    dictionary_written(used, dictionary_shards, dictionary_prefix, redis_.pipeline(writes));
  }
  auto replies = eval_groups(calls.groups);
  return accept_outcomes(asked_times(jobs), index, replies_of(calls, replies));
}

JobStore::PostedAccept JobStore::accept_post(std::span<const NewJob> jobs, std::int64_t now_ms) {
  PostedAccept p;
  p.asked = asked_times(jobs);
  p.calls = accept_calls(jobs, now_ms, p.index, p.dictionary);
  // register_shard()'s SADD for the shards not known yet goes first in the same post, then the
  // dictionary's writes (ahead of the records that need it: payload_compression.hpp). Both are
  // marked done when collected: a post sent meanwhile writes them again, which changes nothing.
  std::vector<redis::Command> commands;
  for (const std::string& shard : p.calls.shards) {
    if (registered_shards_.count(shard) == 0) {
      commands.push_back(registration(shard));
      p.registering.push_back(shard);
    }
  }
  for (redis::Command& c : dictionary_writes(p.dictionary, p.dictionary_shards, p.dictionary_prefix)) {
    commands.push_back(std::move(c));
  }
  // The commands go to the connection; the collect needs only how many replies each group gets.
  p.sizes = sizes_of(p.calls.groups);
  for (auto& group : p.calls.groups) {
    for (auto& c : group) commands.push_back(std::move(c));
  }
  p.calls.groups.clear();
  redis_.post(commands);
  return p;
}

std::vector<AcceptOutcome> JobStore::accept_collect(PostedAccept& posted) {
  std::vector<redis::RedisReply> replies = redis_.collect();
  const size_t sadds = posted.registering.size();
  const size_t leads = sadds + posted.dictionary_shards.size() + (posted.dictionary_prefix ? 1 : 0);
  std::vector<std::vector<redis::RedisReply>> groups(posted.sizes.size());
  split_replies(posted.sizes, replies, leads, all_groups(groups.size()), groups);
  try {
    for (size_t i = 0; i < sadds; ++i) registered(posted.registering[i], replies[i]);
    dictionary_written(posted.dictionary, posted.dictionary_shards, posted.dictionary_prefix,
                       std::span<const redis::RedisReply>(replies.data() + sadds, leads - sadds));
  } catch (...) {
    redis_.abandon();
    throw;
  }
  if (!lost_groups(groups).empty()) {
    // Redis lost its scripts, so this post (and any posted after it) did not run: the scripts
    // are loaded again, and the caller posts its jobs again, in order, as after any outage.
    redis_.abandon();
    load_scripts();
    throw redis::RedisIoError("redis lost delayd's scripts (NOSCRIPT): loaded again; the batch is written again");
  }
  return accept_outcomes(posted.asked, posted.index, replies_of(posted.calls, groups));
}

void JobStore::abandon_posts() noexcept { redis_.abandon(); }

std::vector<PendingEntry> JobStore::pending_between(std::string_view shard, std::optional<std::int64_t> after,
                                                    std::int64_t upto, std::size_t limit) {
  register_shard(shard);  // the loader reads every owned shard first: tools and cancels now see it
  static_assert(lua::info(Script::pending).args == lua::kFixedArgs + 4);
  const redis::Command read = shard_call(
      Script::pending, shard, 0,
      {"between", after ? std::to_string(*after) : std::string(), std::to_string(upto), std::to_string(limit)});
  // Each call first moves a chunk of a 0.3 pending set into leaves, and reads only once none is left.
  for (;;) {
    const auto replies = eval_groups({{read}});
    const redis::ReplyView r = replies.front().front().view();
    if (r.is_error()) throw redis::RedisCommandError("redis: pending script: " + r.error());
    if (r[0].integer() > 0) continue;
    const redis::ReplyView got = r[1];
    std::vector<PendingEntry> out;
    out.reserve(got.size() / 2);
    for (size_t i = 0; i + 1 < got.size(); i += 2) out.push_back({std::string(got[i].str()), score_of(got[i + 1])});
    return out;
  }
}

redis::Command JobStore::shard_call(Script script, std::string_view shard, std::int64_t now_ms,
                                    std::initializer_list<std::string> own) const {
  static_assert(lua::kShardKeys == 5 && lua::kFixedArgs == 4);
  redis::Command c = script_call(script, lua::kShardKeys);
  c.insert(c.end(), {keys_.pending(shard), keys_.stats(shard), keys_.quarantine(shard), keys_.in_flight(shard),
                     keys_.owner(shard), std::to_string(now_ms), std::to_string(retention_s_), "0", ""});
  c.insert(c.end(), own.begin(), own.end());
  return c;
}

std::vector<Claim> JobStore::claim(std::string_view shard, std::span<const std::string> job_ids, std::int64_t now_ms,
                                   std::int64_t ahead_ms, std::span<const std::int64_t> seen_at,
                                   std::span<const KnownDelivery> delivered) {
  assert(seen_at.empty() || seen_at.size() == job_ids.size());
  assert(delivered.empty() || delivered.size() == job_ids.size());
  std::vector<redis::Command> per_job;
  per_job.reserve(job_ids.size());
  for (size_t i = 0; i < job_ids.size(); ++i) {
    // claim.lua's third argument of a job: "" (nothing known), "<attempt>" or "<attempt>/<occurrence>".
    std::string known;
    if (i < delivered.size() && delivered[i].attempt > 0) {
      known = std::to_string(delivered[i].attempt);
      if (delivered[i].repeat > 0) known += "/" + std::to_string(delivered[i].repeat);
    }
    per_job.push_back({job_ids[i], i < seen_at.size() ? std::to_string(seen_at[i]) : std::string(), std::move(known)});
  }
  const Replies replies = run(Script::claim, shard, per_job, now_ms, ahead_ms, true);
  std::vector<std::pair<std::string_view, std::string_view>> records;
  for (size_t i = 0; i < job_ids.size(); ++i) {
    if (const redis::ReplyView r = replies.record(i); r.is_string()) records.emplace_back(shard, r.str());
  }
  load_dictionaries(records);
  std::vector<Claim> out;
  out.reserve(job_ids.size());
  for (size_t i = 0; i < job_ids.size(); ++i) {
    try {
      out.push_back(parse_claim(job_ids[i], replies[i], replies.record(i), *dictionaries_));
    } catch (const redis::RedisCommandError& e) {
      Claim c;
      c.job_id = job_ids[i];
      c.kind = Claim::Kind::corrupt;
      c.reason = std::string("corrupt job record: claim reply unreadable: ") + e.what();
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::vector<InFlightEntry> JobStore::in_flight_entries(std::string_view shard) {
  const redis::RedisReply reply = redis_.command({"HGETALL", keys_.in_flight(shard)});
  const redis::ReplyView r = reply.view();
  if (r.is_error())
    throw redis::RedisCommandError("redis: in-flight entries of " + std::string(shard) + ": " + r.error());
  std::vector<InFlightEntry> out;
  if (!r.is_array()) return out;
  for (std::size_t i = 0; i + 1 < r.size(); i += 2) {
    if (!r[i].is_string() || !r[i + 1].is_string()) continue;
    // "<attempt> <firing_at>[ <epoch>]" (prelude_jobs.lua, flight_of())
    const std::string_view v = r[i + 1].str();
    const auto first = v.find(' ');
    if (first == std::string_view::npos) continue;
    const auto second = v.find(' ', first + 1);
    const auto attempt = parse_i64(v.substr(0, first));
    const auto at =
        parse_i64(v.substr(first + 1, second == std::string_view::npos ? std::string_view::npos : second - first - 1));
    const auto epoch =
        second == std::string_view::npos ? std::optional<std::int64_t>(0) : parse_i64(v.substr(second + 1));
    if (!attempt || !at || !epoch) continue;
    out.push_back({std::string(r[i].str()), static_cast<int>(*attempt), *at, *epoch});
  }
  return out;
}

void JobStore::set_aside(std::string_view shard, std::span<const Claim> claims, std::int64_t now_ms) {
  std::vector<redis::Command> per_job;
  for (const Claim& c : claims) {
    if (c.kind == Claim::Kind::corrupt && !c.marked_failed) per_job.push_back({c.job_id, c.reason, "", "0"});
  }
  if (!per_job.empty()) run(Script::mark_failed, shard, per_job, now_ms);
}

std::vector<Transition> JobStore::mark_ready(std::string_view shard, std::span<const Delivered> jobs,
                                             std::int64_t now_ms) {
  // Plain jobs the cheap way (kMarkReady, 4 arguments each), the others read and settled in
  // full (kMarkDelivered); one round trip each, results back in the callers' order.
  std::vector<size_t> fast, full;
  for (size_t i = 0; i < jobs.size(); ++i) (jobs[i].mode == Mode::fast && !jobs[i].skip ? fast : full).push_back(i);
  std::vector<Transition> out(jobs.size());
  auto settle = [&](Script script, const std::vector<size_t>& idx) {
    if (idx.empty()) return;
    std::vector<redis::Command> per_job;
    per_job.reserve(idx.size());
    for (size_t i : idx) {
      const Delivered& j = jobs[i];
      per_job.push_back({j.job_id, std::to_string(j.deliver_at), std::to_string(j.attempt), j.business});
      if (script == Script::mark_delivered) {
        per_job.back().insert(per_job.back().end(),
                              {j.mode == Mode::keep ? "keep" : "drop", std::to_string(j.ack_timeout.count()),
                               std::to_string(j.max_attempts),
                               !j.next_known ? std::string()
                               : j.next      ? std::to_string(j.next->at)
                                             : std::string("-"),
                               j.next ? std::to_string(j.next->number) : std::string(), j.skip ? "1" : ""});
      }
    }
    const Replies replies = run(script, shard, per_job, now_ms);
    for (size_t k = 0; k < idx.size(); ++k) out[idx[k]] = parse_transition(jobs[idx[k]].job_id, shard, replies[k]);
  };
  settle(Script::mark_ready, fast);
  settle(Script::mark_delivered, full);
  return out;
}

std::vector<Transition> JobStore::mark_ready(std::string_view shard, std::span<const std::string> job_ids,
                                             std::int64_t now_ms) {
  std::vector<Delivered> jobs;
  jobs.reserve(job_ids.size());
  for (const auto& id : job_ids) jobs.push_back({id, 0, 0, "", Mode::fast, {}, 0, false, std::nullopt, false});
  return mark_ready(shard, std::span<const Delivered>(jobs), now_ms);
}

std::vector<Transition> JobStore::act(Action action, std::string_view shard, std::span<const std::string> job_ids,
                                      std::int64_t now_ms) {
  const Script script = action == Action::cancel    ? Script::cancel
                        : action == Action::run_now ? Script::reschedule
                                                    : Script::retry;
  std::vector<redis::Command> per_job;
  for (const std::string& id : job_ids) {
    per_job.push_back(action == Action::run_now  ? redis::Command{id, std::to_string(now_ms)}
                      : action == Action::cancel ? redis::Command{id, ""}
                                                 : redis::Command{id});
  }
  const Replies replies = run(script, shard, per_job, now_ms);
  std::vector<Transition> out;
  for (std::size_t i = 0; i < job_ids.size(); ++i) out.push_back(parse_transition(job_ids[i], shard, replies[i]));
  return out;
}

Transition JobStore::one(Script script, std::string_view shard, redis::Command args, std::int64_t now_ms,
                         std::int64_t extra) {
  const Replies replies = run(script, shard, {args}, now_ms, extra);
  return parse_transition(args.front(), shard, replies[0]);
}

Transition JobStore::release(std::string_view shard, const std::string& job_id, std::string_view error,
                             std::int64_t retry_at, ReleaseOptions options, std::int64_t now_ms) {
  return one(Script::release, shard,
             {job_id, std::string(error), options.refund ? "1" : "0", options.keep_firing ? "1" : "0",
              std::to_string(retry_at)},
             now_ms);
}

Transition JobStore::mark_failed(std::string_view shard, const std::string& job_id, std::string_view reason,
                                 std::int64_t now_ms, std::optional<DeadLetterAt> dead_letter, bool keep_payload) {
  return one(
      Script::mark_failed, shard,
      {job_id, std::string(reason),
       dead_letter ? std::to_string(dead_letter->partition) + ":" + std::to_string(dead_letter->offset) : std::string(),
       keep_payload ? "1" : "0"},
      now_ms);
}

Transition JobStore::cancel(std::string_view shard, const std::string& job_id, std::int64_t now_ms,
                            std::int64_t remember_s, std::optional<std::int64_t> version) {
  if (remember_s > 0) register_shard(shard);  // so that tools find the remembered cancel
  return one(Script::cancel, shard, {job_id, version ? std::to_string(*version) : std::string()}, now_ms, remember_s);
}

Transition JobStore::cancel_anywhere(std::string_view home, const std::string& job_id, std::int64_t now_ms,
                                     std::int64_t remember_s, std::optional<std::int64_t> version) {
  const std::vector<std::string> shards = known_shards(home);
  const std::vector<std::string> holders = holding(job_id, shards);
  // The version orders the cancel among the records of its own shard only.
  auto in = [&](std::string_view shard) { return shard == home ? version : std::nullopt; };
  if (!holders.empty()) return cancel(holders.front(), job_id, now_ms, 0, in(holders.front()));
  // Found nowhere: remembered in every shard (`home` first), since the job may come through any
  // partition. Each shard's call is atomic against that shard's accept, so a job accepted
  // meanwhile is either cancelled here (it exists by then) or finds the remembered cancel.
  register_shard(home);
  Transition t;
  for (const auto& shard : shards) {
    Transition other = cancel(shard, job_id, now_ms, remember_s, in(shard));
    if (shard == home || other.changed) t = other;  // changed: the job arrived since holding() looked
  }
  return t;
}

Transition JobStore::reschedule_anywhere(std::string_view home, const std::string& job_id, std::int64_t deliver_at,
                                         std::int64_t now_ms) {
  const std::vector<std::string> holders = shards_holding(job_id, home);
  if (holders.empty()) {
    Transition t;
    t.job_id = job_id;
    return t;
  }
  return one(Script::reschedule, holders.front(), {job_id, std::to_string(deliver_at)}, now_ms);
}

std::vector<ReportOutcome> JobStore::report(std::span<const Report> reports, std::span<const std::string> where,
                                            std::int64_t now_ms) {
  std::vector<ReportOutcome> out(reports.size());
  std::map<std::string_view, std::vector<size_t>> by_shard;
  for (size_t i = 0; i < reports.size(); ++i) {
    if (!where[i].empty()) by_shard[where[i]].push_back(i);
  }
  for (const auto& [shard, idx] : by_shard) {
    std::vector<redis::Command> per_job;
    per_job.reserve(idx.size());
    for (size_t i : idx) {
      const Report& r = reports[i];
      per_job.push_back({r.job_id, std::string(to_string(r.status)), r.error.substr(0, 1000),
                         std::to_string(r.retry_at), std::to_string(std::max(r.max_attempts, 1)),
                         std::to_string(r.ack_timeout.count()), std::to_string(r.attempt)});
    }
    const Replies replies = run(Script::report, shard, per_job, now_ms);
    for (size_t k = 0; k < idx.size(); ++k) {
      const redis::ReplyView r = replies[k];
      ReportOutcome& o = out[idx[k]];
      o.shard = std::string(shard);
      const std::string_view verdict = r[0].str();
      o.verdict = verdict == "applied"   ? ReportOutcome::Verdict::applied
                  : verdict == "ignored" ? ReportOutcome::Verdict::ignored
                  : verdict == "wait"    ? ReportOutcome::Verdict::wait
                                         : ReportOutcome::Verdict::unknown;
      o.dead = r[1].str() == "dead";
      o.state = o.dead ? JobState::delay : parse_job_state(r[1].str()).value_or(JobState::corrupt);
      o.due_at = parse_i64(r[2].str()).value_or(0);
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::vector<PendingEntry>>> JobStore::take_wakes(
    std::span<const std::string> shards) {
  constexpr std::size_t kWakesPerShard = 1000;
  std::vector<std::pair<std::string, std::vector<PendingEntry>>> out;
  if (shards.empty()) return out;
  std::vector<redis::Command> pops;
  for (const auto& shard : shards) pops.push_back({"LPOP", keys_.wake(shard), std::to_string(kWakesPerShard)});
  const auto popped = redis_.pipeline(pops);
  for (size_t s = 0; s < shards.size(); ++s) {
    const redis::ReplyView r = popped[s].view();
    if (!r.is_array()) continue;  // nil: an empty list
    std::vector<redis::Command> ids;
    for (size_t k = 0; k < r.size(); ++k) ids.push_back({std::string(r[k].str())});
    if (ids.empty()) continue;
    // Where each entry is now (find.lua: where its record says); none: it left the pending set.
    const Replies got = run(Script::find, shards[s], ids, 0);
    std::vector<PendingEntry> entries;
    for (size_t k = 0; k < ids.size(); ++k) {
      const redis::ReplyView score = got[k];
      if (score.str().empty()) continue;
      entries.push_back({ids[k].front(), score_of(score)});
    }
    if (!entries.empty()) out.emplace_back(shards[s], std::move(entries));
  }
  return out;
}

Transition JobStore::retry_anywhere(const std::string& job_id, std::int64_t now_ms) {
  const std::vector<std::string> holders = shards_holding(job_id);
  if (holders.empty()) {
    Transition t;
    t.job_id = job_id;
    return t;
  }
  return one(Script::retry, holders.front(), {job_id}, now_ms);
}

}  // namespace delayd::storage
