// The soak's whole lives (bench/run-scale.sh soak; main.cpp lists the options): jobs published at
// a steady rate, each due `delay-ms` after its publish, of five kinds by index, so that an hour
// under faults takes jobs through every path of their life, not only schedule and fire:
//   i % 20 == 0   cancelled halfway to its due time (a cancel record, keyed as the job)
//   i % 20 == 1   rescheduled halfway to its due time, to half a delay later
//   i % 20 == 2   reported failed at its first delivery (retry-after-ms kRetryAfterMs), so
//                 delivered again with the next attempt, which is reported finished
//   i % 20 == 3   a repeat, every kRepeatEveryMs, kRepeatCount occurrences, repeat-catchup
//                 "all" (an occurrence missed while delayd was down is delivered late, not
//                 skipped: each one is expected); not reported (delayd ignores reports on a
//                 repeating job)
//   the others    reported finished at their delivery
// A reader (LivesReader) takes every ready record on a thread of its own and reports on the
// status topic as the job's kind says. A job's deliveries are its first record (whatever its
// attempt: an attempt whose transaction a kill -9 aborted is never seen by this read_committed
// reader, and the next one is numbered after it), a failing job's retry (a record of a higher
// attempt than the one reported failed), and a repeat's occurrences (by their `repeat` header).
// What it counts:
//   early        a ready record produced before its own deliver-at header (every record: a
//                reschedule that applied shows its new time there; a retry shows its job's, and
//                its lateness counts from retry-after-ms after its failed report was sent)
//   lost         an expected delivery never read: the first of the plain, rescheduled and failing
//                jobs, the failing ones' retries, each occurrence of a repeat
//   duplicates   a second record of a delivery already read
//   cancels and reschedules missed: those that came too late to apply (the job was in flight, or
//                delayd was down past its due time): void by the contract (docs/producing.md),
//                counted, not errors
//   later attempts  deliveries read with a higher attempt than their first possible one (1, or
//                the failed attempt + 1): attempts a kill -9 cut off before their commit
#include <bit>
#include <deque>
#include <mutex>

#include "commands.hpp"

namespace e2e {

namespace {

constexpr std::int64_t kKinds = 20;
constexpr std::int64_t kRetryAfterMs = 1000;
constexpr std::int64_t kRepeatEveryMs = 1000;
constexpr int kRepeatCount = 3;

enum class Kind { cancelled, rescheduled, fails_once, repeat, plain };

Kind kind_of(std::int64_t index) {
  switch (index % kKinds) {
    case 0:
      return Kind::cancelled;
    case 1:
      return Kind::rescheduled;
    case 2:
      return Kind::fails_once;
    case 3:
      return Kind::repeat;
    default:
      return Kind::plain;
  }
}

// The deliveries a job of this kind should have, as bits of its mask: none, the first (bit 0),
// the first and the retry (bits 0 and 1), or occurrences 1 to kRepeatCount (bits 2 and up).
constexpr std::uint8_t kFirst = 0b1, kRetry = 0b10;
std::uint8_t occurrence_bit(std::int64_t repeat) { return static_cast<std::uint8_t>(1u << (repeat + 1)); }
std::uint8_t expected_mask(Kind kind) {
  switch (kind) {
    case Kind::cancelled:
      return 0;
    case Kind::fails_once:
      return kFirst | kRetry;
    case Kind::repeat:
      return static_cast<std::uint8_t>(((1u << kRepeatCount) - 1) << 2);
    default:
      return kFirst;
  }
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::cancelled:
      return "cancelled";
    case Kind::rescheduled:
      return "rescheduled";
    case Kind::fails_once:
      return "fails_once";
    case Kind::repeat:
      return "repeat";
    default:
      return "plain";
  }
}

// What the reader counted; read after LivesReader::finish().
struct LivesTally {
  std::int64_t duplicates = 0, early = 0, foreign = 0, later_attempts = 0, unexpected = 0;
  std::int64_t cancels_missed = 0, reschedules_applied = 0, reschedules_missed = 0;
  std::int64_t retries_delivered = 0, occurrences_delivered = 0, reports = 0;
};

// Reads the ready topic from its start and reports on the status topic (a producer of its own)
// as each job's kind says. Invariant: done_ counts the expected deliveries read at least once.
class LivesReader {
 public:
  LivesReader(const std::string& bootstrap, const std::string& ready, std::string status, std::string tag,
              std::int64_t n, std::int64_t reschedule_by_ms)
      : tag_(std::move(tag)),
        status_(std::move(status)),
        reschedule_by_ms_(reschedule_by_ms),
        reporter_(bootstrap),
        rk_(open_reader(bootstrap, "e2e-lives-" + tag_, ready)),
        seen_(static_cast<std::size_t>(n), 0),
        first_attempt_(static_cast<std::size_t>(n), 0) {
    for (std::int64_t i = 0; i < n; ++i) expected_ += std::popcount(expected_mask(kind_of(i)));
    thread_ = std::thread([this] { run(); });
  }
  ~LivesReader() { stop(); }
  LivesReader(const LivesReader&) = delete;
  LivesReader& operator=(const LivesReader&) = delete;

