// The Lua scripts that move jobs between states, a whole batch of one shard per call. Their text
// lives in storage/lua/*.lua, one file per script with its keys, arguments, stride and replies
// documented at its top; the build compiles them in (storage/CMakeLists.txt, as
// storage/lua/embedded.hpp: lua::kPrelude, lua::kAccept, ...).
//
// Every batch script (all but take_shard.lua, which takes the owner key and the wake list)
// takes the same keys, all in the shard's hash slot (so one call is atomic on a single primary
// and legal under Redis Cluster):
//   KEYS[1] the shard's pending set, KEYS[2] its counters, KEYS[3] its quarantine hash,
//   KEYS[4] its in-flight hash, KEYS[5] its owner, KEYS[6..] one job record per job of the batch.
// and ARGV[1] now (epoch ms), ARGV[2] retention_s of finished jobs (0: kept for ever),
// ARGV[3] a script-specific number, ARGV[4] the caller's fence (below), then a fixed number of
// arguments per job (its "stride", given under each script), the first of which is always the
// job-id.
//
// FENCING. A broker that owns a shard holds its fence: the epoch it got from take_shard.lua, which
// INCRs it in KEYS[5] ("<epoch> <member> <since_ms>") at every assignment, so a later owner
// always holds a larger one. The scripts that decide what gets produced, or that rewrite what
// the owner of the moment relies on, refuse the whole call (error "FENCED <owner>") unless
// ARGV[4] is the current epoch: claim, release (which re-scores) and mark_failed. So a broker
// whose shard moved on (revoked while it was busy, or paused past its session) produces nothing
// new and cannot undo the new owner's in-flight entry or fail a job the new owner delivers.
// The in-flight entry records the claiming epoch ("<attempt> <firing_at> <epoch>").
// Not fenced, on purpose: accept and cancel (they apply records of the ingest topic, which are
// facts whichever member reads them, and are idempotent), and mark_ready, which reports a fact
// too (Kafka acknowledged a ready record): refusing it would let the new owner's later cancel,
// failure or retry contradict a record that is in the ready topic. ARGV[4] = '' (tools and
// tests, which own no shard) skips the check.
// A call returns one group of values per job, in the order of KEYS[6..].
//
// A job record is one Redis string (key_schema.hpp gives the format): a header line
// "<state> <deliver_at> <attempt> <business>[ <name>=<value>]..." then "\n" then the payload.
// prelude.lua parses and writes it; every batch script runs after the prelude (HOW REDIS RUNS THEM below). A
// record that does not parse is "corrupt": the script that meets it says so, and claim sets it
// aside.
// Counters ("<business>|<state>" in KEYS[2]) are bumped once per batch and business.
//
// kScripts below is the one list of the scripts and of what their callers must know of each:
// whether it runs after the prelude, whether it is fenced, how many keys come before the jobs'
// records and how many arguments each job takes. static_asserts hold it against the texts.
//
// Threading: immutable texts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "storage/lua/embedded.hpp"

