// LoopCounters: what the scheduling loop has counted since start, as typed fields.
//
// Owns the counter structs of the two paths (IngestCounters, kept by IngestPath; FireCounters,
// kept by FirePath), the dead letters by reason (an array indexed by DeadLetterReason), and the
// one table that names each counter for the outside world: the keys of /stats "counters" (and,
// through README, what operators read). /metrics reads the fields themselves, so a misspelt
// counter is a compile error, not a silent 0.
// Invariants: every field is a total since start (never decreases while the process lives);
// gauges (a longest turn, records in flight) do not belong here but in LoopSnapshot's own
// fields. Every uint64 field of IngestCounters and FireCounters has exactly one entry in
// kIngestCounterNames or kFireCounterNames (the names are those /stats has always used).
// Threading: value types; each path mutates its own on the scheduling loop's thread, and a copy
// travels in the LoopSnapshot to the admin endpoint.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "broker/dead_letter.hpp"
#include "broker/duration_histogram.hpp"

namespace delayd::broker {

// Dead-letter copies by reason: one total per DeadLetterReason.
struct DeadLetterCounts {
  std::array<std::uint64_t, kDeadLetterReasons.size()> by_reason{};

  // The total of reason `r`.
  std::uint64_t& operator[](DeadLetterReason r) { return by_reason[static_cast<std::size_t>(r)]; }
  // The total of reason `r`.
  std::uint64_t operator[](DeadLetterReason r) const { return by_reason[static_cast<std::size_t>(r)]; }
  // Adds `other`'s totals reason by reason.
  DeadLetterCounts& operator+=(const DeadLetterCounts& other) {
    for (std::size_t i = 0; i < by_reason.size(); ++i) by_reason[i] += other.by_reason[i];
    return *this;
  }
};

// IngestPath's totals (broker/ingest_path.hpp).
struct IngestCounters {
  std::uint64_t accepted = 0;    // new jobs
  std::uint64_t duplicates = 0;  // job-ids seen before
  std::uint64_t cancelled = 0;   // including jobs that arrived after their cancel
  std::uint64_t dead_lettered = 0;
  DeadLetterCounts dead_lettered_by;  // the records of dead_lettered, by reason
  std::uint64_t dead_letter_retries = 0;
  std::uint64_t rescheduled = 0;
  std::uint64_t reschedules_late = 0;    // the job was in flight already
  std::uint64_t reschedules_missed = 0;  // unknown job, or not delay any more
  std::uint64_t reports_running = 0;
  std::uint64_t reports_finished = 0;
  std::uint64_t reports_failed = 0;
  std::uint64_t reports_ignored = 0;  // did not fit the job's state
  std::uint64_t reports_unknown = 0;  // no such job
  std::uint64_t upserted = 0;         // upserts that replaced a waiting job's version
  std::uint64_t dropped = 0;          // etf1 schedules past due when produced (etf1.past_due = drop)
  std::uint64_t ignored = 0;          // records left alone on purpose (delayd's own etf1 tombstones)

  // Adds another ingest stage's totals (one stage per consumer group: broker/ingest_stage.hpp).
  IngestCounters& operator+=(const IngestCounters& o) {
    accepted += o.accepted;
    duplicates += o.duplicates;
    cancelled += o.cancelled;
    dead_lettered += o.dead_lettered;
    dead_lettered_by += o.dead_lettered_by;
    dead_letter_retries += o.dead_letter_retries;
    rescheduled += o.rescheduled;
    reschedules_late += o.reschedules_late;
    reschedules_missed += o.reschedules_missed;
    reports_running += o.reports_running;
    reports_finished += o.reports_finished;
    reports_failed += o.reports_failed;
    reports_ignored += o.reports_ignored;
    reports_unknown += o.reports_unknown;
    upserted += o.upserted;
    dropped += o.dropped;
    ignored += o.ignored;
    return *this;
  }
};
// A field added to IngestCounters must be added to operator+= too (this fails to remind).
static_assert(sizeof(IngestCounters) == 16 * sizeof(std::uint64_t) + sizeof(DeadLetterCounts),
              "IngestCounters changed: update operator+=");

// FirePath's totals (broker/fire_path.hpp).
struct FireCounters {
  std::uint64_t produced = 0;
  std::uint64_t delivered = 0;
  std::uint64_t retried = 0;         // attempts Kafka refused (counted)
  std::uint64_t retried_outage = 0;  // attempts not counted: an outage, or a missing ready topic
  std::uint64_t failed = 0;
  std::uint64_t set_aside = 0;  // corrupt or unreadable jobs moved out of the way
  std::uint64_t dropped_stale = 0;
  std::uint64_t fenced = 0;       // shards given up because Redis said another member owns them
  std::uint64_t redelivered = 0;  // delivered again after no report within the ack timeout
  std::uint64_t repeated = 0;     // occurrences of repeating jobs scheduled after a delivery
  std::uint64_t skipped = 0;      // missed occurrences of repeats not delivered (repeat-catchup)
  // exactly_once: jobs an earlier owner had in flight whose records a takeover found in Kafka
  // (the shard's delivery log), settled without producing them again
  std::uint64_t recovered = 0;
  DeadLetterCounts dead_lettered_by;  // jobs dead-lettered, by reason
};

// The loop's totals, as the paths keep them.
struct LoopCounters {
  IngestCounters ingest;
  FireCounters fire;

