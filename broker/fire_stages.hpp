// The fire path's two stages beside the loop (store_worker.hpp), each on a thread and Redis
// connection of its own:
//
//   ClaimWorker  claims due jobs (JobStore::claim) under the owner's fence, issued a round ahead
//                (FirePath::kMaxClaimRounds) while the previous round is still in flight, so
//                that Redis is busy claiming while the loop dispatches and produces what the
//                previous claims returned. Each request is one shard's claim call (one round
//                trip), handed back as soon as it is done.
//   MarkWorker   writes "ready" for records Kafka acknowledged (JobStore::mark_ready), merged
//                per shard per turn (one mark_ready call each, its script calls pipelined). A
//                turn gathers for scheduler.mark_gather_ms (store_worker.hpp): at 2 000 jobs/s
//                Redis then runs 13 500 script calls for 40 000 jobs instead of 23 500 and
//                spends a quarter less CPU a job (docs/performance/cost.md, "Marks gathered").
//                Not every shard's calls in one round trip: tried, and on one Redis the claims
//                then waited behind the larger pipeline (lateness at 10 000/s, max 77-111 ms
//                against 6-78 ms, four runs each, alternated).
//
// Crash points: as claim and mark in storage/job_store.hpp's table. A crash while a claim is
// queued or in flight leaves the job delay (claimed or not): loaded and claimed again after the
// restart. A crash while a mark is queued (up to mark_gather_ms) or in flight leaves the job
// claimed and not marked: in at_least_once delivered again, as a crash between produce and mark
// always did (hence no gathering there by default); in exactly_once the next owner finds the
// delivery in the shard's delivery log and marks the job ready without a second record.
// Fencing: a claim request carries the fence the loop's store holds for the shard
// (JobStore::adopt_fence); Redis refuses it (ShardFenced, as the result's error) once another
// member took the shard. Marks are not fenced.
// Threading: see store_worker.hpp.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "broker/store_worker.hpp"
#include "storage/job_store.hpp"

namespace delayd::broker {

struct ClaimRequest {
  std::uint64_t id = 0;  // the caller's, handed back in the result
  std::string shard;
  std::vector<std::string> job_ids;
  std::int64_t now_ms = 0;
  std::int64_t ahead_ms = 0;
  std::optional<std::int64_t> fence;              // the loop's fence for the shard (none: refused as fenced)
  std::vector<std::int64_t> due_at;               // job_ids[i]'s due time in the scheduler: its pending entry's score
  std::vector<storage::KnownDelivery> delivered;  // empty, or job_ids[i]'s delivery a takeover found logged
};
struct ClaimResult {
  std::uint64_t id = 0;
  std::vector<storage::Claim> claims;  // one per job of the request, in its order (no error)
  std::exception_ptr error;            // set: nothing of the request was claimed
};
using ClaimWorker = StoreWorker<ClaimRequest, ClaimResult>;
// The claim stage's work: each request's claim call, in order.
ClaimWorker::Work claim_work();

struct MarkRequest {
  std::uint64_t id = 0;
  std::string shard;
  std::vector<storage::JobStore::Delivered> jobs;
  std::int64_t now_ms = 0;
};
struct MarkResult {
  std::uint64_t id = 0;
  std::vector<storage::Transition> marked;  // one per job of the request, in its order (no error)
  std::exception_ptr error;                 // set: nothing of the request is known to be written
};
using MarkWorker = StoreWorker<MarkRequest, MarkResult>;
// The mark stage's work: the turn's requests merged per shard.
MarkWorker::Work mark_work();

}  // namespace delayd::broker