namespace delayd::storage::lua {

// The scripts, in the order of kScripts. (job_store.hpp declares it too, opaque.)
enum class Script : unsigned char {
  accept,
  claim,
  mark_ready,
  release,
  mark_failed,
  cancel,
  report,
  reschedule,
  mark_delivered,
  retry,
  browse,
  pending,
  find,
  take_shard,
};

// KEYS[1..5] of a batch script: pending set, counters, quarantine, in-flight, owner.
inline constexpr std::size_t kShardKeys = 5;
// ARGV[1..4] of a batch script: now, retention_s, the script's own number, the fence.
inline constexpr std::size_t kFixedArgs = 4;

struct ScriptInfo {
  Script id;
  std::string_view name;  // the file storage/lua/<name>.lua
  std::string_view body;  // its text
  // A batch of one shard's jobs: runs after kPrelude, takes the kShardKeys keys then one record
  // per job, the kFixedArgs arguments then `stride` per job. Stride 0: a script of the shard
  // that runs after kPrelude but takes no jobs: the kShardKeys keys and `args` arguments, the
  // first kFixedArgs of them the usual ones (browse). Otherwise `keys` and `args` are all.
  bool batch;
  bool fenced;  // refused unless ARGV[4] is the shard's current fence (FENCING above)
  std::size_t keys;
  std::size_t args;    // fixed arguments (a batch script's jobs' come after)
  std::size_t stride;  // arguments per job, the first its id (batch scripts; 0: none)
};

inline constexpr ScriptInfo kScripts[] = {
    {Script::accept, "accept", kAccept, true, false, kShardKeys, kFixedArgs, 5},
    {Script::claim, "claim", kClaim, true, true, kShardKeys, kFixedArgs, 3},
    {Script::mark_ready, "mark_ready", kMarkReady, true, false, kShardKeys, kFixedArgs, 4},
    {Script::release, "release", kRelease, true, true, kShardKeys, kFixedArgs, 5},
    {Script::mark_failed, "mark_failed", kMarkFailed, true, true, kShardKeys, kFixedArgs, 4},
    {Script::cancel, "cancel", kCancel, true, false, kShardKeys, kFixedArgs, 2},
    {Script::report, "report", kReport, true, false, kShardKeys, kFixedArgs, 7},
    {Script::reschedule, "reschedule", kReschedule, true, false, kShardKeys, kFixedArgs, 2},
    {Script::mark_delivered, "mark_delivered", kMarkDelivered, true, false, kShardKeys, kFixedArgs, 10},
    {Script::retry, "retry", kRetry, true, false, kShardKeys, kFixedArgs, 1},
    {Script::browse, "browse", kBrowse, true, false, kShardKeys, kFixedArgs + 14, 0},
    {Script::pending, "pending", kPending, true, false, kShardKeys, kFixedArgs + 4, 0},
    {Script::find, "find", kFind, true, false, kShardKeys, kFixedArgs, 1},
    {Script::take_shard, "take_shard", kTakeShard, false, false, 2, 2, 0},
};

constexpr const ScriptInfo& info(Script s) { return kScripts[static_cast<std::size_t>(s)]; }

// HOW REDIS RUNS THEM. Two ways, the same texts:
//  - as delayd's function library (Redis 7 and later: FUNCTION LOAD once, FCALL each call): the
//    prelude runs once, when the library loads, and defines its helpers once; each script is a
//    function of the library, function_name(), whose body starts with begin(KEYS, ARGV)
//    (prelude_jobs.lua: every local of the prelude that holds something of one call is set
//    there). A call then pays for its body only, where as EVAL it defined the prelude's 50-odd
//    helpers again each time (docs/performance/cost.md, "Redis Functions").
//  - as EVAL scripts (SCRIPT LOAD, EVALSHA: a Redis before 7, or a user the ACL denies FUNCTION):
//    each batch script is the prelude, begin(KEYS, ARGV), then its body, one chunk.
// The library is named by a hash of its text (library_name()), so that two versions of delayd
// that share a Redis during a rolling upgrade each call their own functions.

// A batch script's body as one EVAL chunk: the prelude, begin(KEYS, ARGV), then `body`.
inline std::string batch_chunk(std::string_view body) {
  return std::string(kPrelude) + "begin(KEYS, ARGV)\n" + std::string(body);
}

// The text SCRIPT LOAD gets: a batch script as batch_chunk(), another as it is.
inline std::string source(const ScriptInfo& s) { return s.batch ? batch_chunk(s.body) : std::string(s.body); }

namespace detail {

// The library's text after its first line: the prelude, then one register_function() per script,
// each named `prefix` + its name.
inline std::string library_body(std::string_view prefix) {
  std::string text(kPrelude);
  for (const ScriptInfo& s : kScripts) {
    text += "redis.register_function('";
    text += prefix;
    text += s.name;
    text += "', function(KEYS, ARGV)\n";
    if (s.batch) text += "begin(KEYS, ARGV)\n";
    text += s.body;
    text += "\nend)\n";
  }
  return text;
}

// FNV-1a, 64 bits, in 16 hex digits: the same on every build of the same text.
inline std::string fnv1a_hex(std::string_view text) {
  std::uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<std::size_t>(i)] = kHex[h & 0xf];
  return out;
}

}  // namespace detail