  // Dead letters of both paths, by reason.
  DeadLetterCounts dead_lettered_by() const {
    DeadLetterCounts all = ingest.dead_lettered_by;
    all += fire.dead_lettered_by;
    return all;
  }
};

// A counter's name as /stats shows it, and the field it reads.
template <class Counters>
struct CounterName {
  std::string_view name;
  std::uint64_t Counters::*field;
};

// The names of IngestCounters' totals (the one place they are spelt).
inline constexpr CounterName<IngestCounters> kIngestCounterNames[] = {
    {"accepted", &IngestCounters::accepted},
    {"duplicates", &IngestCounters::duplicates},
    {"cancelled", &IngestCounters::cancelled},
    {"dead_lettered", &IngestCounters::dead_lettered},
    {"dead_letter_retries", &IngestCounters::dead_letter_retries},
    {"rescheduled", &IngestCounters::rescheduled},
    {"reschedules_late", &IngestCounters::reschedules_late},
    {"reschedules_missed", &IngestCounters::reschedules_missed},
    {"reports_running", &IngestCounters::reports_running},
    {"reports_finished", &IngestCounters::reports_finished},
    {"reports_failed", &IngestCounters::reports_failed},
    {"reports_ignored", &IngestCounters::reports_ignored},
    {"reports_unknown", &IngestCounters::reports_unknown},
    {"upserted", &IngestCounters::upserted},
    {"dropped", &IngestCounters::dropped},
    {"ignored", &IngestCounters::ignored},
};

// The names of FireCounters' totals (the one place they are spelt).
inline constexpr CounterName<FireCounters> kFireCounterNames[] = {
    {"produced", &FireCounters::produced},
    {"delivered", &FireCounters::delivered},
    {"retried", &FireCounters::retried},
    {"retried_outage", &FireCounters::retried_outage},
    {"failed", &FireCounters::failed},
    {"set_aside", &FireCounters::set_aside},
    {"dropped_stale", &FireCounters::dropped_stale},
    {"fenced", &FireCounters::fenced},
    {"redelivered", &FireCounters::redelivered},
    {"repeated", &FireCounters::repeated},
    {"skipped", &FireCounters::skipped},
    {"recovered", &FireCounters::recovered},
};

// How the records reached Kafka, and what changes of ownership cost (the sink, Ownership and the
// ingest stages keep them; the loop copies them into its snapshot).
struct DeliveryCounters {
  std::uint64_t transactions_committed = 0;  // exactly_once: the shards' transactions
  std::uint64_t transactions_aborted = 0;
  std::uint64_t transactions_rebuilt = 0;  // a producer replaced after a failure that was no fence
  std::uint64_t purged = 0;                // at_least_once: records purged unsent when a shard was lost
  std::uint64_t retaken = 0;               // shards taken again after a fence gave them up
  std::uint64_t groups_left = 0;           // consumer groups left because Redis was unreachable
  // exactly_once: how long each transaction's commit took (its records' flush and EndTxn, asked
  // again until answered), whatever the outcome. A commit waits for Kafka alone, so a spell of
  // slow ones across every shard at once is the brokers' (a GC pause, a slow disk), not delayd's.
  DurationHistogram commit;
};

// Every total has its name: the structs hold only uint64 totals and their DeadLetterCounts.
static_assert(sizeof(IngestCounters) ==
                  std::size(kIngestCounterNames) * sizeof(std::uint64_t) + sizeof(DeadLetterCounts),
              "every IngestCounters total is named in kIngestCounterNames");
static_assert(sizeof(FireCounters) == std::size(kFireCounterNames) * sizeof(std::uint64_t) + sizeof(DeadLetterCounts),
              "every FireCounters total is named in kFireCounterNames");

// The /stats name of the dead letters of reason `r`: "dead_lettered.<reason>".
inline std::string dead_lettered_name(DeadLetterReason r) { return "dead_lettered." + std::string(to_string(r)); }

}  // namespace delayd::broker