  // The first deliver-at of job `index`, one to be rescheduled (set before it is sent): what
  // tells a reschedule that applied from one that came too late.
  void published(std::int64_t index, std::int64_t deliver_at) {
    std::lock_guard lock(first_due_mutex_);
    first_due_[index] = deliver_at;
  }

  // Waits until every expected delivery was read or `deadline` passed, then stops reading and
  // flushes the reports. True when all were read. Rethrows what stopped the reading thread.
  bool finish(Clock::time_point deadline) {
    while (done_.load() < expected_ && Clock::now() < deadline && !failed_.load()) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    stop();
    if (error_) std::rethrow_exception(error_);
    reporter_.flush(milliseconds(60000));
    return done_.load() == expected_;
  }

  // Read after finish(): the expected deliveries never read, by kind, with the first few jobs.
  Json lost() const {
    std::map<std::string, std::int64_t> count;
    Json examples = Json::array();
    for (std::size_t i = 0; i < seen_.size(); ++i) {
      const Kind kind = kind_of(static_cast<std::int64_t>(i));
      const int missing = std::popcount(static_cast<std::uint8_t>(expected_mask(kind) & ~seen_[i]));
      if (missing == 0) continue;
      count[kind_name(kind)] += missing;
      if (examples.size() < 10) examples.push_back(job_id(tag_, static_cast<std::int64_t>(i)));
    }
    return {{"by_kind", count}, {"first", examples}};
  }
  std::int64_t expected() const { return expected_; }
  std::int64_t done() const { return done_.load(); }
  // Read after finish().
  const LivesTally& tally() const { return tally_; }
  const std::vector<Delivery>& deliveries() const { return deliveries_; }

 private:
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  void run() {
    try {
      read_until(
          rk_.get(), stop_, "lives reader", [this](const rd_kafka_message_t* m) { take(m); },
          [this] { reporter_.poll(0); });
    } catch (...) {
      error_ = std::current_exception();
      failed_ = true;
    }
  }

  void take(const rd_kafka_message_t* m) {
    const std::int64_t received = epoch_ms();
    const std::int64_t timestamp = rd_kafka_message_timestamp(m, nullptr);
    const auto [due, index] = read_ready(m, tag_);
    if (timestamp < due) ++tally_.early;
    if (!index || *index < 0 || *index >= static_cast<std::int64_t>(seen_.size())) {
      ++tally_.foreign;
      return;
    }
    const auto attempt_text = header(m, "attempt");
    const std::int64_t attempt = attempt_text ? parse_int(*attempt_text).value_or(1) : 1;
    const auto repeat_text = header(m, "repeat");
    const std::int64_t repeat = repeat_text ? parse_int(*repeat_text).value_or(0) : 0;  // 0: none
    const Kind kind = kind_of(*index);
    const auto i = static_cast<std::size_t>(*index);
    std::uint8_t& mask = seen_[i];
    // Which delivery this record is, and the lowest attempt it could have come with.
    std::uint8_t bit = kFirst;
    std::int64_t lowest = 1;
    if (kind == Kind::repeat) {
      if (repeat < 1 || repeat > kRepeatCount) {
        ++tally_.unexpected;  // a repeat's record without its occurrence: delayd's contract broken
        return;
      }
      bit = occurrence_bit(repeat);
    } else if (kind == Kind::fails_once && (mask & kFirst) && attempt > first_attempt_[i]) {
      bit = kRetry;
      lowest = first_attempt_[i] + 1;
    }
    if (mask & bit) {
      ++tally_.duplicates;
      return;  // reported the first time
    }
    mask |= bit;
    if (bit == kFirst) first_attempt_[i] = static_cast<std::uint8_t>(std::min<std::int64_t>(attempt, 255));
    if (attempt > lowest) ++tally_.later_attempts;
    // A retry is due retry-after-ms after delayd applied the failed report, which it read after
    // this reader sent it: its lateness counts from then, not from the job's deliver-at (which
    // would count the retry's wait as lateness); capped at its timestamp, so that a delivery
    // again for another reason (a redelivery) is not counted early.
    std::int64_t due_at = due;
    if (bit == kRetry) {
      if (const auto f = failed_at_.find(*index); f != failed_at_.end()) {
        due_at = std::max(due, std::min(f->second + kRetryAfterMs, timestamp));
        failed_at_.erase(f);
      }
    }
    deliveries_.push_back({*index, due_at, timestamp, received});
    if (kind == Kind::cancelled) {
      ++tally_.cancels_missed;  // its cancel came too late: not an expected delivery
    } else {
      done_.fetch_add(1);
      if (kind == Kind::rescheduled) {
        std::int64_t first = 0;
        {
          std::lock_guard lock(first_due_mutex_);
          first = first_due_[*index];
        }
        ++(due >= first + reschedule_by_ms_ ? tally_.reschedules_applied : tally_.reschedules_missed);
      } else if (bit == kRetry) {
        ++tally_.retries_delivered;
      } else if (kind == Kind::repeat) {
        ++tally_.occurrences_delivered;
      }
    }
    if (kind != Kind::repeat) {
      const bool fail = kind == Kind::fails_once && bit == kFirst;
      if (fail) failed_at_[*index] = epoch_ms();
      report(job_id(tag_, *index), attempt, fail);
    }
  }

