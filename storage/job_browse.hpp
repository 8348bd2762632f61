// walk_jobs(): a listing of jobs across every shard, a page at a time, for the console
// (GET /jobs) and the tools. Cheap enough for a busy broker because it walks indexes, never
// the keyspace: waiting jobs through each shard's pending set (by due time, earliest first),
// the others through the state indexes (key_schema.hpp, by when the job entered its state,
// newest first); each entry looked at costs one GETRANGE of its record in Redis, inside
// browse.lua, at most kCallBudget per script call.
//
// Order. One state after another, in the filter's order; within a state one sequence over all
// shards, ordered by (score, job-id, shard) (reversed for the newest-first states). Each shard
// returns its next matches and how far it looked; only what lies before the nearest of those
// frontiers is sure of its place, so a page is cut there and the next round (or page) starts
// from it. A shard never lists the same entry twice in one walk: entries that moved in after the
// walk started are left out (a delay job with mv later than the start; an entry of a state
// index scored later than the start). A job that changes state during the walk may be missed:
// the walk is not a snapshot.
//
// Cost bounds: a page looks at no more than kPageBudget entries in all; when the filter matches
// so rarely that the page is not full by then, the page is returned short, with a cursor to go
// on (`partial`).
// Threading: as the JobStore it is given.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "storage/job_store.hpp"

namespace delayd::storage {

// Entries one browse.lua call looks at, at most: about a millisecond of Redis (5 us each,
// bench/console_bench.cpp), so that a walk never holds up the fire path for longer.
inline constexpr std::size_t kCallBudget = 200;
// Entries one page looks at, at most, over all shards and calls: about 50 ms.
inline constexpr std::size_t kPageBudget = 10'000;
// The largest score a walk passes (15 digits: exact in Lua's doubles, job_record.hpp).
inline constexpr std::int64_t kMaxWalkScore = 999'999'999'999'999;

struct JobFilter {
  std::vector<JobState> states;  // stored states, walked in this order (none: every state)
  std::string business;          // empty: any
  std::string id_prefix;         // empty: any
  std::string error_text;        // empty: any; else the job's (last) error holds it, any case
  // delay: the due time (pending score); other states: the record's deliver_at.
  std::optional<std::int64_t> due_from, due_to;
};

// Where a walk stands between pages.
struct WalkCursor {
  std::int64_t walk_start = 0;     // epoch ms, fixed for the whole walk
  std::size_t state = 0;           // index into the filter's states
  std::optional<WalkPosition> at;  // the last entry passed in that state; nullopt: its start
  std::string shard;               // at's shard
};

struct WalkPage {
  std::vector<BrowsedJob> jobs;
  std::optional<WalkCursor> next;  // nullopt: the walk is over
  bool partial = false;            // short because kPageBudget ran out, not because it ended
  std::size_t examined = 0;
};

// Every stored state in the order a walk of "all states" takes.
inline std::vector<JobState> all_walk_states() {
  return {JobState::delay,  JobState::ready,     JobState::running,
          JobState::failed, JobState::cancelled, JobState::finished};
}

// The next page of up to `limit` jobs after `cursor` (a fresh walk: WalkCursor{now, 0, {}, {}}).
// Precondition: limit >= 1; the filter's states are stored states.
WalkPage walk_jobs(JobStore& store, const JobFilter& filter, const WalkCursor& cursor, std::size_t limit,
                   std::int64_t now_ms);

// How many jobs a whole walk of `filter` lists (a bulk action's dry run), counted page by page
// until the walk ends or `for_at_most` has passed (complete false then).
struct JobCount {
  std::int64_t matched = 0;
  std::size_t examined = 0;
  bool complete = false;
};
JobCount count_jobs(JobStore& store, const JobFilter& filter, std::int64_t now_ms,
                    std::chrono::milliseconds for_at_most);

}  // namespace delayd::storage
