// JobStore's reads for people and tools (job_store.hpp): where a job is, its fields, the console's
// walks, the counts and the statistics. None of them changes a job.
#include <algorithm>
#include <charconv>
#include <map>

#include "storage/job_store.hpp"
#include "storage/job_store_replies.hpp"
#include "storage/lua_scripts.hpp"

namespace delayd::storage {

using reply_parse::add_history;
using reply_parse::add_in_flight;
using reply_parse::parse_i64;
using reply_parse::parse_record;
using reply_parse::percent_decode;
using reply_parse::score_of;

namespace {

// The shard, business and attempt from a record's header line ("<state> <deliver_at> <attempt>
// <business> ..."), read leniently: a corrupt line still names its shard, and the script that
// meets the record says it is corrupt.
Located located_from(const std::string& shard, std::string_view line) {
  Located l{shard, {}, 0};
  for (int word = 0; word < 4 && !line.empty(); ++word) {
    const auto sp = line.find(' ');
    const std::string_view w = line.substr(0, sp);
    if (word == 2) l.attempt = static_cast<int>(parse_i64(w).value_or(0));
    if (word == 3) l.business = std::string(w);
    line = sp == std::string_view::npos ? std::string_view{} : line.substr(sp + 1);
  }
  return l;
}

}  // namespace

std::vector<std::optional<Located>> JobStore::locate(std::span<const std::string> job_ids,
                                                     std::span<const std::int32_t> likely) {
  std::vector<std::optional<Located>> out(job_ids.size());
  const std::vector<std::string> shards = known_shards();
  if (shards.empty() || job_ids.empty()) return out;
  std::vector<std::optional<std::int32_t>> partition(shards.size());  // of each shard, by its name's end
  for (size_t k = 0; k < shards.size(); ++k) {
    const auto colon = shards[k].rfind(':');
    if (colon != std::string::npos)
      partition[k] = partition_of(shards[k], std::string_view(shards[k]).substr(0, colon));
  }
  const auto hinted = [&](size_t i) { return i < likely.size() && likely[i] >= 0; };
  // Round one: a job with a likely partition in the shards of that partition, any other in every
  // shard. Round two, only for jobs round one did not find: every shard not read yet.
  std::vector<std::pair<size_t, size_t>> first;
  for (size_t i = 0; i < job_ids.size(); ++i) {
    for (size_t k = 0; k < shards.size(); ++k) {
      if (!hinted(i) || partition[k] == likely[i]) first.emplace_back(i, k);
    }
  }
  locate_in(job_ids, shards, first, out);
  std::vector<std::pair<size_t, size_t>> second;
  for (size_t i = 0; i < job_ids.size(); ++i) {
    if (out[i] || !hinted(i)) continue;
    for (size_t k = 0; k < shards.size(); ++k) {
      if (partition[k] != likely[i]) second.emplace_back(i, k);
    }
  }
  if (!second.empty()) locate_in(job_ids, shards, second, out);
  return out;
}

void JobStore::locate_in(std::span<const std::string> job_ids, const std::vector<std::string>& shards,
                         std::span<const std::pair<size_t, size_t>> reads, std::vector<std::optional<Located>>& out) {
  // The first four words of the header line only, in the common case: they fit in kLocateBytes
  // unless the business name is long (the contract allows up to 100 characters, so the words can
  // take 136 bytes). A read that fills the range before its "\n" is repeated whole in a second
  // round trip, so a long business is never cut short.
  // Per job and shard, two reads (key_schema.hpp: a delay job's record is a field of the shard's
  // hash, read whole; any other's is a key of its own).
  constexpr std::size_t kLocateBytes = 128;
  std::vector<redis::Command> cmds;
  cmds.reserve(2 * reads.size());
  for (const auto& [i, k] : reads) {
    cmds.push_back({"HGET", keys_.delay_records(shards[k]), job_ids[i]});
    cmds.push_back({"GETRANGE", keys_.job(shards[k], job_ids[i]), "0", std::to_string(kLocateBytes - 1)});
  }
  const auto replies = redis_.pipeline(cmds);
  std::vector<std::pair<size_t, size_t>> cut;  // (job, shard) whose line overflowed
  std::vector<redis::Command> whole;
  for (size_t n = 0; n < reads.size(); ++n) {
    const auto [i, k] = reads[n];
    if (out[i]) continue;
    const redis::ReplyView in_hash = replies[2 * n].view();
    if (in_hash.is_string() && !in_hash.str().empty()) {
      out[i] = located_from(shards[k], in_hash.str().substr(0, in_hash.str().find('\n')));
      continue;
    }
    const redis::ReplyView r = replies[2 * n + 1].view();
    if (!r.is_string() || r.str().empty()) continue;
    const std::size_t nl = r.str().find('\n');
    if (nl == std::string_view::npos && r.str().size() >= kLocateBytes) {
      cut.emplace_back(i, k);
      whole.push_back({"GET", keys_.job(shards[k], job_ids[i])});
    }
    out[i] = located_from(shards[k], r.str().substr(0, nl));
  }
  if (whole.empty()) return;
  const auto full = redis_.pipeline(whole);
  for (size_t j = 0; j < cut.size(); ++j) {
    const redis::ReplyView r = full[j].view();
    if (!r.is_string()) continue;  // gone since the first read: keep what the first read said
    const auto [i, k] = cut[j];
    out[i] = located_from(shards[k], r.str().substr(0, r.str().find('\n')));
  }
}

std::vector<BrowsePage> JobStore::browse(std::span<const std::pair<std::string, BrowseQuery>> walks,
                                         std::int64_t now_ms) {
  const auto opt = [](const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : std::string(); };
  std::vector<std::vector<redis::Command>> groups;
  for (const auto& [shard, q] : walks) {
    groups.push_back({shard_call(
        Script::browse, shard, now_ms,
        {std::string(to_string(q.state)), std::to_string(q.walk_start),
         q.from ? std::to_string(q.from->score) : std::string(), q.from ? q.from->job_id : std::string(),
         q.inclusive ? "1" : "0", std::to_string(q.lo), std::to_string(q.hi), std::to_string(q.want),
         std::to_string(q.budget), q.business, q.id_prefix, q.error_text, opt(q.deliver_from), opt(q.deliver_to)})});
  }
  static_assert(lua::info(Script::browse).args == lua::kFixedArgs + 14);
  const auto replies = eval_groups(groups);
  std::vector<BrowsePage> pages;
  for (size_t w = 0; w < walks.size(); ++w) {
    const redis::ReplyView r = replies[w].front().view();
    if (r.is_error()) throw redis::RedisCommandError("redis: browse script: " + r.error());
    BrowsePage page;
    const redis::ReplyView matches = r[0];
    for (size_t i = 0; i < matches.size(); ++i) {
      const redis::ReplyView m = matches[i];
      BrowsedJob j;
      j.job_id = m[0].str();
      j.shard = walks[w].first;
      j.state = parse_job_state(m[1].str()).value_or(JobState::corrupt);
      j.deliver_at = parse_i64(m[2].str()).value_or(0);
      j.attempt = parse_i64(m[3].str()).value_or(0);
      j.business = m[4].str();
      j.error = percent_decode(m[5].str());
      j.score = score_of(m[6]);
      j.in_flight = m[7].str() == "1";
      page.jobs.push_back(std::move(j));
    }
    if (r[1].size() == 2) page.last = WalkPosition{score_of(r[1][0]), std::string(r[1][1].str())};
    page.done = r[2].integer() == 1;
    page.examined = static_cast<size_t>(r[3].integer());
    pages.push_back(std::move(page));
  }
  return pages;
}

std::vector<std::string> JobStore::known_shards(std::string_view first) {
  auto members = redis_.command({"SMEMBERS", keys_.shards()});
  std::vector<std::string> shards;
  if (members.view().is_array()) {
    for (size_t i = 0; i < members.view().size(); ++i) shards.emplace_back(members.view()[i].str());
  }
  std::sort(shards.begin(), shards.end());
  if (!first.empty()) {
    shards.erase(std::remove(shards.begin(), shards.end(), first), shards.end());
    shards.insert(shards.begin(), std::string(first));
  }
  return shards;
}

std::vector<std::string> JobStore::holding(const std::string& job_id, const std::vector<std::string>& shards) {
  std::vector<redis::Command> cmds;
  for (const auto& s : shards) {
    cmds.push_back({"HEXISTS", keys_.delay_records(s), job_id});  // a delay job (key_schema.hpp)
    cmds.push_back({"EXISTS", keys_.job(s, job_id)});             // any other
  }
  auto replies = redis_.pipeline(cmds);
  std::vector<std::string> out;
  const auto one = [](const redis::ReplyView r) { return r.is_integer() && r.integer() == 1; };
  for (size_t i = 0; i < shards.size(); ++i) {
    if (one(replies[2 * i].view()) || one(replies[2 * i + 1].view())) out.push_back(shards[i]);
  }
  return out;
}

std::vector<std::string> JobStore::shards_holding(const std::string& job_id, std::string_view first) {
  return holding(job_id, known_shards(first));
}

std::optional<std::map<std::string, std::string>> JobStore::get(const std::string& job_id) {
  return get_many(std::span<const std::string>(&job_id, 1)).front();
}

std::vector<std::optional<JobStore::Fields>> JobStore::get_many(std::span<const std::string> job_ids) {
  const std::vector<std::string> shards = known_shards();
  // Per job and shard: its record (in the shard's hash while delay, else a key of its own:
  // key_schema.hpp), its entry in the in-flight hash and its history list.
  constexpr size_t kReads = 4;
  std::vector<redis::Command> cmds;
  cmds.reserve(kReads * job_ids.size() * shards.size());
  for (const auto& id : job_ids) {
    for (const auto& shard : shards) {
      cmds.push_back({"HGET", keys_.delay_records(shard), id});
      cmds.push_back({"GET", keys_.job(shard, id)});
      cmds.push_back({"HGET", keys_.in_flight(shard), id});
      cmds.push_back({"LRANGE", keys_.history(shard, id), "0", "-1"});
    }
  }
  auto replies = redis_.pipeline(cmds);
  // The dictionaries that the payloads of the records found name, loaded before they are parsed.
  std::vector<std::pair<std::string_view, std::string_view>> records;
  for (size_t i = 0; i < job_ids.size(); ++i) {
    for (size_t k = 0; k < shards.size(); ++k) {
      const size_t at = kReads * (i * shards.size() + k) + 1;
      for (const size_t read : {at - 1, at}) {
        if (replies[read].view().is_string()) records.emplace_back(shards[k], replies[read].view().str());
      }
    }
  }
  load_dictionaries(records);
  std::vector<std::optional<Fields>> out(job_ids.size());
  for (size_t i = 0; i < job_ids.size(); ++i) {
    for (size_t k = 0; k < shards.size() && !out[i]; ++k) {
      const size_t at = kReads * (i * shards.size() + k) + 1;  // the key's read; the hash's is before it
      const redis::ReplyView in_hash = replies[at - 1].view();
      const redis::ReplyView r = in_hash.is_nil() ? replies[at].view() : in_hash;
      if (r.is_nil()) continue;
      Fields fields{{"shard", shards[k]}};
      if (r.is_error()) {
        fields.emplace("error", "job record unreadable: " + r.error());
      } else if (auto parsed = parse_record(r.str(), *dictionaries_)) {
        fields.merge(*parsed);
        add_in_flight(fields, replies[at + 1].view());
        add_history(fields, replies[at + 2].view());
      } else {
        fields.emplace("error", "corrupt job record: header line unreadable");
      }
      out[i] = std::move(fields);
    }
  }
  return out;
}

std::vector<std::int64_t> JobStore::due_counts(std::span<const std::int64_t> bounds) {
  const std::vector<std::string> shards = known_shards();
  std::vector<std::int64_t> out(bounds.size(), 0);
  if (shards.empty() || bounds.empty()) return out;
  std::string joined;
  for (const std::int64_t b : bounds) joined += (joined.empty() ? "" : " ") + std::to_string(b);
  std::vector<std::vector<redis::Command>> groups;
  for (const auto& shard : shards) groups.push_back({shard_call(Script::pending, shard, 0, {"count", joined, "", ""})});
  const auto replies = eval_groups(groups);
  for (const auto& group : replies) {
    const redis::ReplyView r = group.front().view();
    if (!r.is_array()) continue;
    for (std::size_t k = 0; k < r.size() && k < bounds.size(); ++k) {
      if (r[k].is_integer()) out[k] += r[k].integer();
    }
  }
  return out;
}

StoreStats JobStore::stats() {
  StoreStats s;
  const std::vector<std::string> shards = known_shards();
  std::vector<std::vector<redis::Command>> groups;
  for (const auto& shard : shards) {
    groups.push_back({shard_call(Script::pending, shard, 0, {"size", "", "", ""}), {"HGETALL", keys_.stats(shard)}});
  }
  const auto replies = eval_groups(groups);
  for (size_t i = 0; i < shards.size(); ++i) {
    const redis::ReplyView size = replies[i][0].view();
    if (size.is_error()) throw redis::RedisCommandError("redis: pending script: " + size.error());
    const std::int64_t n = size[0].integer();
    s.pending += n;
    s.pending_by_shard[shards[i]] = n;
    if (!size[1].str().empty()) {
      const std::int64_t due = score_of(size[1]);
      if (!s.next_due || due < *s.next_due) s.next_due = due;
    }
    redis::ReplyView counters = replies[i][1].view();
    for (size_t k = 0; k + 1 < counters.size(); k += 2) {
      const std::string_view field = counters[k].str();
      const auto bar = field.rfind('|');
      if (bar == std::string_view::npos) continue;
      if (auto v = parse_i64(counters[k + 1].str())) {
        s.by_business_state[std::string(field.substr(0, bar))][std::string(field.substr(bar + 1))] += *v;
      }
    }
  }
  return s;
}

}  // namespace delayd::storage
