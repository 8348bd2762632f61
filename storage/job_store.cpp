#include "storage/job_store.hpp"

#include "storage/lua_scripts.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <set>

namespace delayd::storage {

namespace {

constexpr std::string_view kScriptTexts[] = {lua::kAccept,    lua::kClaim,      lua::kMarkReady,
                                             lua::kRelease,   lua::kMarkFailed, lua::kCancel};

std::optional<std::int64_t> parse_i64(std::string_view s) {
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// A score read back from a pending set. delayd writes whole milliseconds, but a hand-edited
// entry may hold a fraction or an infinity: round up (a deadline read late is never early) and
// clamp into 0..2^62, where the wheel and the claim script sort it out.
std::int64_t score_of(ReplyView v) {
  const std::string text(v.str());
  if (auto whole = parse_i64(text)) return std::clamp<std::int64_t>(*whole, 0, std::int64_t{1} << 62);
  char* end = nullptr;
  const double d = std::strtod(text.c_str(), &end);
  if (std::isnan(d) || d <= 0) return 0;
  if (d >= 4.6e18) return std::int64_t{1} << 62;
  return static_cast<std::int64_t>(std::ceil(d));
}

// A script's {changed, state, business, shard}. A state the scripts never return means the reply
// itself cannot be trusted; it is reported as corrupt rather than thrown.
Transition parse_transition(const std::string& job_id, ReplyView r) {
  Transition t;
  t.job_id = job_id;
  t.changed = r[0].integer() == 1;
  t.state = parse_job_state(r[1].str()).value_or(JobState::corrupt);
  t.business = std::string(r[2].str());
  t.shard = std::string(r[3].str());
  return t;
}

std::string counter(std::string_view business, JobState state) {
  return std::string(business) + "|" + std::string(to_string(state));
}

}  // namespace

JobStore::JobStore(RedisConnection& redis, KeySchema keys, std::int64_t retention_s)
    : redis_(redis), keys_(std::move(keys)), retention_s_(retention_s) {
  load_scripts();
}

void JobStore::load_scripts() {
  std::vector<Command> cmds;
  for (auto text : kScriptTexts) cmds.push_back({"SCRIPT", "LOAD", std::string(text)});
  auto replies = redis_.pipeline(cmds);
  shas_.clear();
  for (auto& r : replies) shas_.emplace_back(r.view().str());
}

std::vector<RedisReply> JobStore::eval_each(Script script, const std::vector<Command>& per_job,
                                            const std::function<std::vector<Command>(size_t)>& also) {
  auto build = [&](size_t i, std::vector<Command>& out) {
    Command c{"EVALSHA", shas_[static_cast<size_t>(script)], "1"};
    c.insert(c.end(), per_job[i].begin(), per_job[i].end());
    out.push_back(std::move(c));
    if (also) {
      for (auto& extra : also(i)) out.push_back(std::move(extra));
    }
  };
  std::vector<Command> cmds;
  cmds.reserve(per_job.size());
  for (size_t i = 0; i < per_job.size(); ++i) build(i, cmds);
  auto replies = redis_.pipeline(cmds);
  const size_t stride = per_job.empty() ? 1 : replies.size() / per_job.size();

  // A restarted Redis without persistence of its script cache (or SCRIPT FLUSH) answers
  // NOSCRIPT; only those jobs' scripts did not run, so only those are sent again.
  std::vector<size_t> lost;
  for (size_t i = 0; i < per_job.size(); ++i) {
    const ReplyView r = replies[i * stride].view();
    if (r.is_error() && r.error().rfind("NOSCRIPT", 0) == 0) lost.push_back(i);
  }
  if (!lost.empty()) {
    load_scripts();
    std::vector<Command> again;
    for (size_t i : lost) build(i, again);
    auto retried = redis_.pipeline(again);
    for (size_t k = 0; k < lost.size(); ++k) {
      for (size_t j = 0; j < stride; ++j) replies[lost[k] * stride + j] = std::move(retried[k * stride + j]);
    }
  }
  return replies;
}

std::vector<AcceptOutcome> JobStore::accept(std::span<const NewJob> jobs, std::int64_t now_ms) {
  std::vector<Command> per_job;
  per_job.reserve(jobs.size());
  const std::string now = std::to_string(now_ms);
  for (const auto& j : jobs) {
    per_job.push_back({keys_.job(j.job_id), std::to_string(j.deliver_at), j.business, j.topic, j.shard, now,
                       j.source, std::to_string(retention_s_)});
  }
  auto replies = eval_each(Script::accept, per_job);

  std::vector<AcceptOutcome> out;
  out.reserve(jobs.size());
  std::vector<Command> follow;
  std::set<std::string> shards;
  for (size_t i = 0; i < jobs.size(); ++i) {
    ReplyView r = replies[i].view();
    if (r.is_error()) throw RedisCommandError("redis: accept: " + r.error());
    AcceptOutcome o;
    o.created = r[0].integer() == 1;
    o.cancelled_early = r[0].integer() == 2;
    o.state = parse_job_state(r[1].str()).value_or(JobState::corrupt);
    const std::string business(r[2].str());
    o.shard = std::string(r[3].str());
    // An existing hash whose deliver_at does not parse is left alone here: the claim that meets
    // its pending entry sets it aside (see set_aside()).
    if (auto at = parse_i64(r[4].str())) {
      o.deliver_at = *at;
    } else {
      o.state = JobState::corrupt;
    }
    // A replay of our own record re-adds the entry in case the first try died before the ZADD;
    // a duplicate published to another partition leaves the first shard's entry alone.
    if (o.created || (o.state == JobState::delay && o.shard == jobs[i].shard)) {
      follow.push_back({"SET", keys_.payload(jobs[i].job_id),
                        encode_payload({jobs[i].key, jobs[i].value, jobs[i].headers}), "NX"});
      follow.push_back({"ZADD", keys_.pending(o.shard), std::to_string(o.deliver_at), jobs[i].job_id});
      shards.insert(o.shard);
    }
    if (o.created) follow.push_back({"HINCRBY", keys_.stats(), counter(business, JobState::delay), "1"});
    if (o.cancelled_early) follow.push_back({"HINCRBY", keys_.stats(), counter(business, JobState::cancelled), "1"});
    out.push_back(std::move(o));
  }
  if (!shards.empty()) {
    Command sadd{"SADD", keys_.shards()};
    sadd.insert(sadd.end(), shards.begin(), shards.end());
    follow.push_back(std::move(sadd));
  }
  run_checked(follow);
  return out;
}

void JobStore::run_checked(const std::vector<Command>& commands) {
  if (commands.empty()) return;
  for (auto& r : redis_.pipeline(commands)) {
    if (r.view().is_error()) throw RedisCommandError("redis: " + r.view().error());
  }
}

std::vector<PendingEntry> JobStore::pending_between(std::string_view shard, std::optional<std::int64_t> after,
                                                    std::int64_t upto, std::size_t limit) {
  const std::string min = after ? "(" + std::to_string(*after) : "-inf";
  Command cmd{"ZRANGEBYSCORE", keys_.pending(shard), min, std::to_string(upto), "WITHSCORES"};
  if (limit > 0) cmd.insert(cmd.end(), {"LIMIT", "0", std::to_string(limit)});
  auto reply = redis_.command(cmd);
  ReplyView r = reply.view();
  std::vector<PendingEntry> out;
  out.reserve(r.size() / 2);
  for (size_t i = 0; i + 1 < r.size(); i += 2) {
    out.push_back({std::string(r[i].str()), score_of(r[i + 1])});
  }
  return out;
}

namespace {

// One job's claim from the script's reply and the payload read beside it. Never throws on what
// the bytes say: an unexpected shape is reported as an unreadable job.
Claim parse_claim(const std::string& job_id, ReplyView r, ReplyView payload) {
  Claim c;
  c.job_id = job_id;
  if (r.is_error()) {
    // WRONGTYPE (the key is not a hash) or a script failure on data no script anticipated.
    c.kind = Claim::Kind::unreadable;
    c.reason = "job hash unreadable: " + r.error().substr(0, 200);
    return c;
  }
  const std::string_view kind = r[0].str();
  if (kind == "deliver") {
    c.state = JobState::delay;
    c.deliver_at = parse_i64(r[1].str()).value_or(0);
    c.topic = std::string(r[2].str());
    c.business = std::string(r[3].str());
    c.shard = std::string(r[4].str());
    c.attempt = static_cast<int>(r[5].integer());
    if (payload.is_error() || payload.is_nil()) {
      c.kind = Claim::Kind::corrupt;
      c.reason = payload.is_nil() ? "corrupt job record: payload missing from Redis"
                                  : "corrupt job record: payload unreadable: " + payload.error().substr(0, 200);
      return c;
    }
    try {
      StoredPayload p = decode_payload(payload.str());
      c.key = std::move(p.key);
      c.value = std::move(p.value);
      c.headers = std::move(p.headers);
      c.kind = Claim::Kind::deliver;
    } catch (const std::invalid_argument& e) {
      c.kind = Claim::Kind::corrupt;
      c.reason = std::string("corrupt job record: payload unreadable: ") + e.what();
    }
  } else if (kind == "early") {
    c.kind = Claim::Kind::early;
    c.state = JobState::delay;
    c.deliver_at = parse_i64(r[1].str()).value_or(0);
  } else if (kind == "corrupt") {
    c.kind = Claim::Kind::corrupt;
    c.marked_failed = true;
    c.state = JobState::failed;
    c.reason = std::string(r[1].str());
    c.business = std::string(r[2].str());
    c.shard = std::string(r[3].str());
  } else if (kind == "missing") {
    c.kind = Claim::Kind::unreadable;
    c.reason = "no job hash for this pending entry";
  } else {
    c.kind = Claim::Kind::finished;
    c.state = parse_job_state(kind).value_or(JobState::corrupt);
  }
  return c;
}

}  // namespace

std::vector<Claim> JobStore::claim(std::span<const std::string> job_ids, std::int64_t now_ms) {
  std::vector<Command> per_job;
  per_job.reserve(job_ids.size());
  const std::string now = std::to_string(now_ms), retention = std::to_string(retention_s_);
  for (const auto& id : job_ids) per_job.push_back({keys_.job(id), now, retention});
  auto replies = eval_each(Script::claim, per_job, [&](size_t i) {
    return std::vector<Command>{{"GET", keys_.payload(job_ids[i])}};
  });

  std::vector<Claim> out;
  out.reserve(job_ids.size());
  for (size_t i = 0; i < job_ids.size(); ++i) {
    try {
      out.push_back(parse_claim(job_ids[i], replies[2 * i].view(), replies[2 * i + 1].view()));
    } catch (const RedisCommandError& e) {
      Claim c;
      c.job_id = job_ids[i];
      c.kind = Claim::Kind::unreadable;
      c.reason = std::string("claim reply unreadable: ") + e.what();
      out.push_back(std::move(c));
    }
  }
  return out;
}

void JobStore::set_aside(std::string_view shard, std::span<const Claim> claims, std::int64_t now_ms) {
  std::vector<Transition> done;
  std::vector<Command> follow;
  for (const Claim& c : claims) {
    switch (c.kind) {
      case Claim::Kind::deliver:
      case Claim::Kind::early:
        break;
      case Claim::Kind::finished:
        follow.push_back({"ZREM", keys_.pending(shard), c.job_id});
        follow.push_back({"UNLINK", keys_.payload(c.job_id)});
        break;
      case Claim::Kind::corrupt:
        if (c.marked_failed) {
          done.push_back({c.job_id, true, JobState::failed, c.business, std::string(shard)});
        } else {
          mark_failed(c.job_id, c.reason, now_ms);  // with its own ZREM, UNLINK and counters
        }
        break;
      case Claim::Kind::unreadable:
        follow.push_back({"HSET", keys_.quarantine(shard), c.job_id, c.reason});
        follow.push_back({"ZREM", keys_.pending(shard), c.job_id});
        follow.push_back({"UNLINK", keys_.payload(c.job_id)});
        break;
    }
  }
  run_checked(follow);
  // Those the claim script marked failed: ZREM, UNLINK and counters, as any transition gets.
  after_transitions(done, JobState::delay);
}

void JobStore::after_transitions(const std::vector<Transition>& done, JobState from_state) {
  std::vector<Command> follow;
  for (const auto& t : done) {
    // ZREM also when this call changed nothing but the job is already final: that is the
    // clean-up of a crash between a transition and its ZREM.
    if (is_final(t.state) && !t.shard.empty()) {
      follow.push_back({"ZREM", keys_.pending(t.shard), t.job_id});
      follow.push_back({"UNLINK", keys_.payload(t.job_id)});
    }
    if (t.changed && t.state != from_state) {
      follow.push_back({"HINCRBY", keys_.stats(), counter(t.business, from_state), "-1"});
      follow.push_back({"HINCRBY", keys_.stats(), counter(t.business, t.state), "1"});
    }
  }
  run_checked(follow);
}

std::vector<Transition> JobStore::mark_ready(std::span<const std::string> job_ids, std::int64_t now_ms) {
  std::vector<Command> per_job;
  per_job.reserve(job_ids.size());
  const std::string now = std::to_string(now_ms), retention = std::to_string(retention_s_);
  for (const auto& id : job_ids) per_job.push_back({keys_.job(id), now, retention});
  auto replies = eval_each(Script::mark_ready, per_job);
  std::vector<Transition> out;
  out.reserve(job_ids.size());
  for (size_t i = 0; i < job_ids.size(); ++i) out.push_back(parse_transition(job_ids[i], replies[i].view()));
  after_transitions(out, JobState::delay);
  return out;
}

Transition JobStore::transition(Script script, const std::string& job_id, Command args) {
  args.insert(args.begin(), keys_.job(job_id));
  auto replies = eval_each(script, {args});
  Transition t = parse_transition(job_id, replies.front().view());
  after_transitions({t}, JobState::delay);
  return t;
}

Transition JobStore::release(const std::string& job_id, std::string_view error, std::int64_t retry_at,
                             ReleaseOptions options) {
  Transition t = transition(Script::release, job_id,
                            {std::string(error), options.refund ? "1" : "0", options.keep_firing ? "1" : "0"});
  if (t.changed && !t.shard.empty()) {
    auto r = redis_.command({"ZADD", keys_.pending(t.shard), "XX", std::to_string(retry_at), job_id});
    if (r.view().is_error()) throw RedisCommandError("redis: " + r.view().error());
  }
  return t;
}

Transition JobStore::mark_failed(const std::string& job_id, std::string_view reason, std::int64_t now_ms) {
  return transition(Script::mark_failed, job_id,
                    {std::to_string(now_ms), std::string(reason), std::to_string(retention_s_)});
}

Transition JobStore::cancel(const std::string& job_id, std::int64_t now_ms, std::int64_t remember_s) {
  return transition(Script::cancel, job_id,
                    {std::to_string(now_ms), std::to_string(retention_s_), std::to_string(remember_s)});
}

std::optional<std::map<std::string, std::string>> JobStore::get(std::string_view job_id) {
  auto replies = redis_.pipeline({{"HGETALL", keys_.job(job_id)}, {"GET", keys_.payload(job_id)}});
  ReplyView r = replies[0].view();
  if (r.is_error()) return std::map<std::string, std::string>{{"error", "job hash unreadable: " + r.error()}};
  if (r.size() == 0) return std::nullopt;
  std::map<std::string, std::string> out;
  for (size_t i = 0; i + 1 < r.size(); i += 2) out.emplace(r[i].str(), r[i + 1].str());
  if (const ReplyView p = replies[1].view(); p.is_string()) {
    try {
      StoredPayload payload = decode_payload(p.str());
      if (payload.key) out.emplace("key", *payload.key);
      if (payload.value) out.emplace("value", *payload.value);
      out.emplace("headers", encode_headers(payload.headers));
    } catch (const std::invalid_argument& e) {
      out.emplace("payload_error", e.what());
    }
  }
  return out;
}

StoreStats JobStore::stats() {
  StoreStats s;
  auto members = redis_.command({"SMEMBERS", keys_.shards()});
  std::vector<std::string> shards;
  for (size_t i = 0; i < members.view().size(); ++i) shards.emplace_back(members.view()[i].str());
  std::vector<Command> cmds;
  for (const auto& shard : shards) {
    cmds.push_back({"ZCARD", keys_.pending(shard)});
    cmds.push_back({"ZRANGE", keys_.pending(shard), "0", "0", "WITHSCORES"});
  }
  cmds.push_back({"HGETALL", keys_.stats()});
  auto replies = redis_.pipeline(cmds);
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::int64_t n = replies[2 * i].view().integer();
    s.pending += n;
    s.pending_by_shard[shards[i]] = n;
    ReplyView first = replies[2 * i + 1].view();
    if (first.size() == 2) {
      const std::int64_t due = score_of(first[1]);
      if (!s.next_due || due < *s.next_due) s.next_due = due;
    }
  }
  ReplyView counters = replies.back().view();
  for (size_t i = 0; i + 1 < counters.size(); i += 2) {
    const std::string_view field = counters[i].str();
    const auto bar = field.rfind('|');
    if (bar == std::string_view::npos) continue;
    if (auto n = parse_i64(counters[i + 1].str())) {
      s.by_business_state[std::string(field.substr(0, bar))][std::string(field.substr(bar + 1))] = *n;
    }
  }
  return s;
}

}  // namespace delayd::storage