  // Reports the delivery of `attempt` finished, or failed (to be delivered again after
  // kRetryAfterMs), keyed as the job's schedule (record_key()).
  void report(std::string_view id, std::int64_t attempt, bool fail) {
    const std::string attempt_text = std::to_string(attempt);
    if (fail) {
      const std::string retry = std::to_string(kRetryAfterMs);
      reporter_.send_record(status_, record_key(id), "",
                            {{"job-id", id},
                             {"status", "failed"},
                             {"attempt", attempt_text},
                             {"retry-after-ms", retry},
                             {"error", "the soak fails it once"}});
    } else {
      reporter_.send_record(status_, record_key(id), "",
                            {{"job-id", id}, {"status", "finished"}, {"attempt", attempt_text}});
    }
    ++tally_.reports;
  }

  std::string tag_, status_;
  std::int64_t reschedule_by_ms_;
  Producer reporter_;
  ConsumerPtr rk_;
  std::vector<std::uint8_t> seen_;           // per job: the deliveries read (expected_mask()'s bits)
  std::vector<std::uint8_t> first_attempt_;  // per job: the attempt of its first delivery
  std::int64_t expected_ = 0;
  std::vector<Delivery> deliveries_;
  LivesTally tally_;
  std::mutex first_due_mutex_;
  std::map<std::int64_t, std::int64_t> first_due_;  // rescheduled jobs: index -> first deliver-at
  // Jobs reported failed whose retry is not read yet: index -> epoch ms the report was sent.
  std::map<std::int64_t, std::int64_t> failed_at_;
  std::atomic<std::int64_t> done_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  std::thread thread_;  // last: it starts once everything above is in place
};

// A cancel or reschedule to send at `at_ms` (epoch ms) about job `index`.
struct Followup {
  std::int64_t at_ms = 0;
  std::int64_t index = 0;
  std::int64_t new_due = 0;  // a reschedule's new deliver-at; 0 for a cancel
};

}  // namespace

