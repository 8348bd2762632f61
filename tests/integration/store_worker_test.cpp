// StoreWorker's gather (broker/store_worker.hpp): a turn whose oldest request is younger than the
// gather time waits until it is that old and takes what came meanwhile; a backlog older than
// that runs per_turn at once; wait_idle() and the destructor end a wait. The work here records
// the turns and never touches the store (a real one, over the stack's Redis, as the worker
// needs one). Built also with ThreadSanitizer in CI (label concurrency).
#include "broker/store_worker.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "storage/job_store.hpp"
#include "support/redis_connect.hpp"
#include "support/test_env.hpp"

using namespace delayd;
using namespace std::chrono_literals;

namespace {

struct Request {
  int id = 0;
};
struct Result {
  int id = 0;
};
using Worker = broker::StoreWorker<Request, Result>;
using Clock = std::chrono::steady_clock;

// The turns the worker ran (each the ids of its requests), and a gate the work can be held at.
struct Turns {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::vector<int>> turns;
  bool hold = false;     // the work waits while this is true
  bool entered = false;  // the work was called at least once

  Worker::Work work() {
    return [this](storage::JobStore&, std::vector<Request>& batch) {
      std::unique_lock lock(mutex);
      entered = true;
      changed.notify_all();
      changed.wait(lock, [&] { return !hold; });
      std::vector<int> ids;
      std::vector<Result> out;
      for (const Request& r : batch) {
        ids.push_back(r.id);
        out.push_back({r.id});
      }
      turns.push_back(ids);
      changed.notify_all();
      return out;
    };
  }
  // Waits (up to `timeout`) until `n` requests have run; the turns so far.
  std::vector<std::vector<int>> wait_for(std::size_t n, std::chrono::seconds timeout) {
    std::unique_lock lock(mutex);
    changed.wait_for(lock, timeout, [&] {
      std::size_t ran = 0;
      for (const auto& t : turns) ran += t.size();
      return ran >= n;
    });
    return turns;
  }
  // Waits (up to `timeout`) until the work has been called.
  bool wait_entered(std::chrono::seconds timeout) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, timeout, [&] { return entered; });
  }
  void set_hold(bool h) {
    {
      std::lock_guard lock(mutex);
      hold = h;
    }
    changed.notify_all();
  }
};

struct Store {
  redis::RedisConnection redis{testing::redis_options(testing::require_env("REDIS_URL"))};
  storage::JobStore store{redis, storage::KeySchema{testing::unique_name("sw")}, 60};
};

}  // namespace

TEST_CASE("a gathering worker runs the requests of one gather in one turn, once the first is that old",
          "[store_worker]") {
  Store s;
  Turns t;
  const broker::DurationHistogram no_latency;
  Worker w("gather", s.store, no_latency, t.work(), {}, 1, 300ms);
  const Clock::time_point first = Clock::now();
  for (int id = 1; id <= 3; ++id) w.submit({id});
  CHECK(w.take_done().empty());  // it waits, per_turn 1 notwithstanding
  const auto turns = t.wait_for(3, 30s);
  const auto ran_after = Clock::now() - first;
  REQUIRE(turns.size() == 1);
  CHECK(turns.front() == std::vector<int>{1, 2, 3});
  CHECK(ran_after >= 300ms);  // not before the first request was the gather time old
  // The turn is recorded inside the work; its results are posted after it returns.
  REQUIRE(w.wait_idle(30s));
  CHECK(w.take_done().size() == 3);
}

TEST_CASE("a backlog older than the gather time runs per_turn at once", "[store_worker]") {
  Store s;
  Turns t;
  const broker::DurationHistogram no_latency;
  Worker w("gather", s.store, no_latency, t.work(), {}, 1, 50ms);
  t.set_hold(true);
  w.submit({1});  // gathered for 50 ms, then held in its work
  REQUIRE(t.wait_entered(30s));
  for (int id = 2; id <= 4; ++id) w.submit({id});
  std::this_thread::sleep_for(150ms);  // the backlog grows older than the gather time
  t.set_hold(false);
  const auto turns = t.wait_for(4, 30s);
  CHECK(turns == std::vector<std::vector<int>>{{1}, {2}, {3}, {4}});
}

TEST_CASE("wait_idle and the destructor end a gather", "[store_worker]") {
  Store s;
  Turns t;
  const broker::DurationHistogram no_latency;
  {
    Worker w("gather", s.store, no_latency, t.work(), {}, 4, std::chrono::hours(1));
    w.submit({1});
    w.submit({2});
    CHECK(w.wait_idle(20s));  // not an hour
    CHECK(w.take_done().size() == 2);
    w.submit({3});
  }  // the destructor runs the turn in hand: request 3, without waiting the hour out
  const auto turns = t.wait_for(3, 1s);
  REQUIRE(turns.size() == 2);
  CHECK(turns[0] == std::vector<int>{1, 2});
  CHECK(turns[1] == std::vector<int>{3});
}
