#include "storage/job_browse.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

#include "base/debug_assert.hpp"
#include "storage/job_record.hpp"

namespace delayd::storage {

namespace {

// A place in the one sequence of a state's walk over all shards.
struct Place {
  std::int64_t score = 0;
  std::string_view job_id;
  std::string_view shard;
  auto tie() const { return std::tie(score, job_id, shard); }
};

// Whether a comes before b in the walk (earliest first for delay, newest first otherwise).
bool before(const Place& a, const Place& b, bool newest_first) {
  return newest_first ? b.tie() < a.tie() : a.tie() < b.tie();
}

std::string lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

}  // namespace

WalkPage walk_jobs(JobStore& store, const JobFilter& filter, const WalkCursor& cursor, std::size_t limit,
                   std::int64_t now_ms) {
  DELAYD_ASSERT(limit >= 1, "a page holds at least one job", limit);
  const std::vector<JobState> states = filter.states.empty() ? all_walk_states() : filter.states;
  const std::vector<std::string> shards = store.shards();
  WalkPage page;
  WalkCursor at = cursor;
  while (at.state < states.size()) {
    const JobState state = states[at.state];
    DELAYD_ASSERT(job_record::is_stored(state), "a walk goes through stored states only", to_string(state));
    const bool newest_first = state != JobState::delay;
    if (page.examined >= kPageBudget) {
      page.partial = true;
      page.next = at;
      return page;
    }
    std::vector<std::pair<std::string, BrowseQuery>> walks;
    for (const std::string& shard : shards) {
      BrowseQuery q;
      q.state = state;
      q.walk_start = at.walk_start;
      q.from = at.at;
      // The entry at `at` itself belongs to this shard's part only if the shard comes after
      // at.shard in the walk's order.
      q.inclusive = at.at && (newest_first ? shard < at.shard : shard > at.shard);
      if (newest_first) {
        q.lo = 0;
        q.hi = at.walk_start;
        q.deliver_from = filter.due_from;
        q.deliver_to = filter.due_to;
      } else {
        q.lo = filter.due_from.value_or(0);
        q.hi = filter.due_to.value_or(kMaxWalkScore);
      }
      q.want = limit - page.jobs.size();
      q.budget = kCallBudget;
      q.business = filter.business;
      q.id_prefix = filter.id_prefix;
      q.error_text = lower(filter.error_text);
      walks.emplace_back(shard, std::move(q));
    }
    const std::vector<BrowsePage> pages = walks.empty() ? std::vector<BrowsePage>{} : store.browse(walks, now_ms);
    // The frontier: the nearest place up to which a shard that is not done has looked.
    std::optional<Place> frontier;
    std::vector<const BrowsedJob*> found;
    for (std::size_t s = 0; s < pages.size(); ++s) {
      page.examined += pages[s].examined;
      for (const BrowsedJob& j : pages[s].jobs) found.push_back(&j);
      if (pages[s].done || !pages[s].last) continue;
      const Place p{pages[s].last->score, pages[s].last->job_id, walks[s].first};
      if (!frontier || before(p, *frontier, newest_first)) frontier = p;
    }
    const auto place = [](const BrowsedJob* j) { return Place{j->score, j->job_id, j->shard}; };
    std::sort(found.begin(), found.end(),
              [&](const BrowsedJob* a, const BrowsedJob* b) { return before(place(a), place(b), newest_first); });
    for (const BrowsedJob* j : found) {
      if (frontier && before(*frontier, place(j), newest_first)) break;
      page.jobs.push_back(*j);
      if (page.jobs.size() == limit) break;
    }
    if (page.jobs.size() == limit) {
      const BrowsedJob& last = page.jobs.back();
      at.at = WalkPosition{last.score, last.job_id};
      at.shard = last.shard;
      page.next = at;
      return page;
    }
    if (!frontier) {  // every shard is done with this state
      ++at.state;
      at.at.reset();
      at.shard.clear();
      continue;
    }
    at.at = WalkPosition{frontier->score, std::string(frontier->job_id)};
    at.shard = std::string(frontier->shard);
  }
  return page;  // the walk is over
}

JobCount count_jobs(JobStore& store, const JobFilter& filter, std::int64_t now_ms,
                    std::chrono::milliseconds for_at_most) {
  constexpr std::size_t kCountPage = 500;
  const auto until = std::chrono::steady_clock::now() + for_at_most;
  JobCount count;
  WalkCursor c{now_ms, 0, {}, {}};
  while (std::chrono::steady_clock::now() < until) {
    const WalkPage p = walk_jobs(store, filter, c, kCountPage, now_ms);
    count.matched += static_cast<std::int64_t>(p.jobs.size());
    count.examined += p.examined;
    if (!p.next) {
      count.complete = true;
      break;
    }
    c = *p.next;
  }
  return count;
}

}  // namespace delayd::storage