int cmd_lives(const Options& o) {
  const Phase ph(o);
  const std::string ingest = o.required("ingest-topic"), ready = o.required("ready-topic");
  const std::string status = o.required("status-topic");
  const std::int64_t rate = o.num("rate", 1000), secs = o.num("seconds", 60), delay_ms = o.required_num("delay-ms");
  if (delay_ms < 200) throw UsageError("--delay-ms must be at least 200 (cancels and reschedules go halfway)");
  const std::string figure = o.str("figure", "lateness_lives_per_s");
  const std::string stem = lateness_stem(figure);
  const std::int64_t n = rate * secs;
  const std::int64_t halfway = delay_ms / 2;
  Producer producer(ph.bootstrap);
  create_topic(producer.handle(), ready);
  const std::int64_t warmup_ms = warm_up(ph.bootstrap, ph.tag, producer, ingest, ready);
  LivesReader reader(ph.bootstrap, ready, status, ph.tag, n, halfway);

  const CpuWindow cpu(o);
  const auto t0 = Clock::now();
  std::deque<Followup> followups;  // in the order of their times: every job's is its publish + halfway
  std::int64_t sent = 0, cancels = 0, reschedules = 0;
  auto send_followups = [&](std::int64_t now) {
    while (!followups.empty() && followups.front().at_ms <= now) {
      const Followup f = followups.front();
      followups.pop_front();
      const std::string id = job_id(ph.tag, f.index);
      const std::string key = record_key(id);  // the job's key: the same partition, so the same job
      if (f.new_due == 0) {
        producer.send_record(ingest, key, "", {{"op", "cancel"}, {"job-id", id}, {"business", kBusiness}});
        ++cancels;
      } else {
        const std::string due = std::to_string(f.new_due);
        producer.send_record(ingest, key, "",
                             {{"op", "reschedule"}, {"job-id", id}, {"business", kBusiness}, {"deliver-at", due}});
        ++reschedules;
      }
    }
  };
  Clock::time_point last_send = t0;
  const std::string every = std::to_string(kRepeatEveryMs), count = std::to_string(kRepeatCount);
  while (sent < n) {
    const double elapsed = seconds_between(t0, Clock::now());
    const auto target = std::min<std::int64_t>(n, static_cast<std::int64_t>(elapsed * static_cast<double>(rate)) + 1);
    for (; sent < target; ++sent) {
      const std::int64_t now = epoch_ms(), due = now + delay_ms;
      const std::string id = job_id(ph.tag, sent);
      switch (kind_of(sent)) {
        case Kind::repeat: {
          const std::string due_text = std::to_string(due);
          producer.send_record(ingest, record_key(id), value_of(sent),
                               {{"deliver-at", due_text},
                                {"business", kBusiness},
                                {"job-id", id},
                                {"repeat-every-ms", every},
                                {"repeat-count", count},
                                {"repeat-catchup", "all"}});
          break;
        }
        case Kind::cancelled:
          producer.send(ingest, id, due, value_of(sent));
          followups.push_back({now + halfway, sent, 0});
          break;
        case Kind::rescheduled:
          reader.published(sent, due);
          producer.send(ingest, id, due, value_of(sent));
          followups.push_back({now + halfway, sent, due + halfway});
          break;
        default:
          producer.send(ingest, id, due, value_of(sent));
      }
    }
    send_followups(epoch_ms());
    last_send = Clock::now();
    producer.poll(0);
    if (sent < n) std::this_thread::sleep_for(milliseconds(1));
  }
  while (!followups.empty()) {
    std::this_thread::sleep_for(milliseconds(std::max<std::int64_t>(followups.front().at_ms - epoch_ms(), 1)));
    send_followups(epoch_ms());
    producer.poll(0);
  }
  producer.flush(milliseconds(300000));
  const double span_s = seconds_between(t0, last_send);
  const double achieved = span_s > 0 ? static_cast<double>(n - 1) / span_s : static_cast<double>(n);
  const bool whole = reader.finish(Clock::now() + milliseconds(delay_ms + halfway + kRetryAfterMs) +
                                   milliseconds(kRepeatEveryMs * kRepeatCount) + seconds(60) + milliseconds(n / 5));
  const Json lives_cpu = cpu.figure(stem, n);

  emit_whole_life(ph, {figure, rate, secs, delay_ms, warmup_ms, achieved}, reader.deliveries(), lives_cpu);

  const LivesTally& t = reader.tally();
  const std::int64_t lost = reader.expected() - reader.done();
  const bool ok = whole && lost == 0 && t.early == 0 && t.unexpected == 0;
  emit({{"figure", stem + "_check"},
        {"jobs", n},
        {"expected", reader.expected()},
        {"delivered", reader.done()},
        {"lost", lost},
        {"lost_jobs", reader.lost()},
        {"duplicates", t.duplicates},
        {"early", t.early},
        {"foreign", t.foreign},
        {"later_attempts", t.later_attempts},
        {"unexpected", t.unexpected},
        {"cancels", {{"sent", cancels}, {"missed", t.cancels_missed}}},
        {"reschedules", {{"sent", reschedules}, {"applied", t.reschedules_applied}, {"missed", t.reschedules_missed}}},
        {"retries", {{"expected", (n + kKinds - 3) / kKinds}, {"delivered", t.retries_delivered}}},
        {"repeat_occurrences", {{"every_ms", kRepeatEveryMs}, {"delivered", t.occurrences_delivered}}},
        {"reports", t.reports},
        {"ok", ok}});
  if (ok) return 0;
  note(stem + ": pipeline broken: " + std::to_string(lost) + " lost, " + std::to_string(t.early) + " early");
  return kPipelineBroken;
}

}  // namespace e2e