// "delayd_<16 hex digits>": the hash of the library's text (its functions named without it).
inline const std::string& library_name() {
  static const std::string name = "delayd_" + detail::fnv1a_hex(detail::library_body("delayd_"));
  return name;
}

// The function FCALL calls for script s: "<library_name()>_<its name>".
inline std::string function_name(const ScriptInfo& s) { return library_name() + "_" + std::string(s.name); }

// What FUNCTION LOAD gets: the library of every script.
inline std::string library_source() {
  return "#!lua name=" + library_name() + "\n" + detail::library_body(library_name() + "_");
}

namespace detail {

// Whether every occurrence of `before` in `text` is followed by the number n (and one is).
constexpr bool says_number_after(std::string_view text, std::string_view before, std::size_t n) {
  bool found = false;
  for (std::size_t at = text.find(before); at != std::string_view::npos; at = text.find(before, at + 1)) {
    std::size_t i = at + before.size(), v = 0, digits = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits)
      v = v * 10 + static_cast<std::size_t>(text[i] - '0');
    if (digits == 0 || v != n) return false;
    found = true;
  }
  return found;
}

// The largest number that follows an occurrence of `before` in `text` (0 if none does).
constexpr std::size_t largest_number_after(std::string_view text, std::string_view before) {
  std::size_t largest = 0;
  for (std::size_t at = text.find(before); at != std::string_view::npos; at = text.find(before, at + 1)) {
    std::size_t v = 0;
    for (std::size_t i = at + before.size(); i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i)
      v = v * 10 + static_cast<std::size_t>(text[i] - '0');
    largest = v > largest ? v : largest;
  }
  return largest;
}

// What the texts must say for the table to be right. A job's arguments start at
// ARGV[kFixedArgs + 1 + (i - FIRST) * stride] for KEYS[i], FIRST = kShardKeys + 1 (prelude.lua):
// written "local a = 5 + (i - FIRST) * <stride>", or ARGV[i - 1] for stride 1.
constexpr bool consistent(const ScriptInfo& s, std::size_t index) {
  if (static_cast<std::size_t>(s.id) != index) return false;
  const bool fence_checked = s.body.find("check_fence()") != std::string_view::npos;
  if (s.fenced != fence_checked || (s.fenced && !s.batch)) return false;
  if (!s.batch) return s.stride == 0 && s.body.find("FIRST") == std::string_view::npos;
  if (s.stride == 0) {
    return s.keys == kShardKeys && s.args >= kFixedArgs && s.body.find("FIRST") == std::string_view::npos &&
           largest_number_after(s.body, "ARGV[") == s.args;
  }
  if (s.keys != kShardKeys || s.args != kFixedArgs) return false;
  if (s.stride == 1) {
    return says_number_after(s.body, "ARGV[i - ", kShardKeys + 1 - (kFixedArgs + 1)) &&
           s.body.find("(i - FIRST) * ") == std::string_view::npos;
  }
  return says_number_after(s.body, "local a = ", kFixedArgs + 1) &&
         says_number_after(s.body, "(i - FIRST) * ", s.stride) && s.body.find("ARGV[i - ") == std::string_view::npos;
}

constexpr bool all_consistent() {
  for (std::size_t i = 0; i < std::size(kScripts); ++i) {
    if (!consistent(kScripts[i], i)) return false;
  }
  return true;
}

}  // namespace detail

static_assert(detail::says_number_after(kPrelude, "local FIRST = ", kShardKeys + 1),
              "prelude.lua's FIRST must be the first KEYS index after the shard's keys");
static_assert(std::size(kScripts) == static_cast<std::size_t>(Script::take_shard) + 1,
              "one row of kScripts per Script");
static_assert(detail::all_consistent(),
              "kScripts disagrees with a script's text: its order, fencing (check_fence()) or stride");

}  // namespace delayd::storage::lua
